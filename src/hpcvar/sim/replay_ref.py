"""The reference replay engine: trace rows -> per-task op lists (``lower``) -> a discrete-event
simulation in plain Python (``RefEngine``). Slow and obvious on purpose: the C core
(native/sim/replay.c and lower.c, through ``hpcvar.sim.replay_native``) must give the same results,
and tests/unit/test_replay_native.py runs both on the same inputs.

Semantics (docs/replay.md, our reading of Vienne et al. 2008, section VI-A):

* Each task replays its trace rows in order. Compute = the gap between a row's start and the previous
  row's end in the measured trace, less the time the task spent in polls that found nothing during it (the
  row's ``poll_ns``); with ``compute="cpu"``, the thread's CPU time of that computation (``cpu_ns``) where the
  trace has it, on a core of its own (never more than the wall-clock compute); optionally stretched by OS
  jitter. Blocking calls are lowered to nonblocking ones plus a wait; collectives to point-to-point steps
  (hpcvar.traces.collectives).
* A probe (a successful MPI_Iprobe, or MPI_Probe) waits until the message the task's next receive on its
  (source, communicator, tag) would match is there: an eager message when its transfer has ended, a rendezvous
  message when its request has arrived (its send's post + the path's latency, + the bytes sent with the request
  at the link's bandwidth with ``rndv_first``). It receives nothing: the receive is a row of its own.
* A message of ``b`` bytes from task s to task d: messages up to ``eager_bytes`` start when the send is
  posted and the send completes at once (buffered); larger ones start when both the send and the matching
  receive are posted, and the send completes with the transfer. A transfer is a latency phase (alpha, not
  shared) then a data phase of ``b`` bytes.
* Inter-node data phases form the conflict graph: whenever one starts or ends, the penalties of all active
  ones are recomputed with ``hpcvar.models.sharing.penalties`` (model gige, myrinet or maxmin; ``none`` = no
  sharing) and each progresses at link bandwidth / penalty.
* Intra-node messages take shm_latency + b / shm_bandwidth and never enter the conflict graph.
* A message above the eager limit adds the cluster's rendezvous latency (rndv_latency between nodes,
  shm_rndv_latency inside one; default 0) to its latency phase: the handshake an eager message skips.
* With a send buffer of S > 0 bytes (the cluster's ``send_buffer``), the send of a rendezvous message between
  nodes completes once at most S of its bytes are left to deliver (at the start of its data phase when it has
  at most S bytes), not with the transfer: a TCP transport's MPI_Send returns when the last bytes are in the
  socket's send buffer. The receive still completes with the transfer.
* With ``rndv_first`` = F > 0 bytes, a rendezvous message between nodes sends its first F bytes with its
  request, before the receive is posted (Open MPI's ob1 sends the first eager-limit bytes with the RTS): of
  the time between the send's post and the match, up to F bytes' worth at the link's bandwidth is already
  delivered, and the data phase after the match carries the rest.
* Matching is MPI's: per (source, destination, communicator, tag) in order.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from hpcvar.errors import InputFileError, UsageError
from hpcvar.traces import collectives

# ---- lowering: trace rows -> per-task op lists ----
# op tuples: ("c", seconds, None) compute; ("s", dst, bytes, key, req, row) post a send;
# ("r", src, bytes, key, req, row) post a receive; ("p", src, bytes, key, req, row) post a probe;
# ("w", reqs, row) wait for all reqs.

COMPUTE_MODES = ("wall", "cpu")


def compute_ns(gap: int, poll: int, cpu: int, mode: str) -> int:
    """The compute before a row whose gap since the previous row's end is ``gap`` > 0 ns: the gap less the polls
    in it; with mode ``cpu``, its CPU time ``cpu`` where recorded (>= 0), never above that."""
    w = gap - poll
    if mode == "cpu" and 0 <= cpu < w:
        w = cpu
    return w


def lower(trace, algo: str = "binomial", compute: str = "wall") -> tuple[list[list[tuple]], dict]:
    """Per-task op lists (and an empty dict, kept for callers of the old signature). ``compute``: wall (the
    measured gaps less the polls) or cpu (their CPU time where the trace has it)."""
    if algo not in collectives.ALGORITHMS:
        raise UsageError(f"unknown collective algorithm '{algo}'", "--collectives",
                         f"Use one of {', '.join(collectives.ALGORITHMS)}")
    if compute not in COMPUTE_MODES:
        raise UsageError(f"unknown compute mode '{compute}'", "--compute", f"Use one of {', '.join(COMPUTE_MODES)}")
    ev = trace.events
    tasks: list[list[tuple]] = [[] for _ in range(trace.ntasks)]
    member_index = {c: {w: i for i, w in enumerate(m)} for c, m in trace.comms.items()}
    order = np.lexsort((ev["seq"].to_numpy(), ev["task"].to_numpy()))
    cols = [ev[c].to_numpy()[order].tolist() for c in ("task", "seq", "peer", "bytes", "tag", "comm", "t_start_ns",
                                                      "t_end_ns", "req")]
    n = len(ev)
    polls = ev["poll_ns"].to_numpy()[order].tolist() if "poll_ns" in ev.columns else [0] * n
    cpus = ev["cpu_ns"].to_numpy()[order].tolist() if "cpu_ns" in ev.columns else [-1] * n
    ops = ev["op"].to_numpy()[order].tolist()
    coll_count: dict[tuple[int, int], int] = {}
    prev_end: dict[int, int] = {}
    for op, t, seq, peer, b, tag, comm, ts, te, req, poll, cpu in zip(ops, *cols, polls, cpus, strict=True):
        lst = tasks[t]
        if t in prev_end and ts - prev_end[t] > 0:
            w = compute_ns(ts - prev_end[t], poll, cpu, compute)
            if w > 0:
                lst.append(("c", w * 1e-9, None))
        prev_end[t] = max(te, prev_end.get(t, te))
        row = (t, seq)
        if op in ("init", "finalize"):
            lst.append(("w", (), row))
        elif op == "probe":
            _lower_probe(lst, trace.ntasks, t, seq, peer, b, tag, comm, row)
        elif op in ("send", "isend", "sendrecv"):
            _lower_send(lst, trace.ntasks, op, t, seq, peer, b, tag, comm, row)
        elif op in ("recv", "irecv", "sendrecv_recv"):
            _lower_recv(lst, trace, op, t, seq, peer, b, tag, comm, row)
        elif op == "wait":
            lst.append(("w", (("r", t, req),) if req >= 0 else (), row))
        else:
            k = coll_count.get((t, comm), 0)
            coll_count[(t, comm)] = k + 1
            _lower_collective(lst, trace, member_index[comm] if comm in member_index else None, algo,
                              (op, t, seq, peer, b, comm), k)
    return tasks, {}


def _lower_send(lst, ntasks, op, t, seq, peer, b, tag, comm, row):
    if peer < 0 or peer >= ntasks:  # to MPI_PROC_NULL: completes at once
        lst.append(("w", (), row))
        return
    rq = ("r", t, seq)
    lst.append(("s", peer, b, (t, peer, comm, tag), rq, row))
    if op == "send":
        lst.append(("w", (rq,), row))


def _lower_probe(lst, ntasks, t, seq, peer, b, tag, comm, row):
    if peer < 0 or peer >= ntasks:  # no message to wait for
        lst.append(("w", (), row))
        return
    rq = ("r", t, seq)
    lst.append(("p", peer, b, (peer, t, comm, tag), rq, row))
    lst.append(("w", (rq,), row))


def _lower_recv(lst, trace, op, t, seq, peer, b, tag, comm, row):
    if peer < 0 or peer >= trace.ntasks:
        if op == "irecv":  # a receive from MPI_PROC_NULL completes at once
            lst.append(("w", (), row))
            return
        raise InputFileError(f"task {t} seq {seq}: {op} from peer {peer} (not a task)", trace.source or "trace",
                             todo="Record the trace with hpcvar trace (it resolves MPI_ANY_SOURCE)")
    rq = ("r", t, seq)
    lst.append(("r", peer, b, (peer, t, comm, tag), rq, row))
    if op == "recv":
        lst.append(("w", (rq,), row))
    elif op == "sendrecv_recv":
        lst.append(("w", (("r", t, seq - 1), rq), row))


def _lower_collective(lst, trace, index, algo, call: tuple, k: int):
    """A collective call (op, task, seq, root or -1, bytes, comm), the k-th of its task on its communicator
    (``index``: member -> position in it), as its steps' messages."""
    op, t, seq, peer, b, comm = call
    row = (t, seq)
    members = trace.comms.get(comm)
    if members is None:
        raise InputFileError(f"task {t} seq {seq}: communicator {comm} is not described", trace.source or "trace",
                             todo="Re-merge the trace (its comms metadata is incomplete)")
    me = index.get(t)
    if me is None:
        raise InputFileError(f"task {t} seq {seq}: task is not a member of communicator {comm}",
                             trace.source or "trace", todo="Re-merge the trace")
    root = index.get(peer, 0) if peer >= 0 else 0
    steps = collectives.steps(op, len(members), me, root, b, algo)
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
    posted: float = 0.0     # when the send was posted
    buffered: bool = False  # its send completes when at most the send buffer is left (send_buffer > 0)
    sdone: bool = False     # ... and it has
    kind: str = "none"
    end: float = -1.0
    env: float = 0.0        # a rendezvous message: when its request reaches the receiver (what a probe waits for)
    probe_rq: tuple | None = None  # an eager message: the probe waiting for its transfer to end


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


_RANK = {"none": 0, "out": 1, "in": 1, "in-out": 2}
EV_TASK, EV_LATENCY, EV_DATA_END, EV_FINISH, EV_SEND_DONE, EV_PROBE = 0, 1, 2, 3, 4, 5


class RefEngine:
    """One replay of lowered ops on a cluster and mapping: ``RefEngine(...).run() -> Result``.
    Events are (time, insertion counter, kind, object) in a heap; the C core keeps the same order."""

    def __init__(self, ops, ntasks, cluster, node_of, model, params, eager, jitter=None, source="trace"):
        from hpcvar.models.sharing import penalties

        self.ops, self.ntasks, self.cl, self.node_of = ops, ntasks, cluster, node_of
        self.model, self.params, self.eager, self.jitter, self.source = model, params, eager, jitter, source
        self.penalties = penalties
        self.contention = model != "none"
        self.heap: list = []
        self.counter = 0
        self.pc = [0] * ntasks
        self.clock = [0.0] * ntasks
        self.done_at: dict = {}        # request -> completion time
        self.waiting: dict = {}        # request -> task blocked on it
        self.blocked_need = [0] * ntasks
        self.pending_row: list = [None] * ntasks
        self.unsent: dict = {}         # match key -> list of Xfer waiting for a receive
        self.unrecv: dict = {}         # match key -> list of receive requests
        self.probing: dict = {}        # match key -> the request of a probe waiting for a send to be posted
        self.active: list[Xfer] = []
        # pairs in series: (source task, destination task) -> the transfers waiting behind the one whose data flows
        self.pairs: dict | None = {} if cluster.pair_serial else None
        self.row_start: dict = {}
        self.row_end: dict = {}
        self.pen_sum = np.zeros(ntasks)
        self.pen_n = np.zeros(ntasks)
        self.kinds = [dict() for _ in range(ntasks)]
        self.nevents = 0
        self.finished = 0

    # -- the event queue and requests --
    def push(self, t, kind, obj):
        self.counter += 1
        heapq.heappush(self.heap, (t, self.counter, kind, obj))

    def complete(self, rq, t):
        self.done_at[rq] = t
        task = self.waiting.pop(rq, None)
        if task is not None:
            self.blocked_need[task] -= 1
            if self.blocked_need[task] == 0:
                if t > self.clock[task]:
                    self.clock[task] = t
                self.push(self.clock[task], EV_TASK, task)

    # -- transfers --
    def conflict_kinds(self):
        """Raise each active transfer's conflict kind (out, in, in-out) to the worst it meets now."""
        node_of = self.node_of
        srcs: dict = {}
        dsts: dict = {}
        for x in self.active:
            a, b = node_of[x.src], node_of[x.dst]
            srcs[a] = srcs.get(a, 0) + 1
            dsts[b] = dsts.get(b, 0) + 1
        for x in self.active:
            o = srcs[node_of[x.src]] > 1
            i = dsts[node_of[x.dst]] > 1
            k = "in-out" if o and i else "out" if o else "in" if i else "none"
            if _RANK[k] > _RANK[x.kind]:
                x.kind = k

    def recompute(self, now):
        """New penalties of all active transfers; a transfer whose rate changes gets a new end event."""
        active = self.active
        if not active:
            return
        if self.contention and len(active) > 1:
            pens = self.penalties([(self.node_of[x.src], self.node_of[x.dst]) for x in active], self.model,
                                  self.params)
            self.conflict_kinds()
        else:
            pens = [1.0] * len(active)
        for x, p in zip(active, pens, strict=True):
            rate = x.bw / p
            if rate != x.rate:
                x.remaining -= x.rate * (now - x.last)
                x.last = now
                x.rate = rate
                x.version += 1
                self.push(now + max(x.remaining, 0.0) / rate, EV_DATA_END, (x, x.version))
                if x.buffered and not x.sdone:
                    self.push(now + max(x.remaining - self.cl.send_buffer, 0.0) / rate, EV_SEND_DONE,
                              (x, x.version))

    def start(self, x: Xfer, now):
        x.started = True
        if not x.send_done_at_post and x.inter and self.cl.rndv_first > 0:  # the first bytes went with the request
            pre = min(self.cl.rndv_first, x.nbytes)
            x.nbytes = x.nbytes - min(pre, max(now - x.posted, 0.0) * x.bw)
        self.push(now + x.lat, EV_LATENCY, x)

    def finish(self, x: Xfer, now):
        x.done = True
        x.end = now
        if x.inter:
            nominal = x.nbytes / x.bw
            if nominal > 0:
                self.pen_sum[x.src] += (now - x.data_start) / nominal
                self.pen_n[x.src] += 1
            self.kinds[x.src][x.kind] = self.kinds[x.src].get(x.kind, 0) + 1
        if not x.send_done_at_post and not x.sdone:
            self.complete(x.sreq, now)
        if x.rreq is not None:
            self.complete(x.rreq, now)
        if x.probe_rq is not None:
            self.complete(x.probe_rq, now)
            x.probe_rq = None

    # -- the tasks --
    def post_send(self, task, o, t):
        dst, nb, key, rq, row = o[1], o[2], o[3], o[4], o[5]
        a, b = self.node_of[task], self.node_of[dst]
        bw, lat = (self.cl.shm_bandwidth, self.cl.shm_latency) if a == b else self.cl.link(a, b)
        eager = nb <= self.eager
        env = t + lat
        if a != b and self.cl.rndv_first > 0:
            env = env + min(self.cl.rndv_first, float(nb)) / bw
        if not eager:
            lat = lat + (self.cl.shm_rndv_latency if a == b else self.cl.rndv_latency)
        x = Xfer(task, dst, float(nb), rq, row, a != b, bw, lat, eager)
        x.buffered = a != b and not eager and self.cl.send_buffer > 0
        x.posted = t
        x.env = env
        q = self.unrecv.get(key)
        if q:
            x.rreq = q.pop(0)
            if not q:
                del self.unrecv[key]
            self.start(x, t)
        else:
            self.unsent.setdefault(key, []).append(x)
            if eager:
                self.start(x, t)
            prq = self.probing.pop(key, None)
            if prq is not None:
                self.probe_target(x, prq, t)
        if eager:
            self.done_at[rq] = t

    def post_probe(self, o, t):
        """A probe finds the first message of its key that no posted receive took (the head of the unsent ones),
        or waits for the next such send."""
        key, rq = o[3], o[4]
        q = self.unsent.get(key)
        if q:
            self.probe_target(q[0], rq, t)
        else:
            self.probing[key] = rq

    def probe_target(self, x: Xfer, rq, t):
        """The probe ``rq`` (at time ``t``) completes when ``x`` is there: an eager message's transfer ended, a
        rendezvous message's request arrived."""
        if x.send_done_at_post:
            if x.done:
                self.done_at[rq] = x.end
            else:
                x.probe_rq = rq
        elif x.env <= t:
            self.done_at[rq] = x.env
        else:
            self.push(x.env, EV_PROBE, rq)

    def post_recv(self, o, t):
        key, rq = o[3], o[4]
        q = self.unsent.get(key)
        if q:
            x = q.pop(0)
            if not q:
                del self.unsent[key]
            x.rreq = rq
            if x.done:
                self.done_at[rq] = max(t, x.end)
            elif not x.started:
                self.start(x, t)
        else:
            self.unrecv.setdefault(key, []).append(rq)

    def step(self, task):
        """Run the task's ops from its program counter until it computes, blocks or ends."""
        lst = self.ops[task]
        p = self.pc[task]
        t = self.clock[task]
        while p < len(lst):
            o = lst[p]
            kind = o[0]
            row = o[-1]
            if row is not None and row not in self.row_start:
                self.row_start[row] = t
            if kind == "c":
                d = o[1] if self.jitter is None else self.jitter(task, t, o[1])
                self.pc[task] = p + 1
                self.clock[task] = t + d
                self.push(t + d, EV_TASK, task)
                return
            if kind == "s":
                self.post_send(task, o, t)
            elif kind == "r":
                self.post_recv(o, t)
            elif kind == "p":
                self.post_probe(o, t)
            else:  # wait
                need = 0
                latest = t
                for rq in o[1]:
                    d = self.done_at.get(rq)
                    if d is None:
                        self.waiting[rq] = task
                        need += 1
                    elif d > latest:
                        latest = d
                t = latest
                if need:
                    self.blocked_need[task] = need
                    self.pc[task] = p + 1
                    self.clock[task] = t
                    self.pending_row[task] = row  # its end is set when the task resumes
                    return
                if row is not None:
                    self.row_end[row] = t
            p += 1
        self.pc[task] = p
        self.clock[task] = t
        self.finished += 1

    def run(self) -> Result:
        for task in range(self.ntasks):
            self.push(0.0, EV_TASK, task)
        while self.heap:
            now, _, kind, obj = heapq.heappop(self.heap)
            self.nevents += 1
            if kind == EV_TASK:
                r = self.pending_row[obj]
                if r is not None:
                    self.row_end[r] = self.clock[obj]
                    self.pending_row[obj] = None
                self.step(obj)
            elif kind == EV_LATENCY:  # latency phase over: data phase
                self.on_latency(obj, now)
            elif kind == EV_DATA_END:
                x, ver = obj
                if ver == x.version and not x.done:
                    self.on_data_end(x, now)
            elif kind == EV_SEND_DONE:  # at most the send buffer left: the send completes
                x, ver = obj
                if ver != x.version or x.sdone or x.done:
                    continue
                x.sdone = True
                self.complete(x.sreq, now)
            elif kind == EV_PROBE:  # a rendezvous request arrived: the probe waiting for it completes
                self.complete(obj, now)
            else:
                self.finish(obj, now)
        self.check_complete()
        return self.result()

    def on_latency(self, x: Xfer, now):
        """A transfer's latency has passed: its data starts, shared with the others (contention) or alone; with
        pairs in series, after the transfers of its pair of tasks whose data started before (it waits behind them:
        a transport's connection carries one message at a time)."""
        x.data_start = now
        if x.inter and self.contention:
            if self.pairs is not None:
                q = self.pairs.get((x.src, x.dst))
                if q is not None:
                    q.append(x)
                    return
                self.pairs[(x.src, x.dst)] = deque()
            self.data_begin(x, now)
            return
        if x.buffered:
            self.push(now + max(x.nbytes - self.cl.send_buffer, 0.0) / x.bw, EV_SEND_DONE, (x, x.version))
        self.push(now + x.nbytes / x.bw, EV_FINISH, x)

    def on_data_end(self, x: Xfer, now):
        """A shared transfer's data has all arrived: it leaves the others, its requests complete, their rates are
        recomputed; with pairs in series, the next of its pair follows it at once."""
        self.active.remove(x)
        self.finish(x, now)
        self.recompute(now)
        if self.pairs is not None:
            q = self.pairs[(x.src, x.dst)]
            if q:
                self.data_begin(q.popleft(), now)
            else:
                del self.pairs[(x.src, x.dst)]

    def data_begin(self, x: Xfer, now):
        """A shared transfer's data starts: it joins the others and their rates are recomputed."""
        x.data_start = now
        x.remaining = x.nbytes
        x.last = now
        x.rate = 0.0
        self.active.append(x)
        self.recompute(now)

    def check_complete(self):
        """A deadlock or an unmatched send is an error naming the ranks and seqs."""
        if self.finished < self.ntasks:
            stuck = [t for t in range(self.ntasks) if self.blocked_need[t] > 0]
            desc = []
            for t in stuck[:5]:
                o = self.ops[t][self.pc[t] - 1]
                desc.append(f"rank {t} seq {o[-1][1] if o[-1] else '?'}")
            raise InputFileError("the replay deadlocks or a receive has no matching send: blocked at "
                                 + ", ".join(desc), self.source,
                                 todo="Check the trace is complete (every rank to MPI_Finalize) and that "
                                      "sends and receives match; try a larger --eager limit")
        left = [x for q in self.unsent.values() for x in q]
        if left:
            x = min(left, key=lambda x: x.srow)
            raise InputFileError(f"unmatched send: rank {x.srow[0]} seq {x.srow[1]} to rank {x.dst} has no "
                                 f"matching receive ({len(left)} unmatched in all)", self.source,
                                 todo="Check the trace is complete and its tags/communicators are right")

    def result(self) -> Result:
        comm = np.zeros(self.ntasks)
        for (t, s), t0 in self.row_start.items():
            comm[t] += self.row_end.get((t, s), t0) - t0
        avg = np.divide(self.pen_sum, self.pen_n, out=np.ones(self.ntasks), where=self.pen_n > 0)
        return Result(self.ntasks, list(self.node_of), np.array(self.clock), comm, self.row_start, self.row_end,
                      self.kinds, avg, self.nevents)


__all__ = ["RefEngine", "Result", "Xfer", "lower"]
