"""Application replay: a discrete-event simulation of an event trace on a cluster.

This module holds the cluster, the mappings, the measured side (S_m, E_abs) and ``Simulator``, which
picks an engine: the C core (``hpcvar.sim.replay_native``: lowering in native/sim/lower.c, the replay in
native/sim/replay.c) or the Python reference (``hpcvar.sim.replay_ref``: ``lower`` and ``RefEngine``,
where the semantics are written down). docs/replay.md describes both and what the tests guarantee.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from hpcvar.errors import InputFileError, UsageError, read_user_text
from hpcvar.sim.replay_ref import RefEngine, Result, Xfer, lower  # noqa: F401 (re-exported)
from hpcvar.traces.parquet import MAX_TASKS, Trace

MODELS = ("none", "gige", "myrinet", "maxmin")
# the task mappings by name (a mapping file is given by its path: sim app --mapping-file)
RRN, RRP, RANDOM = "rrn", "rrp", "random"
MAPPINGS = (RRN, RRP, RANDOM)
ENGINES = ("auto", "native", "python")


@dataclass
class Cluster:
    nodes: int
    cores_per_node: int
    bandwidth: float               # bytes/s of a node's network link
    latency: float                 # s, per inter-node message
    shm_bandwidth: float = 5e9     # bytes/s inside a node
    shm_latency: float = 5e-7      # s inside a node
    links: dict[tuple[int, int], tuple[float, float]] = field(default_factory=dict)  # (a,b) -> (bw, lat)
    # added to the latency of a message above the eager limit (rendezvous: the RTS/CTS handshake and, on shared
    # memory, the single-copy set-up that an eager message does not pay), between nodes and inside a node
    rndv_latency: float = 0.0
    shm_rndv_latency: float = 0.0
    # bytes of a rendezvous message between nodes that the transport may still hold when the send completes (a
    # TCP socket's send buffer): such a send completes once at most this many of its bytes are left to deliver,
    # not with its transfer; 0 = with the transfer. Measured by hpcvar bench latency ("buffered").
    send_buffer: float = 0.0
    # bytes of a rendezvous message between nodes sent with its request, before the receive is posted (Open MPI's
    # ob1 sends the first eager-limit bytes with the RTS); 0 = none
    rndv_first: float = 0.0
    # a pair of tasks' messages between nodes flow one after the other, as a transport's connection carries them
    # (their data phases in series, each waiting for the one before it to end), under a contention model; False: each
    # message is a flow of its own, sharing the links with the pair's other messages (SimGrid's SMPI does this)
    pair_serial: bool = True
    # flop/s of a core: turns the flops of a time-independent (TIT) trace into seconds when it is read; None = not
    # given (the reader's default, 1e9)
    flops_rate: float | None = None

    def link(self, a: int, b: int) -> tuple[float, float]:
        return self.links.get((a, b)) or self.links.get((b, a)) or (self.bandwidth, self.latency)


# Bounds of a cluster or mapping file: beyond them a value is a typo, not a machine to simulate (a task or
# node number is an index of per-task arrays: 10**22 would fill the memory long before the replay starts).
MAX_NODES = 1 << 20
MAX_CORES_PER_NODE = 1 << 16
_CLUSTER_KEYS = ("nodes", "cores_per_node", "bandwidth", "latency", "shm_bandwidth", "shm_latency", "rndv_latency",
                 "shm_rndv_latency", "send_buffer", "rndv_first", "flops_rate")


def _cluster_value(key: str, text: str, path: str, line: int) -> float:
    """One value of a cluster file: counts bare (whole numbers within bounds); bandwidths as tc rates or
    bytes/s with a capital B (1gbit, 125MB/s); latencies as times with their unit (50us). A bare rate or time
    is refused (its unit would be a guess); ValueError (with the reason) for a count that is not a number or
    absurd, InputFileError for a value without its unit."""
    from hpcvar import units

    if key == "flops_rate":  # flop/s, a bare number (no other unit is possible)
        from hpcvar.traces.tit import MAX_FLOPS_RATE

        v = float(text)
        if not 0 < v <= MAX_FLOPS_RATE:
            raise ValueError(f"flops_rate must be in (0, {MAX_FLOPS_RATE:g}] flop/s")
        return v
    if key in ("nodes", "cores_per_node"):
        v = float(text)  # ValueError for non-numbers; never OverflowError ('1e999' is inf)
        hi = MAX_NODES if key == "nodes" else MAX_CORES_PER_NODE
        if not math.isfinite(v) or v != int(v) or not 1 <= v <= hi:
            raise ValueError(f"{key} must be a whole number in 1..{hi}")
        return v
    where = f"{path}:{line}"
    try:
        if key in ("send_buffer", "rndv_first"):
            return float(units.parse_size(text, where))
        if key.endswith("bandwidth"):
            return units.parse_byte_rate(text, where)
        return units.parse_time(text, where)
    except UsageError as e:
        raise InputFileError(f"{key}: {e.what}", path, line, todo=e.todo) from None


def _index(text: str, what: str, hi: int) -> int:
    """A node or task number in 0..hi-1 (ValueError otherwise: '1e3', '-1', 10**22)."""
    n = int(text)
    if not 0 <= n < hi:
        raise ValueError(f"{what} {text[:30]} is outside 0..{hi - 1}")
    return n


def _cluster_line(line: list[str], raw: str, path: str, i: int, kv: dict, links: dict, link_lines: dict) -> None:
    """A 'key value' line into kv, a 'link A B BANDWIDTH LATENCY' line into links (and its line number)."""
    try:
        if line[0] == "link" and len(line) == 5:
            key = (_index(line[1], "node", MAX_NODES), _index(line[2], "node", MAX_NODES))
            links[key] = (_cluster_value("bandwidth", line[3], path, i), _cluster_value("latency", line[4], path, i))
            link_lines[key] = i
        elif line[0] in _CLUSTER_KEYS and len(line) == 2:
            kv[line[0]] = _cluster_value(line[0], line[1], path, i)
        else:
            raise ValueError
    except ValueError as e:
        raise InputFileError(f"cannot read '{raw.strip()}'{f' ({e})' if str(e) else ''}", path, i,
                             todo="Write 'nodes 4', 'bandwidth 1gbit', 'latency 50us', "
                                  "'link 0 1 1gbit 50us' (rates and times take their unit)") from None


def load_cluster(path: str) -> Cluster:
    """A cluster file: 'key value' lines (nodes, cores_per_node, bandwidth, latency, shm_bandwidth,
    shm_latency, rndv_latency, shm_rndv_latency, send_buffer, rndv_first, flops_rate) and 'link A B BANDWIDTH
    LATENCY' lines; '#' starts a comment. Bandwidths and latencies take their unit (1gbit or 125MB/s, 50us);
    send_buffer and rndv_first are sizes (512KiB); flops_rate is in flop/s (1e9)."""
    from pathlib import Path

    p = Path(path)
    if not p.is_file():
        raise InputFileError("no such cluster file", path, todo="Give a file of 'key value' lines (docs/replay.md)")
    kv: dict[str, float] = {}
    links: dict = {}
    link_lines: dict = {}
    for i, raw in enumerate(read_user_text(p).splitlines(), 1):
        line = raw.split("#", 1)[0].split()
        if line:
            _cluster_line(line, raw, path, i, kv, links, link_lines)
    for k in ("nodes", "cores_per_node", "bandwidth", "latency"):
        if k not in kv:
            raise InputFileError(f"the cluster file lacks '{k}'", path, todo=f"Add a line '{k} VALUE'")
    c = Cluster(nodes=int(kv["nodes"]), cores_per_node=int(kv["cores_per_node"]), bandwidth=kv["bandwidth"],
                latency=kv["latency"], links=links)
    if "shm_bandwidth" in kv:
        c.shm_bandwidth = kv["shm_bandwidth"]
    for k in ("shm_latency", "rndv_latency", "shm_rndv_latency", "send_buffer", "rndv_first", "flops_rate"):
        if k in kv:
            setattr(c, k, kv[k])
    for (a, b) in links:
        if not (0 <= a < c.nodes and 0 <= b < c.nodes):
            raise InputFileError(f"link {a} {b} names a node outside 0..{c.nodes - 1}", path, link_lines[(a, b)],
                                 todo="Fix the node numbers or 'nodes'")
    return c


# ---- mappings ----

def mapping(kind: str, ntasks: int, cluster: Cluster, seed: int = 1) -> list[int]:
    """Node of each task: rrn (cyclic over nodes), rrp (fill a node first), random (seeded); any other
    ``kind`` is the path of a mapping file (``load_mapping``)."""
    slots = cluster.nodes * cluster.cores_per_node
    if kind in MAPPINGS and ntasks > slots:
        raise UsageError(f"{ntasks} tasks do not fit on {cluster.nodes} nodes x {cluster.cores_per_node} cores",
                         "--mapping", "Give more --nodes or --cores-per-node")
    if kind == RRN:
        return [t % cluster.nodes for t in range(ntasks)]
    if kind == RRP:
        return [t // cluster.cores_per_node for t in range(ntasks)]
    if kind == RANDOM:
        perm = np.random.default_rng(seed).permutation(slots)[:ntasks]
        return [int(s) // cluster.cores_per_node for s in perm]
    return load_mapping(kind, ntasks, cluster)


def load_mapping(path: str, ntasks: int, cluster: Cluster) -> list[int]:
    """A mapping file: 'TASK NODE' per line ('#' comments); every task exactly once."""
    from pathlib import Path

    p = Path(path)
    if not p.is_file():
        raise UsageError(f"no mapping file '{path}'", "--mapping-file", "Give a file of 'TASK NODE' lines")
    out: dict[int, int] = {}
    for i, raw in enumerate(read_user_text(p).splitlines(), 1):
        f = raw.split("#", 1)[0].split()
        if not f:
            continue
        try:
            if len(f) != 2:
                raise ValueError
            t, n = _index(f[0], "task", MAX_TASKS), _index(f[1], "node", MAX_NODES)
        except ValueError as e:
            raise InputFileError(f"cannot read '{raw.strip()}'{f' ({e})' if str(e) else ''}", path, i,
                                 todo="Write 'TASK NODE', e.g. '3 1'") from None
        if not 0 <= n < cluster.nodes:
            raise InputFileError(f"node {n} is outside 0..{cluster.nodes - 1}", path, i,
                                 todo="Fix the node or give more --nodes")
        if t in out:
            raise InputFileError(f"task {t} is mapped twice", path, i, todo="Map every task once")
        out[t] = n
    missing = [t for t in range(ntasks) if t not in out]
    if missing:
        raise InputFileError(f"the mapping does not cover tasks {missing[:10]}{'...' if len(missing) > 10 else ''}",
                             path, todo=f"Give a node for each of the {ntasks} tasks")
    extra = [t for t in out if t >= ntasks]
    if extra:
        raise InputFileError(f"tasks {extra[:10]} are not in the trace (it has {ntasks})", path,
                             todo="Remove them")
    count = np.bincount([out[t] for t in range(ntasks)], minlength=cluster.nodes)
    if count.max() > cluster.cores_per_node:
        raise InputFileError(f"node {int(count.argmax())} gets {int(count.max())} tasks for "
                             f"{cluster.cores_per_node} cores", path, todo="Spread the tasks or raise --cores-per-node")
    return [out[t] for t in range(ntasks)]


class Simulator:
    """One replay: a trace on a cluster under a mapping and a model. ``lowered`` (the reference's op lists)
    and ``encoded`` (the C core's arrays) are computed on first use when not given; both depend only on the
    trace and the collective algorithm, so callers pass them along to replay one trace many times."""

    def __init__(self, trace: Trace, cluster: Cluster, node_of: list[int], model: str = "none",  # noqa: PLR0913
                 params: dict | None = None, algo: str = "binomial", eager_bytes: int = 65536,
                 jitter=None, lowered=None, engine: str = "auto", encoded=None, keep_rows: bool = True,
                 progress=None, compute: str = "wall"):
        if engine not in ENGINES:
            raise UsageError(f"unknown replay engine '{engine}'", "--engine", f"Use one of {', '.join(ENGINES)}")
        if model not in MODELS:
            raise UsageError(f"unknown model '{model}'", "--model", f"Use one of {', '.join(MODELS)}")
        if len(node_of) != trace.ntasks:
            raise UsageError(f"the mapping covers {len(node_of)} tasks, the trace has {trace.ntasks}", "--mapping",
                             "Map every task")
        self.trace, self.cluster, self.node_of = trace, cluster, node_of
        self.model, self.params, self.eager, self.algo = model, params, eager_bytes, algo
        self.compute = compute  # how compute rows are taken from the trace (lower): wall or cpu
        self._ops = lowered
        self.jitter = jitter  # a ReplayJitter (both engines), any callable(task, start_s, dur_s) (Python), or None
        self.encoded = encoded
        self.keep_rows, self.progress = keep_rows, progress
        self.engine = self.engine_for(engine)

    @property
    def ops(self) -> list[list[tuple]]:
        if self._ops is None:
            self._ops = lower(self.trace, self.algo, self.compute)[0]
        return self._ops

    def engine_for(self, engine: str) -> str:
        """The engine that runs: native (the C core: every model, jitter given as a ReplayJitter) when
        libhv_replay.so is installed; else python (the reference). 'native' where the core cannot run is a
        usage error."""
        from hpcvar.sim import replay_native
        from hpcvar.sim.replay_jitter import ReplayJitter

        fits = self.model in replay_native.MODEL_CODES and (self.jitter is None or isinstance(self.jitter,
                                                                                              ReplayJitter))
        if engine == "python" or (engine == "auto" and not fits):
            return "python"
        if not fits:
            raise UsageError("the native replay core takes jitter only as a ReplayJitter (a jitter trace)",
                             "--engine", "Use --engine auto or python")
        if engine == "native":
            replay_native.lib()  # a clear MissingToolError if it is not installed
            return "native"
        return "native" if replay_native.available() else "python"

    def run(self) -> Result:
        if self.engine == "native":
            from hpcvar.sim import replay_native

            if getattr(self.encoded, "byte_off", None) is not None:  # a StreamEncoded: the ops are in a file
                from hpcvar.sim import replay_stream

                return replay_stream.run(self, self.encoded, self.progress)
            if self.encoded is None:
                self.encoded = replay_native.lower_native(self.trace, self.algo, compute=self.compute) \
                    if self._ops is None \
                    else replay_native.encode(self._ops)
            return replay_native.run(self, self.encoded, self.keep_rows, self.progress)
        return self.run_python()

    def run_python(self) -> Result:
        """The reference engine (pure Python, hpcvar.sim.replay_ref)."""
        return RefEngine(self.ops, self.trace.ntasks, self.cluster, self.node_of, self.model, self.params, self.eager,
                         self.jitter, self.trace.source or "trace").run()



def mpi_time_s(ev, ntasks: int) -> np.ndarray:
    """Seconds each task spent inside MPI calls: the union of its rows' [t_start, t_end] intervals
    (init/finalize excluded), plus the time in polls that found nothing (``poll_ns``: they lie between rows). A
    union, not a sum: the tracer writes one row per request of a Waitall and a row for each half of a Sendrecv,
    all with the call's own entry and exit times.
    Vectorised: rows in (task, t_start, t_end) order (sorted only when they are not already), the
    running maximum of the ends within each task, and a bincount of the newly covered time."""
    polls: np.ndarray = np.zeros(ntasks)
    if "poll_ns" in ev.columns and len(ev):  # exact: integer sums below 2^53 ns
        polls = np.bincount(ev["task"].to_numpy(), weights=ev["poll_ns"].to_numpy(), minlength=ntasks)
    return (_union_ns(ev, ntasks) + polls) * 1e-9


def _union_ns(ev, ntasks: int) -> np.ndarray:
    """ns per task covered by the MPI rows' [t_start, t_end] intervals (mpi_time_s)."""
    keep = ~ev["op"].isin(["init", "finalize"]).to_numpy()
    task = ev["task"].to_numpy()[keep]
    start = ev["t_start_ns"].to_numpy()[keep]
    end = ev["t_end_ns"].to_numpy()[keep]
    if not len(task):
        return np.zeros(ntasks)
    same = task[1:] == task[:-1]
    ordered = bool(np.all((task[1:] > task[:-1]) | (same & ((start[1:] > start[:-1]) |
                                                           ((start[1:] == start[:-1]) & (end[1:] >= end[:-1]))))))
    if not ordered:
        order = np.lexsort((end, start, task))
        task, start, end = task[order], start[order], end[order]
        same = task[1:] == task[:-1]
    first = np.concatenate(([True], ~same))
    reach = _cummax_by(task, end, first)  # the latest end so far within the task, this row included
    prev = np.concatenate(([-np.inf], reach[:-1].astype(np.float64)))
    prev[first] = -np.inf
    endf = end.astype(np.float64)
    covered = np.clip(endf - np.maximum(start.astype(np.float64), prev), 0.0, None)
    return np.bincount(task, weights=covered, minlength=ntasks)


def _cummax_by(groups: np.ndarray, values: np.ndarray, first: np.ndarray | None = None) -> np.ndarray:
    """Running maximum of int64 ``values`` restarted at each group (rows grouped consecutively): one
    np.maximum.accumulate over values lifted by a per-group offset that keeps groups apart."""
    if first is None:
        first = np.concatenate(([True], groups[1:] != groups[:-1]))
    values = np.asarray(values, np.int64)
    lo, hi = int(values.min()), int(values.max())
    gid = np.cumsum(first) - 1
    span = hi - lo + 1
    if span * (int(gid[-1]) + 1) < 2**62:
        lifted = (values - lo) + gid * span
        return np.maximum.accumulate(lifted) - gid * span + lo
    import pandas as pd

    return pd.Series(values).groupby(gid).cummax().to_numpy()


def measured(trace: Trace) -> tuple[np.ndarray, np.ndarray]:
    """Measured (total_s, comm_s) per task: S_m = the time inside MPI calls (mpi_time_s), the span from
    the first row's start to the last row's end."""
    ev = trace.events
    comm = mpi_time_s(ev, trace.ntasks)
    task = ev["task"].to_numpy()
    last = np.full(trace.ntasks, np.iinfo(np.int64).min)
    firsts = np.full(trace.ntasks, np.iinfo(np.int64).max)
    if len(task):
        np.maximum.at(last, task, ev["t_end_ns"].to_numpy()) if not _grouped(task) else \
            _reduce_sorted(np.maximum, last, task, ev["t_end_ns"].to_numpy())
        np.minimum.at(firsts, task, ev["t_start_ns"].to_numpy()) if not _grouped(task) else \
            _reduce_sorted(np.minimum, firsts, task, ev["t_start_ns"].to_numpy())
    present = last > np.iinfo(np.int64).min
    span = np.where(present, last - np.where(present, firsts, 0), 0)
    return span * 1e-9, comm


def _grouped(task: np.ndarray) -> bool:
    return bool(np.all(task[1:] >= task[:-1]))


def _reduce_sorted(ufunc, out: np.ndarray, task: np.ndarray, values: np.ndarray) -> None:
    starts = np.flatnonzero(np.concatenate(([True], task[1:] != task[:-1])))
    out[task[starts]] = ufunc.reduceat(values, starts)


def e_abs(sp: np.ndarray, sm: np.ndarray) -> np.ndarray:
    """Per-task E_abs = |(S_p - S_m) / S_m| x 100 (section VI-B); NaN where S_m = 0."""
    sm = np.asarray(sm, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(sm > 0, np.abs((np.asarray(sp) - sm) / sm) * 100.0, np.nan)


def timeline(result: Result, trace: Trace) -> list[dict]:
    """Simulated rows as (task, seq, op, start_s, end_s), for the Chrome/Perfetto export."""
    ops = dict(zip(zip(trace.events["task"].to_numpy().tolist(), trace.events["seq"].to_numpy().tolist(), strict=True),
                   trace.events["op"].tolist(), strict=False))
    out = []
    for row, t0 in result.row_start.items():
        out.append({"task": row[0], "seq": row[1], "op": ops.get(row, "?"), "start_s": t0,
                    "end_s": result.row_end.get(row, t0)})
    out.sort(key=lambda r: (r["task"], r["seq"]))
    return out


__all__ = ["Cluster", "MODELS", "Result", "Simulator", "e_abs", "load_cluster", "load_mapping", "lower", "mapping",
           "measured", "mpi_time_s", "timeline"]
