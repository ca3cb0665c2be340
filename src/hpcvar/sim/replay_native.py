"""The C core of the application replay (native/sim/replay.c, lower.c) through ctypes.

``lower_native(trace, algo)`` lowers the trace's rows into flat op arrays in C (match keys, requests and
rows as dense integer ids; native/sim/lower.c, the compiled twin of ``replay_ref.lower``); it depends
only on the trace, so one encoding serves every mapping x model x replica. ``encode(ops)`` builds the
same arrays from the reference's Python op lists (tests compare both). ``run(sim, enc)`` replays them in
C and returns the same ``Result`` as the Python engine (``hpcvar.sim.replay_ref.RefEngine``), which
stays the reference: the core processes the same events in the same order with the same arithmetic
(tests/unit/test_replay_native.py).

The core covers every model (none, maxmin, gige, myrinet) and ``--jitter`` (a ``ReplayJitter``).
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from hpcvar._native import config_library, loads
from hpcvar.errors import HpcvarError

MODEL_CODES = {"none": 0, "maxmin": 1, "gige": 2, "myrinet": 3}
ALGO_CODES = {"binomial": 0, "recdoub": 1, "ring": 2}
KIND_NAMES = ("none", "out", "in", "in-out")
PROGRESS_EVERY = 1 << 20  # events between two progress callbacks (replay.c)
_P = ctypes.c_void_p
_I64, _I32, _F64 = ctypes.c_int64, ctypes.c_int32, ctypes.c_double
PROGRESS_FN = ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.c_int64)


class _Config(ctypes.Structure):
    _fields_ = ([(n, _I64) for n in ("ntasks", "nops", "nreqs", "nkeys", "nrows", "nnodes")]
                + [("model", _I32), ("myr_method", _I32)]
                + [(n, _F64) for n in ("beta", "gamma_in", "gamma_out")]
                + [(n, _I64) for n in ("myr_max_states", "myr_samples", "myr_seed")]
                + [(n, _F64) for n in ("eager", "bandwidth", "latency", "shm_bandwidth", "shm_latency", "rndv_latency",
                                       "shm_rndv_latency", "send_buffer", "rndv_first")]
                + [("pair_serial", _I64)]
                + [("nlinks", _I64)] + [(n, _P) for n in ("link_key", "link_bw", "link_lat")]
                + [(n, _P) for n in ("task_off", "kind", "peer", "val", "key", "req", "wreq", "row", "node_of")]
                + [("njtr", _I64)] + [(n, _P) for n in ("jtr_off", "jtr_d", "jtr_g", "jtr_S", "jtr_pos")]
                + [(n, _P) for n in ("clock", "comm", "row_start", "row_end", "pen_sum", "pen_n", "kinds", "pc",
                                     "blocked")]
                + [(n, _I64) for n in ("nevents", "finished", "unmatched", "first_unmatched_op", "error_size")]
                + [("progress", PROGRESS_FN)]
                + [("byte_off", _P)] + [(n, _I64) for n in ("stream_fd", "stream_buf", "stream_maxrec",
                                                           "first_unmatched_row", "first_unmatched_peer")]
                + [("stuck_row", _P), ("key_slots", _I64)])


class _LowerConfig(ctypes.Structure):
    _fields_ = ([("nrows", _I64), ("ntasks", _I64), ("algo", _I32), ("compute", _I32)]
                + [(n, _P) for n in ("row_off", "op", "peer", "tag", "comm", "bytes", "t_start", "t_end", "req",
                                     "poll", "cpu")]
                + [("ncomms", _I64)] + [(n, _P) for n in ("comm_id", "comm_off", "comm_mem")]
                + [(n, _I64) for n in ("nops", "nwreq", "nkeys", "nreqs")]
                + [(n, _P) for n in ("task_off", "kind", "peer_out", "val", "key", "req_out", "wreq", "row")]
                + [(n, _P) for n in ("mpi_ns", "first_start", "last_end")]
                + [("err", _I32), ("pad1", _I32), ("err_row", _I64)]
                + [(n, _I64) for n in ("ntasks_all", "nrows_all", "task_base", "row_base")]
                + [("stream", _P), ("byte_off", _P)])


@functools.cache
def lib() -> ctypes.CDLL:
    return config_library("libhv_replay.so", {"hv_rp_run": _Config, "hv_rp_lower": _LowerConfig},
                          {"hv_rp_config_size": _Config, "hv_rp_lower_config_size": _LowerConfig})


def available() -> bool:
    return loads(lib)


@dataclass
class Encoded:
    """Flat arrays of the lowered ops (one entry per op unless said)."""

    ntasks: int
    task_off: np.ndarray  # int64, ntasks + 1
    kind: np.ndarray      # int8: 0 compute, 1 send, 2 recv, 3 wait, 4 probe
    peer: np.ndarray      # int32: send/recv/probe peer task; wait: number of requests
    val: np.ndarray       # float64: seconds or bytes
    key: np.ndarray       # int32: match key id
    req: np.ndarray       # int32: request id (wait: offset into wreq)
    wreq: np.ndarray      # int32: requests of the waits
    row: np.ndarray       # int32: trace row id or -1
    row_off: np.ndarray   # int64, ntasks + 1: row ids of task t are row_off[t] + seq (seq = 0, 1, ...)
    nreqs: int
    nkeys: int
    rows: tuple | None = None  # (row_task, row_seq) when rows are not numbered by row_off (encode())
    measured: tuple | None = None  # (total_s, comm_s) per task, from the same pass (lower_native)

    @property
    def nrows(self) -> int:
        return int(self.row_off[-1]) if self.rows is None else len(self.rows[0])

    def row_ids(self) -> tuple[np.ndarray, np.ndarray]:
        """(task, seq) of every row id."""
        if self.rows is not None:
            return self.rows
        task = np.repeat(np.arange(self.ntasks, dtype=np.int32), np.diff(self.row_off))
        return task, np.arange(self.nrows, dtype=np.int64) - self.row_off[task]

    def row_of(self, r: int) -> tuple[int, int]:
        if self.rows is not None:
            return int(self.rows[0][r]), int(self.rows[1][r])
        t = int(np.searchsorted(self.row_off, r, side="right") - 1)
        return t, int(r - self.row_off[t])

    def nbytes(self) -> int:
        return sum(getattr(self, f).nbytes for f in ("task_off", "kind", "peer", "val", "key", "req", "wreq", "row",
                                                     "row_off"))


def encode(ops: list[list[tuple]]) -> Encoded:
    """Flat arrays of ``replay_ref.lower()``'s op lists; keys, requests and rows become dense ids (in order
    of first use)."""
    keys: dict = {}
    reqs: dict = {}
    rows: dict = {}
    wreq: list[int]
    kind, peer, val, key, req, wreq, row = [], [], [], [], [], [], []
    off = [0]
    kcode = {"c": 0, "s": 1, "r": 2, "w": 3, "p": 4}
    for lst in ops:
        for o in lst:
            k = o[0]
            r = o[-1]
            kind.append(kcode[k])
            row.append(-1 if r is None else rows.setdefault(r, len(rows)))
            if k == "c":
                peer.append(-1)
                val.append(o[1])
                key.append(-1)
                req.append(-1)
            elif k == "w":
                peer.append(len(o[1]))
                val.append(0.0)
                key.append(-1)
                req.append(len(wreq))
                wreq.extend(reqs.setdefault(rq, len(reqs)) for rq in o[1])
            else:
                peer.append(o[1])
                val.append(o[2])
                key.append(keys.setdefault(o[3], len(keys)))
                req.append(reqs.setdefault(o[4], len(reqs)))
        off.append(len(kind))
    rl = list(rows)
    return Encoded(len(ops), np.array(off, np.int64), np.array(kind, np.int8), np.array(peer, np.int32),
                   np.array(val, np.float64), np.array(key, np.int32), np.array(req, np.int32),
                   np.array(wreq, np.int32), np.array(row, np.int32), np.zeros(len(ops) + 1, np.int64), len(reqs),
                   len(keys), rows=(np.array([r[0] for r in rl], np.int32), np.array([r[1] for r in rl], np.int64)))


def op_codes(ops) -> np.ndarray:
    """int8 codes (hpcvar.traces.parquet.OPS) of an op column (categorical or strings)."""
    from hpcvar.traces.parquet import op_codes as codes_of

    codes = codes_of(ops)
    if len(codes) and codes.min() < 0:
        raise ValueError("unknown op in the trace (validate it first)")
    return codes


LOWER_COLUMNS = {"op": np.int8, "peer": np.int32, "tag": np.int32, "comm": np.int32, "bytes": np.int64,
                 "t_start_ns": np.int64, "t_end_ns": np.int64, "req": np.int64}  # the rows' part the C lowering reads
LOWER_OPTIONAL = {"poll_ns": np.int64, "cpu_ns": np.int64}  # ... and these where the trace has them
COMPUTE_CODES = {"wall": 0, "cpu": 1}


def lower_native(trace, algo: str = "binomial", release_rows: bool = False, compute: str = "wall") -> Encoded:
    """The trace lowered into op arrays in C (native/sim/lower.c): the same ops as
    ``encode(replay_ref.lower(trace, algo, compute)[0])`` up to the numbering of keys and requests, and the
    measured side (``Encoded.measured``) from the same pass. ``release_rows``: the trace's rows are dropped
    (``trace.drop_rows()``) once the lowering holds its columns, each column freed when no longer needed
    (the peak is the columns plus the op arrays, not a frame besides them)."""
    from hpcvar.sim.replay_ref import lower
    from hpcvar.traces.parquet import in_task_seq_order

    _check_algo(algo)
    _check_compute(compute)
    task, seq = trace.column("task"), trace.column("seq")
    order = None if in_task_seq_order(task, seq) else np.lexsort((seq, task))
    if order is not None:
        task, seq = task[order], seq[order]
        if not in_task_seq_order(task, seq):
            return encode(lower(trace, algo, compute)[0])  # seq not 0, 1, 2, ... per task: the reference numbering
    row_off = np.searchsorted(task, np.arange(trace.ntasks + 1, dtype=task.dtype)).astype(np.int64)  # no cast
    del task, seq
    types = {**LOWER_COLUMNS, **{c: t for c, t in LOWER_OPTIONAL.items() if trace.has_column(c)}}
    cols = {name: trace.column(name) for name in types}
    if cols["op"].min(initial=0) < 0:
        raise ValueError("unknown op in the trace (validate it first)")
    if release_rows:
        trace.drop_rows()
    for name, dtype in types.items():  # one column at a time: a reordered copy replaces its view
        a = cols[name]
        cols[name] = np.ascontiguousarray(a if order is None else a[order], dtype=dtype)
    del order
    return _lower_c(cols, row_off, trace, algo, compute)


def _check_compute(compute: str) -> None:
    from hpcvar.errors import UsageError
    from hpcvar.sim.replay_ref import COMPUTE_MODES

    if compute not in COMPUTE_MODES:
        raise UsageError(f"unknown compute mode '{compute}'", "--compute", f"Use one of {', '.join(COMPUTE_MODES)}")


def _check_algo(algo: str) -> None:
    from hpcvar.errors import UsageError
    from hpcvar.traces import collectives

    if algo not in collectives.ALGORITHMS:
        raise UsageError(f"unknown collective algorithm '{algo}'", "--collectives",
                         f"Use one of {', '.join(collectives.ALGORITHMS)}")


_LOWER_FIELDS = {"t_start_ns": "t_start", "t_end_ns": "t_end", "poll_ns": "poll", "cpu_ns": "cpu"}


def _lower_c(cols: dict, row_off: np.ndarray, trace, algo: str, compute: str = "wall") -> Encoded:
    """The two C passes over the sorted columns (count, then fill); ``cols`` is emptied once the second has
    read them."""
    from hpcvar import _memory

    cids = sorted(trace.comms)
    comm = (np.array(cids, np.int32), np.cumsum([0] + [len(trace.comms[c]) for c in cids]).astype(np.int64),
            np.array([w for c in cids for w in trace.comms[c]], np.int32))
    c = _LowerConfig(nrows=int(row_off[-1]), ntasks=trace.ntasks, algo=ALGO_CODES[algo],
                     compute=COMPUTE_CODES[compute], ncomms=len(cids))
    c.row_off = row_off.ctypes.data
    c.comm_id, c.comm_off, c.comm_mem = (a.ctypes.data for a in comm)
    for name, a in cols.items():
        setattr(c, _LOWER_FIELDS.get(name, name), a.ctypes.data)
    _lower_pass(c)
    _lower_errors(c, cols, row_off, trace.source or "trace")
    big = _memory.empty
    out = dict(task_off=np.empty(trace.ntasks + 1, np.int64), kind=big(c.nops, np.int8),
               peer_out=big(c.nops, np.int32), val=big(c.nops, np.float64), key=big(c.nops, np.int32),
               req_out=big(c.nops, np.int32), wreq=big(c.nwreq, np.int32), row=big(c.nops, np.int32),
               mpi_ns=np.empty(trace.ntasks), first_start=np.empty(trace.ntasks, np.int64),
               last_end=np.empty(trace.ntasks, np.int64))
    for name, a in out.items():
        setattr(c, name, a.ctypes.data)
    _lower_pass(c)
    cols.clear()
    present = out["last_end"] >= out["first_start"]
    span = np.where(present, out["last_end"] - np.where(present, out["first_start"], 0), 0)
    return Encoded(trace.ntasks, out["task_off"], out["kind"], out["peer_out"], out["val"], out["key"],
                   out["req_out"], out["wreq"], out["row"], row_off, int(c.nreqs), int(c.nkeys),
                   measured=(span * 1e-9, out["mpi_ns"] * 1e-9))


def _lower_pass(c: _LowerConfig) -> None:
    if lib().hv_rp_lower(ctypes.byref(c)) != 0:
        raise HpcvarError("lowering the trace ran out of memory", None, "Replay a shorter trace")


def _lower_errors(c: _LowerConfig, cols: dict, row_off: np.ndarray, src: str, task_base: int = 0) -> None:
    """The InputFileError of a row the counting pass refused, or of a trace too long for the core (rows and
    tasks of a chunk starting at task ``task_base`` in stream mode)."""
    from hpcvar.errors import InputFileError
    from hpcvar.traces.parquet import OPS

    if c.err:
        g = int(c.err_row)
        t = int(np.searchsorted(row_off, g, side="right") - 1)
        s, comm, peer = g - int(row_off[t]), int(cols["comm"][g]), int(cols["peer"][g])
        t += task_base
        if c.err == 1:
            raise InputFileError(f"task {t} seq {s}: {OPS[cols['op'][g]]} from peer {peer} (not a task)", src,
                                 todo="Record the trace with hpcvar trace (it resolves MPI_ANY_SOURCE)")
        if c.err == 2:
            raise InputFileError(f"task {t} seq {s}: communicator {comm} is not described", src,
                                 todo="Re-merge the trace (its comms metadata is incomplete)")
        raise InputFileError(f"task {t} seq {s}: task is not a member of communicator {comm}", src,
                             todo="Re-merge the trace")
    if max(c.nops, c.nreqs, c.nwreq, c.nrows) >= 2**31:
        raise HpcvarError(f"the trace lowers to {c.nops} ops: more than the core's 2^31", None,
                          "Replay a shorter trace")


class RowTimes(Mapping):
    """{(task, seq): time} over the rows a run reached, built from the core's arrays on first use."""

    _d: dict | None

    def __init__(self, enc: Encoded, times: np.ndarray):
        self._enc, self._times, self._d = enc, times, None

    def _dict(self) -> dict:
        if self._d is None:
            task, seq = self._enc.row_ids()
            idx = np.flatnonzero(self._times >= 0)
            keys = zip(task[idx].tolist(), seq[idx].tolist(), strict=True)
            self._d = dict(zip(keys, self._times[idx].tolist(), strict=True))
        return self._d

    def dense(self) -> bool:
        """Row ids are the trace's rows in (task, seq) order (row_off[t] + seq), as lower_native numbers them."""
        return self._enc.rows is None

    def times(self) -> np.ndarray:
        """The core's array: the time of every row id, -1 where the run never reached it."""
        return self._times

    def __getitem__(self, k):
        return self._dict()[k]

    def __iter__(self):
        return iter(self._dict())

    def __len__(self):
        return len(self._dict())


def _ptr(a: np.ndarray) -> int:
    assert a.flags.c_contiguous
    return a.ctypes.data


def _model_params(c, model: str, params: dict | None) -> None:
    """The sharing model's parameters into the core's config."""
    from hpcvar.models.sharing import check_params

    if model == "gige":
        p = check_params("gige", params)
        c.beta, c.gamma_in, c.gamma_out = p["beta"], p["gamma_in"], p["gamma_out"]
    elif model == "myrinet":
        p = check_params("myrinet", params)
        c.myr_method = 0 if p["method"] == "exact" else 1
        c.myr_max_states, c.myr_samples, c.myr_seed = p["max_states"], p["samples"], p["seed"]


def _check_rc(rc: int, c, params: dict | None) -> None:
    """The core's return code as an error: too many Stop&Go states, a sampled one that never sends, no memory."""
    from hpcvar.models.sharing import UNSAMPLED_TODO, ModelLimitError, check_params, unsampled_message

    if rc == -2:
        p = check_params("myrinet", params)
        raise ModelLimitError(
            f"a conflict component of {c.error_size} communications has more than {p['max_states']} Stop&Go states",
            "--params",
            "Use the bounded sampling method (method=sample in the --params file) or a larger max_states there")
    if rc == -4:
        p = check_params("myrinet", params)
        raise ModelLimitError(unsampled_message(c.error_size, p["samples"]), "--params", UNSAMPLED_TODO)
    if rc != 0:
        raise HpcvarError("the replay core ran out of memory", None, "Replay a shorter trace")


def _replay_errors(c, ntasks: int, blocked: np.ndarray, source: str, stuck_row, unmatched, row_of) -> None:
    """A deadlock (a task blocked at the end: ``stuck_row(t)`` the row of its wait) or an unmatched send
    (``unmatched()``: its row and destination) as an InputFileError; ``row_of(r)``: (task, seq) of row id r."""
    from hpcvar.errors import InputFileError

    if c.finished < ntasks:
        stuck = [t for t in range(ntasks) if blocked[t] > 0]
        desc = []
        for t in stuck[:5]:
            r = stuck_row(t)
            desc.append(f"rank {t} seq {row_of(r)[1] if r >= 0 else '?'}")
        raise InputFileError("the replay deadlocks or a receive has no matching send: blocked at "
                             + ", ".join(desc), source,
                             todo="Check the trace is complete (every rank to MPI_Finalize) and that "
                                  "sends and receives match; try a larger --eager limit")
    if c.unmatched:
        row, peer = unmatched()
        t, seq = row_of(row)
        raise InputFileError(f"unmatched send: rank {t} seq {seq} to rank {peer} "
                             f"has no matching receive ({c.unmatched} unmatched in all)", source,
                             todo="Check the trace is complete and its tags/communicators are right")


def cluster_arrays(sim) -> tuple[np.ndarray, int, np.ndarray, np.ndarray, np.ndarray]:
    """The core's view of the simulator's cluster: the node of each task, the node count, and the links given
    apart (key a * nnodes + b, sorted; their bandwidths and latencies)."""
    cl = sim.cluster
    node_of = np.ascontiguousarray(sim.node_of, np.int32)
    nnodes = max(int(cl.nodes), int(node_of.max(initial=0)) + 1)
    links = sorted((a * nnodes + b, bw, lat) for (a, b), (bw, lat) in cl.links.items())
    return (node_of, nnodes, np.array([k for k, _, _ in links], np.int64),
            np.array([bw for _, bw, _ in links], np.float64), np.array([lat for _, _, lat in links], np.float64))


def run(sim, enc: Encoded, keep_rows: bool = True, progress=None):
    """Replay ``enc`` with the simulator's cluster, mapping, model and jitter in C; a ``Result``.
    ``keep_rows``: also the per-row start and end times (16 bytes per row; the Chrome export and the tests
    use them). ``progress(ops_done, nops)`` is called every PROGRESS_EVERY events."""
    from hpcvar.sim.replay_ref import Result

    cl, ntasks = sim.cluster, enc.ntasks
    node_of, nnodes, link_key, link_bw, link_lat = cluster_arrays(sim)
    nrows = enc.nrows
    clock, comm = np.zeros(ntasks), np.zeros(ntasks)
    row_start = np.empty(nrows if keep_rows else 0)
    row_end = np.empty(nrows if keep_rows else 0)
    pen_sum, pen_n = np.zeros(ntasks), np.zeros(ntasks)
    kinds = np.zeros((ntasks, 4), np.int64)
    pc, blocked = np.zeros(ntasks, np.int64), np.zeros(ntasks, np.int64)
    c = _Config(ntasks=ntasks, nops=len(enc.kind), nreqs=enc.nreqs, nkeys=enc.nkeys, nrows=nrows, nnodes=nnodes,
                model=MODEL_CODES[sim.model], eager=float(sim.eager), bandwidth=float(cl.bandwidth),
                latency=float(cl.latency), shm_bandwidth=float(cl.shm_bandwidth), shm_latency=float(cl.shm_latency),
                rndv_latency=float(cl.rndv_latency), shm_rndv_latency=float(cl.shm_rndv_latency),
                send_buffer=float(cl.send_buffer), rndv_first=float(cl.rndv_first),
                pair_serial=int(cl.pair_serial), nlinks=len(link_key))
    _model_params(c, sim.model, sim.params)
    arrays = dict(link_key=link_key, link_bw=link_bw, link_lat=link_lat, task_off=enc.task_off, kind=enc.kind,
                  peer=enc.peer, val=enc.val, key=enc.key, req=enc.req, wreq=enc.wreq, row=enc.row, node_of=node_of,
                  clock=clock, comm=comm, pen_sum=pen_sum, pen_n=pen_n, kinds=kinds, pc=pc, blocked=blocked)
    if keep_rows:
        arrays.update(row_start=row_start, row_end=row_end)
    if sim.jitter is not None:
        ja = sim.jitter.arrays()
        c.njtr = len(ja["off"]) - 1
        arrays.update(jtr_off=ja["off"], jtr_d=ja["d"], jtr_g=ja["g"], jtr_S=ja["S"], jtr_pos=ja["pos"])
    for name, arr in arrays.items():
        setattr(c, name, _ptr(arr))
    cb = PROGRESS_FN(progress) if progress is not None else PROGRESS_FN()
    c.progress = cb
    _check_rc(lib().hv_rp_run(ctypes.byref(c)), c, sim.params)
    _replay_errors(c, ntasks, blocked, sim.trace.source or "trace", lambda t: int(enc.row[pc[t] - 1]),
                   lambda: (int(enc.row[c.first_unmatched_op]), int(enc.peer[c.first_unmatched_op])), enc.row_of)
    conflicts = [{KIND_NAMES[j]: int(v) for j, v in enumerate(kinds[t]) if v} for t in range(ntasks)]
    avg = np.divide(pen_sum, pen_n, out=np.ones(ntasks), where=pen_n > 0)
    rs = RowTimes(enc, row_start) if keep_rows else {}
    re_ = RowTimes(enc, row_end) if keep_rows else {}
    return Result(ntasks, list(sim.node_of), clock, comm, rs, re_, conflicts, avg, int(c.nevents))


__all__ = ["Encoded", "MODEL_CODES", "RowTimes", "available", "cluster_arrays", "encode", "lower_native", "run"]
