"""Application replay: a discrete-event simulation of an event trace on a cluster.

Reading of the paper (Vienne et al. 2008, section VI-A) and of the issue, as
implemented here and documented in docs/replay.md:

* Each task replays its trace rows in order. Compute = the gap between a row's
  start and the previous row's end in the measured trace (optionally stretched
  by OS jitter). Blocking calls are lowered to nonblocking ones plus a wait;
  collectives to point-to-point steps (hpcvar.traces.collectives).
* A message of ``b`` bytes from task s to task d: messages up to ``eager_bytes``
  start when the send is posted and the send completes at once (buffered);
  larger ones start when both the send and the matching receive are posted,
  and the send completes with the transfer. A transfer is a latency phase
  (alpha, not shared) then a data phase of ``b`` bytes.
* Inter-node data phases form the conflict graph: whenever one starts or
  ends, the penalties of all active ones are recomputed with
  ``hpcvar.models.sharing.penalties`` (model gige, myrinet or maxmin; ``none``
  = no sharing) and each progresses at link bandwidth / penalty.
* Intra-node messages take shm_latency + b / shm_bandwidth and never enter
  the conflict graph.
* Matching is MPI's: per (source, destination, communicator, tag) in order.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from hpcvar.errors import InputFileError, UsageError
from hpcvar.traces import collectives
from hpcvar.traces.native import Trace

MODELS = ("none", "gige", "myrinet", "maxmin")
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

    def link(self, a: int, b: int) -> tuple[float, float]:
        return self.links.get((a, b)) or self.links.get((b, a)) or (self.bandwidth, self.latency)


def load_cluster(path: str) -> Cluster:
    """A cluster file: 'key value' lines (nodes, cores_per_node, bandwidth, latency, shm_bandwidth,
    shm_latency) and 'link A B BANDWIDTH LATENCY' lines; '#' starts a comment. Units: bytes/s, s."""
    from pathlib import Path

    p = Path(path)
    if not p.is_file():
        raise InputFileError("no such cluster file", path, todo="Give a file of 'key value' lines (docs/replay.md)")
    kv: dict[str, float] = {}
    links = {}
    for i, raw in enumerate(p.read_text().splitlines(), 1):
        line = raw.split("#", 1)[0].split()
        if not line:
            continue
        try:
            if line[0] == "link" and len(line) == 5:
                links[(int(line[1]), int(line[2]))] = (float(line[3]), float(line[4]))
            elif line[0] in ("nodes", "cores_per_node", "bandwidth", "latency", "shm_bandwidth", "shm_latency") \
                    and len(line) == 2:
                kv[line[0]] = float(line[1])
            else:
                raise ValueError
        except ValueError:
            raise InputFileError(f"cannot read '{raw.strip()}'", path, i,
                                 todo="Write 'nodes 4', 'bandwidth 1.25e8', 'latency 5e-5', "
                                      "'link 0 1 1.25e8 5e-5' (bytes/s and seconds)") from None
    for k in ("nodes", "cores_per_node", "bandwidth", "latency"):
        if k not in kv:
            raise InputFileError(f"the cluster file lacks '{k}'", path, todo=f"Add a line '{k} VALUE'")
    c = Cluster(nodes=int(kv["nodes"]), cores_per_node=int(kv["cores_per_node"]), bandwidth=kv["bandwidth"],
                latency=kv["latency"], links=links)
    if "shm_bandwidth" in kv:
        c.shm_bandwidth = kv["shm_bandwidth"]
    if "shm_latency" in kv:
        c.shm_latency = kv["shm_latency"]
    for (a, b) in links:
        if not (0 <= a < c.nodes and 0 <= b < c.nodes):
            raise InputFileError(f"link {a} {b} names a node outside 0..{c.nodes - 1}", path,
                                 todo="Fix the node numbers or 'nodes'")
    return c


# ---- mappings ----

def mapping(kind: str, ntasks: int, cluster: Cluster, seed: int = 1) -> list[int]:
    """Node of each task: rrn (cyclic over nodes), rrp (fill a node first), random (seeded), or a file."""
    slots = cluster.nodes * cluster.cores_per_node
    if kind in ("rrn", "rrp", "random") and ntasks > slots:
        raise UsageError(f"{ntasks} tasks do not fit on {cluster.nodes} nodes x {cluster.cores_per_node} cores",
                         "--mapping", "Give more --nodes or --cores-per-node")
    if kind == "rrn":
        return [t % cluster.nodes for t in range(ntasks)]
    if kind == "rrp":
        return [t // cluster.cores_per_node for t in range(ntasks)]
    if kind == "random":
        perm = np.random.default_rng(seed).permutation(slots)[:ntasks]
        return [int(s) // cluster.cores_per_node for s in perm]
    return load_mapping(kind, ntasks, cluster)


def load_mapping(path: str, ntasks: int, cluster: Cluster) -> list[int]:
    """A mapping file: 'TASK NODE' per line ('#' comments); every task exactly once."""
    from pathlib import Path

    p = Path(path)
    if not p.is_file():
        raise UsageError(f"'{path}' is neither rrn, rrp, random nor a mapping file", "--mapping",
                         "Use rrn, rrp, random or a file of 'TASK NODE' lines")
    out: dict[int, int] = {}
    for i, raw in enumerate(p.read_text().splitlines(), 1):
        f = raw.split("#", 1)[0].split()
        if not f:
            continue
        try:
            t, n = int(f[0]), int(f[1])
            if len(f) != 2:
                raise ValueError
        except (ValueError, IndexError):
            raise InputFileError(f"cannot read '{raw.strip()}'", path, i, todo="Write 'TASK NODE', e.g. '3 1'") \
                from None
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


# ---- lowering: trace rows -> per-task op lists ----
# op tuples: ("c", seconds, row) compute; ("s", dst, bytes, key, req, row) post a send;
# ("r", src, bytes, key, req, row) post a receive; ("w", reqs, row) wait for all reqs.

def lower(trace: Trace, algo: str = "binomial") -> tuple[list[list[tuple]], dict]:
    """Per-task op lists and per-row facts (measured durations)."""
    if algo not in collectives.ALGORITHMS:
        raise UsageError(f"unknown collective algorithm '{algo}'", "--collectives",
                         f"Use one of {', '.join(collectives.ALGORITHMS)}")
    ev = trace.events
    tasks: list[list[tuple]] = [[] for _ in range(trace.ntasks)]
    member_index = {c: {w: i for i, w in enumerate(m)} for c, m in trace.comms.items()}
    order = np.lexsort((ev["seq"].to_numpy(), ev["task"].to_numpy()))
    cols = {c: ev[c].to_numpy()[order].tolist() for c in ("task", "seq", "peer", "bytes", "tag", "comm",
                                                          "t_start_ns", "t_end_ns", "req")}
    ops = ev["op"].to_numpy()[order].tolist()
    coll_count: dict[tuple[int, int], int] = {}
    prev_end: dict[int, int] = {}
    c_task, c_seq, c_ts, c_te = cols["task"], cols["seq"], cols["t_start_ns"], cols["t_end_ns"]
    c_peer, c_bytes, c_tag, c_comm, c_req = cols["peer"], cols["bytes"], cols["tag"], cols["comm"], cols["req"]
    for i in range(len(ops)):
        t = c_task[i]
        op = ops[i]
        seq = c_seq[i]
        row = (t, seq)
        ts, te = c_ts[i], c_te[i]
        lst = tasks[t]
        if t in prev_end:
            gap = ts - prev_end[t]
            if gap > 0:
                lst.append(("c", gap * 1e-9, None))
        prev_end[t] = max(te, prev_end.get(t, te))
        peer, b, tag, comm = c_peer[i], c_bytes[i], c_tag[i], c_comm[i]
        if op in ("init", "finalize"):
            lst.append(("w", (), row))
        elif op in ("send", "isend", "sendrecv"):
            if peer < 0 or peer >= trace.ntasks:
                lst.append(("w", (), row))
                continue
            key = (t, peer, comm, tag)
            rq: tuple = ("r", t, seq)
            lst.append(("s", peer, b, key, rq, row))
            if op == "send":
                lst.append(("w", (rq,), row))
        elif op in ("recv", "irecv", "sendrecv_recv"):
            if peer < 0 or peer >= trace.ntasks:
                if op == "irecv":  # a receive from MPI_PROC_NULL completes at once
                    lst.append(("w", (), row))
                    continue
                raise InputFileError(f"task {t} seq {seq}: {op} from peer {peer} (not a task)", trace.source or
                                     "trace", todo="Record the trace with hpcvar trace (it resolves MPI_ANY_SOURCE)")
            key = (peer, t, comm, tag)
            rq = ("r", t, seq)
            lst.append(("r", peer, b, key, rq, row))
            if op == "recv":
                lst.append(("w", (rq,), row))
            elif op == "sendrecv_recv":
                lst.append(("w", (("r", t, seq - 1), rq), row))
        elif op == "wait":
            r = c_req[i]
            lst.append(("w", (("r", t, r),) if r >= 0 else (), row))
        else:  # collective
            members = trace.comms.get(comm)
            if members is None:
                raise InputFileError(f"task {t} seq {seq}: communicator {comm} is not described", trace.source or
                                     "trace", todo="Re-merge the trace (its comms metadata is incomplete)")
            me = member_index[comm].get(t)
            if me is None:
                raise InputFileError(f"task {t} seq {seq}: task is not a member of communicator {comm}",
                                     trace.source or "trace", todo="Re-merge the trace")
            k = coll_count.get((t, comm), 0)
            coll_count[(t, comm)] = k + 1
            root = member_index[comm].get(peer, 0) if peer >= 0 else 0
            n = len(members)
            steps = collectives.steps(op, n, me, root, b, algo)
            if not steps:
                lst.append(("w", (), row))
            for si, (sends, recvs) in enumerate(steps):
                reqs = []
                for j, (p, nb) in enumerate(sends):
                    dst = members[p]
                    rq = ("c", t, seq, si, "s", j)
                    lst.append(("s", dst, nb, ("C", comm, k, t, dst), rq, row))
                    reqs.append(rq)
                for j, (p, nb) in enumerate(recvs):
                    src = members[p]
                    rq = ("c", t, seq, si, "r", j)
                    lst.append(("r", src, nb, ("C", comm, k, src, t), rq, row))
                    reqs.append(rq)
                lst.append(("w", tuple(reqs), row))
    return tasks, {}


# ---- the engine ----

@dataclass(slots=True)
class Xfer:
    src: int
    dst: int
    nbytes: float
    sreq: tuple
    srow: tuple
    inter: bool
    bw: float
    lat: float
    send_done_at_post: bool
    rreq: tuple | None = None
    started: bool = False
    done: bool = False
    remaining: float = 0.0
    rate: float = 0.0
    last: float = 0.0
    version: int = 0
    data_start: float = 0.0
    kind: str = "none"
    end: float = -1.0


@dataclass
class Result:
    ntasks: int
    node_of: list[int]
    total_s: np.ndarray
    comm_s: np.ndarray
    row_start: Mapping
    row_end: Mapping
    conflicts: list[dict]
    avg_penalty: np.ndarray
    events: int
    timeline: list[tuple] = field(default_factory=list)  # (task, row, op, start_s, end_s)


class Simulator:
    def __init__(self, trace: Trace, cluster: Cluster, node_of: list[int], model: str = "none",
                 params: dict | None = None, algo: str = "binomial", eager_bytes: int = 65536,
                 jitter=None, lowered=None, engine: str = "auto", encoded=None):
        if engine not in ENGINES:
            raise UsageError(f"unknown replay engine '{engine}'", "--engine", f"Use one of {', '.join(ENGINES)}")
        if model not in MODELS:
            raise UsageError(f"unknown model '{model}'", "--model", f"Use one of {', '.join(MODELS)}")
        if len(node_of) != trace.ntasks:
            raise UsageError(f"the mapping covers {len(node_of)} tasks, the trace has {trace.ntasks}", "--mapping",
                             "Map every task")
        self.trace, self.cluster, self.node_of = trace, cluster, node_of
        self.model, self.params, self.eager = model, params, eager_bytes
        self.ops = lowered if lowered is not None else lower(trace, algo)[0]
        self.jitter = jitter  # callable(task, start_s, dur_s) -> stretched dur_s, or None
        self.encoded = encoded
        self.engine = self.engine_for(engine)

    def engine_for(self, engine: str) -> str:
        """The engine that runs: native (C core) for none/maxmin/gige without jitter when libhv_replay.so is
        installed; else python (the reference). 'native' where the core cannot run is a usage error."""
        from hpcvar.sim import replay_native

        fits = self.model in replay_native.MODEL_CODES and self.jitter is None
        if engine == "python" or (engine == "auto" and not fits):
            return "python"
        if not fits:
            raise UsageError(f"the native replay core does not do model '{self.model}'"
                             + (" with jitter" if self.jitter is not None else ""), "--engine",
                             "Use --engine auto or python (myrinet and --jitter run in the Python engine)")
        if engine == "native":
            replay_native.lib()  # a clear MissingToolError if it is not installed
            return "native"
        return "native" if replay_native.available() else "python"

    def run(self) -> Result:
        if self.engine == "native":
            from hpcvar.sim import replay_native

            if self.encoded is None:
                self.encoded = replay_native.encode(self.ops)
            return replay_native.run(self, self.encoded)
        return self.run_python()

    def run_python(self) -> Result:
        """The reference engine (pure Python)."""
        ops, ntasks, node_of, cl = self.ops, self.trace.ntasks, self.node_of, self.cluster
        heap: list = []
        counter = 0
        pc = [0] * ntasks
        clock = [0.0] * ntasks
        done_at: dict = {}            # request -> completion time
        waiting: dict = {}            # request -> task blocked on it
        blocked_need = [0] * ntasks
        pending_row: list = [None] * ntasks
        unsent: dict = {}             # match key -> list of Xfer waiting for a receive
        unrecv: dict = {}             # match key -> list of (rreq, task)
        active: list[Xfer] = []
        row_start: dict = {}
        row_end: dict = {}
        pen_sum = np.zeros(ntasks)
        pen_n = np.zeros(ntasks)
        kinds: list[dict] = [dict() for _ in range(ntasks)]
        contention = self.model != "none"
        nevents = 0
        finished = 0
        from hpcvar.models.sharing import penalties as _pen

        def push(t, kind, obj):
            nonlocal counter
            counter += 1
            heapq.heappush(heap, (t, counter, kind, obj))

        def complete(rq, t):
            done_at[rq] = t
            task = waiting.pop(rq, None)
            if task is not None:
                blocked_need[task] -= 1
                if blocked_need[task] == 0:
                    if t > clock[task]:
                        clock[task] = t
                    push(clock[task], 0, task)

        def recompute(now):
            if not active:
                return
            if contention:
                pens = _pen([(node_of[x.src], node_of[x.dst]) for x in active], self.model, self.params) \
                    if len(active) > 1 else [1.0]
                if len(active) > 1:
                    srcs: dict = {}
                    dsts: dict = {}
                    for x in active:
                        a, b = node_of[x.src], node_of[x.dst]
                        srcs[a] = srcs.get(a, 0) + 1
                        dsts[b] = dsts.get(b, 0) + 1
                    for x in active:
                        o = srcs[node_of[x.src]] > 1
                        i = dsts[node_of[x.dst]] > 1
                        k = "in-out" if o and i else "out" if o else "in" if i else "none"
                        if _RANK[k] > _RANK[x.kind]:
                            x.kind = k
            else:
                pens = [1.0] * len(active)
            for x, p in zip(active, pens, strict=True):
                rate = x.bw / p
                if rate != x.rate:
                    x.remaining -= x.rate * (now - x.last)
                    x.last = now
                    x.rate = rate
                    x.version += 1
                    push(now + max(x.remaining, 0.0) / rate, 2, (x, x.version))

        def start(x: Xfer, now):
            x.started = True
            push(now + x.lat, 1, x)

        def finish(x: Xfer, now):
            x.done = True
            x.end = now
            if x.inter:
                nominal = x.nbytes / x.bw
                if nominal > 0:
                    pen_sum[x.src] += (now - x.data_start) / nominal
                    pen_n[x.src] += 1
                kinds[x.src][x.kind] = kinds[x.src].get(x.kind, 0) + 1
            if not x.send_done_at_post:
                complete(x.sreq, now)
            if x.rreq is not None:
                complete(x.rreq, now)

        def step(task, now):
            nonlocal finished
            lst = ops[task]
            p = pc[task]
            n = len(lst)
            t = clock[task]
            while p < n:
                o = lst[p]
                kind = o[0]
                row = o[-1]
                if row is not None and row not in row_start:
                    row_start[row] = t
                if kind == "c":
                    d = o[1]
                    if self.jitter is not None:
                        d = self.jitter(task, t, d)
                    pc[task] = p + 1
                    clock[task] = t + d
                    push(t + d, 0, task)
                    return
                if kind == "s":
                    dst, nb, key, rq = o[1], o[2], o[3], o[4]
                    a, b = node_of[task], node_of[dst]
                    if a == b:
                        bw, lat = cl.shm_bandwidth, cl.shm_latency
                    else:
                        bw, lat = cl.link(a, b)
                    eager = nb <= self.eager
                    x = Xfer(task, dst, float(nb), rq, row, a != b, bw, lat, eager)
                    q = unrecv.get(key)
                    if q:
                        x.rreq = q.pop(0)
                        if not q:
                            del unrecv[key]
                        start(x, t)
                    else:
                        unsent.setdefault(key, []).append(x)
                        if eager:
                            start(x, t)
                    if eager:
                        done_at[rq] = t
                elif kind == "r":
                    key, rq = o[3], o[4]
                    q = unsent.get(key)
                    if q:
                        x = q.pop(0)
                        if not q:
                            del unsent[key]
                        x.rreq = rq
                        if x.done:
                            done_at[rq] = max(t, x.end)
                        elif not x.started:
                            start(x, t)
                    else:
                        unrecv.setdefault(key, []).append(rq)
                else:  # wait
                    need = 0
                    latest = t
                    for rq in o[1]:
                        d = done_at.get(rq)
                        if d is None:
                            waiting[rq] = task
                            need += 1
                        elif d > latest:
                            latest = d
                    t = latest
                    if need:
                        blocked_need[task] = need
                        pc[task] = p + 1
                        clock[task] = t
                        pending_row[task] = row  # its end is set when the task resumes
                        return
                    if row is not None:
                        row_end[row] = t
                p += 1
            pc[task] = p
            clock[task] = t
            finished += 1

        for task in range(ntasks):
            push(0.0, 0, task)
        while heap:
            now, _, kind, obj = heapq.heappop(heap)
            nevents += 1
            if kind == 0:
                task = obj
                r = pending_row[task]
                if r is not None:
                    row_end[r] = clock[task]
                    pending_row[task] = None
                step(task, now)
            elif kind == 1:  # latency phase over: data phase
                x = obj
                x.data_start = now
                if x.inter and contention:
                    x.remaining = x.nbytes
                    x.last = now
                    x.rate = 0.0
                    active.append(x)
                    recompute(now)
                else:
                    push(now + x.nbytes / x.bw, 3, x)
            elif kind == 2:
                x, ver = obj
                if ver != x.version or x.done:
                    continue
                active.remove(x)
                finish(x, now)
                recompute(now)
            else:
                finish(obj, now)
        if finished < ntasks:
            stuck = [t for t in range(ntasks) if pc[t] <= len(ops[t]) and blocked_need[t] > 0]
            desc = []
            for t in stuck[:5]:
                o = ops[t][pc[t] - 1]
                desc.append(f"rank {t} seq {o[-1][1] if o[-1] else '?'}")
            raise InputFileError("the replay deadlocks or a receive has no matching send: blocked at "
                                 + ", ".join(desc), self.trace.source or "trace",
                                 todo="Check the trace is complete (every rank to MPI_Finalize) and that "
                                      "sends and receives match; try a larger --eager limit")
        left = [x for q in unsent.values() for x in q]
        if left:
            x = min(left, key=lambda x: x.srow)
            raise InputFileError(f"unmatched send: rank {x.srow[0]} seq {x.srow[1]} to rank {x.dst} has no "
                                 f"matching receive ({len(left)} unmatched in all)", self.trace.source or "trace",
                                 todo="Check the trace is complete and its tags/communicators are right")
        total = np.array(clock)
        comm = np.zeros(ntasks)
        for (t, s), t0 in row_start.items():
            comm[t] += row_end.get((t, s), t0) - t0
        avg = np.divide(pen_sum, pen_n, out=np.ones(ntasks), where=pen_n > 0)
        return Result(ntasks, list(node_of), total, comm, row_start, row_end, kinds, avg, nevents)


_RANK = {"none": 0, "out": 1, "in": 1, "in-out": 2}


def mpi_time_s(ev, ntasks: int) -> np.ndarray:
    """Seconds each task spent inside MPI calls: the union of its rows' [t_start, t_end] intervals
    (init/finalize excluded). A union, not a sum: the tracer writes one row per request of a Waitall
    and a row for each half of a Sendrecv, all with the call's own entry and exit times."""
    ev = ev[~ev["op"].isin(["init", "finalize"])].sort_values(["task", "t_start_ns", "t_end_ns"], kind="stable")
    task = ev["task"].to_numpy()
    start = ev["t_start_ns"].to_numpy().astype(np.float64)
    end = ev["t_end_ns"].to_numpy().astype(np.float64)
    if not len(ev):
        return np.zeros(ntasks)
    reach = _cummax_by(task, end)  # the latest end so far within the task, this row included
    prev = np.concatenate(([-np.inf], reach[:-1]))
    prev[np.concatenate(([True], task[1:] != task[:-1]))] = -np.inf  # first row of a task
    covered = np.clip(end - np.maximum(start, prev), 0.0, None)
    return np.bincount(task, weights=covered, minlength=ntasks) * 1e-9


def _cummax_by(groups: np.ndarray, values: np.ndarray) -> np.ndarray:
    import pandas as pd

    return pd.Series(values).groupby(groups).cummax().to_numpy()


def measured(trace: Trace) -> tuple[np.ndarray, np.ndarray]:
    """Measured (total_s, comm_s) per task: S_m = the time inside MPI calls (mpi_time_s), the span from
    the first row's start to the last row's end."""
    ev = trace.events
    comm = mpi_time_s(ev, trace.ntasks)
    g = ev.groupby("task")
    span = (g["t_end_ns"].max() - g["t_start_ns"].min()).reindex(range(trace.ntasks), fill_value=0)
    return span.to_numpy() * 1e-9, comm


def e_abs(sp: np.ndarray, sm: np.ndarray) -> np.ndarray:
    """Per-task E_abs = |(S_p - S_m) / S_m| x 100 (section VI-B); NaN where S_m = 0."""
    sm = np.asarray(sm, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(sm > 0, np.abs((np.asarray(sp) - sm) / sm) * 100.0, np.nan)


def timeline(result: Result, trace: Trace) -> list[dict]:
    """Simulated rows as (task, seq, op, start_s, end_s), for the Chrome/Perfetto export."""
    ops = dict(zip(zip(trace.events["task"].to_numpy().tolist(), trace.events["seq"].to_numpy().tolist(), strict=True),
                   trace.events["op"].tolist(), strict=True))
    out = []
    for row, t0 in result.row_start.items():
        out.append({"task": row[0], "seq": row[1], "op": ops.get(row, "?"), "start_s": t0,
                    "end_s": result.row_end.get(row, t0)})
    out.sort(key=lambda r: (r["task"], r["seq"]))
    return out


__all__ = ["Cluster", "MODELS", "Result", "Simulator", "e_abs", "load_cluster", "load_mapping", "lower", "mapping",
           "measured", "mpi_time_s", "timeline"]
