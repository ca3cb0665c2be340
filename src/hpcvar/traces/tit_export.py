"""Export of a trace as a SimGrid time-independent trace (TIT) in the dialect of SimGrid >= 3.20, as
``smpirun -trace-ti`` writes it: an index file whose lines name one file per rank (``<index>_files/rank-R.txt``),
so that ``smpirun -replay <index>`` replays it and ``hpcvar trace import`` reads it back.

Each row becomes the line SimGrid's replay reads (hpcvar.traces.tit_dialect), counts in bytes (datatype 6,
MPI_BYTE); the time between a row's start and the end of the task's calls before it, less the row's polls (the
compute the replay simulates, hpcvar.sim.replay_ref.lower), becomes ``compute FLOPS`` at ``flops_rate``. What TIT
cannot say:

* a probe (a successful MPI_Iprobe, MPI_Probe): TIT has no such action; the receive after it waits for the message;
* a message to or from MPI_PROC_NULL completes at once: no line (its wait neither);
* ``MPI_Sendrecv`` (rows sendrecv + sendrecv_recv) is written ``isend``, ``irecv``, ``wait``, ``wait`` with its tags
  (SimGrid's own ``sendRecv`` has no tag);
* TIT has no communicators (SimGrid replays every collective on MPI_COMM_WORLD): a collective on another
  communicator, and a v-collective (whose counts per rank the native trace does not keep), is written as the
  point-to-point messages hpcvar's replay decomposes it into (``collectives``, the algorithm of ``sim app
  --collectives``; hpcvar.traces.collectives): per step its isends and irecvs (of the size its sender sends: the
  sender's own row of the collective), then their waits, with the tag COLL_TAG_BASE + the communicator's id (an
  application's own tags must stay below it);
* ``wait SRC DST TAG`` completes the oldest pending request with that key, in SimGrid and when read back: a
  trace that waits for a later one of two such requests first replays them in posting order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from hpcvar.errors import InputFileError, UsageError
from hpcvar.traces.parquet import COLLECTIVE_OPS, Trace
from hpcvar.traces.tit import MAX_FLOPS_RATE
from hpcvar.traces.tit_dialect import MPI_BYTE_ID

B = MPI_BYTE_ID
_P2P = {"send", "recv", "isend", "irecv"}
_VCOLL = {"gatherv", "scatterv", "allgatherv", "alltoallv"}
COLL_TAG_BASE = 1 << 30  # tags of the messages of decomposed collectives: this + the communicator's id


def index_entries(out: Path, ntasks: int) -> list[str]:
    """The index's lines: the per-rank files as SimGrid's recorder names them, from the index's name as given
    (relative to the working directory, or absolute)."""
    return [f"{out}_files/rank-{r}.txt" for r in range(ntasks)]


def write_tit(trace: Trace, out: str | Path, flops_rate: float = 1e9, collectives: str = "binomial") -> list[Path]:
    """Write ``out`` (the index) and ``<out>_files/rank-R.txt``; returns the files written, the index last. Each
    file is written to a temporary name and renamed; rank files of an earlier export that this one does not
    have are removed."""
    from hpcvar.results.store import atomic_write_bytes

    if not 0 < flops_rate <= MAX_FLOPS_RATE:
        raise UsageError(f"flop rate {flops_rate} is not in (0, {MAX_FLOPS_RATE:g}] flop/s", "--flops-rate",
                         "Give the flop/s of the machine SimGrid replays on (its hosts' speed), e.g. 1e9")
    out = Path(out)
    files_dir = Path(f"{out}_files")
    files_dir.mkdir(exist_ok=True)
    entries = index_entries(out, trace.ntasks)
    from hpcvar.traces.collectives import ALGORITHMS

    if collectives not in ALGORITHMS:
        raise UsageError(f"unknown collective algorithm '{collectives}'", "--collectives",
                         f"Use one of {', '.join(ALGORITHMS)}")
    lines = _Writer(trace, flops_rate, collectives).lines()
    written = []
    for r, text in enumerate(lines):
        p = files_dir / f"rank-{r}.txt"
        atomic_write_bytes(p, text.encode())
        written.append(p)
    for old in files_dir.glob("rank-*.txt"):
        if old not in written:
            old.unlink()
    atomic_write_bytes(out, "".join(e + "\n" for e in entries).encode())
    return [*written, out]


@dataclass
class _Rows:
    """One task's rows as lists (seq order) and the indices of the rows written as no line (MPI_PROC_NULL)."""

    r: int
    op: list[str]
    seq: list[int]
    peer: list[int]
    bytes: list[int]
    tag: list[int]
    comm: list[int]
    t_start_ns: list[int]
    t_end_ns: list[int]
    req: list[int]
    poll_ns: list[int]
    skipped: set[int] = field(default_factory=set)


class _Writer:
    """The lines of every task, from the trace's rows in (task, seq) order."""

    def __init__(self, trace: Trace, flops_rate: float, algo: str):
        self.trace, self.rate, self.algo = trace, flops_rate, algo
        self.where = trace.source or "trace"
        self.index = {c: {w: i for i, w in enumerate(m)} for c, m in trace.comms.items()}
        self.decomposed = self._decomposed()
        self.kth: dict[tuple[int, int], int] = {}  # (task, comm) -> decomposed collectives written so far

    def _decomposed(self) -> dict[tuple[int, int], list[tuple[int, int]]]:
        """Per (task, communicator) the (bytes, root) of its collectives written as messages, in order: every
        member has the same sequence, so a receive's size is the one its sender sends (SimGrid refuses a message
        longer than its receive)."""
        ev = self.trace.events
        coll = ev["op"].isin(sorted(COLLECTIVE_OPS)).to_numpy() & \
            ((ev["comm"].to_numpy() != 0) | ev["op"].isin(sorted(_VCOLL)).to_numpy())
        sub = ev[coll].sort_values(["task", "seq"])
        out: dict[tuple[int, int], list[tuple[int, int]]] = {}
        for t, c, b, p in zip(sub["task"].tolist(), sub["comm"].tolist(), sub["bytes"].tolist(), sub["peer"].tolist(),
                              strict=True):
            out.setdefault((t, c), []).append((b, p))
        return out

    def lines(self) -> list[str]:
        ev = self.trace.events
        order = np.lexsort((ev["seq"].to_numpy(), ev["task"].to_numpy()))
        cols = {c: ev[c].to_numpy()[order] for c in ("task", "seq", "peer", "bytes", "tag", "comm", "t_start_ns",
                                                      "t_end_ns", "req")}
        cols["poll_ns"] = ev["poll_ns"].to_numpy()[order] if "poll_ns" in ev.columns else np.zeros(len(order), np.int64)
        ops = np.asarray(ev["op"].astype(str))[order]
        bounds = np.flatnonzero(np.diff(cols["task"])) + 1
        starts, ends = np.r_[0, bounds], np.r_[bounds, len(order)]
        out = ["" for _ in range(self.trace.ntasks)]
        for lo, hi in zip(starts, ends, strict=True):
            if hi > lo:
                t = int(cols["task"][lo])
                out[t] = "".join(self.task_lines(t, ops[lo:hi], {c: v[lo:hi] for c, v in cols.items()}))
        return out

    def task_lines(self, r: int, ops: np.ndarray, c: dict[str, np.ndarray]):
        """The lines of task r: a compute before each row that starts after the task's previous calls ended."""
        rows = _Rows(r, ops.tolist(), **{k: v.tolist() for k, v in c.items() if k != "task"})
        prev_end = None
        for i, op in enumerate(rows.op):
            if prev_end is not None and rows.t_start_ns[i] - prev_end - rows.poll_ns[i] > 0:
                yield f"{r} compute {self.flops(rows.t_start_ns[i] - prev_end - rows.poll_ns[i])}\n"
            prev_end = rows.t_end_ns[i] if prev_end is None else max(prev_end, rows.t_end_ns[i])
            if op == "probe":
                continue
            if op in _P2P or op in ("sendrecv", "sendrecv_recv"):
                if not 0 <= rows.tag[i] < COLL_TAG_BASE:
                    raise self.refuse(r, rows.seq[i], f"tag {rows.tag[i]} is not in 0..{COLL_TAG_BASE - 1} (the "
                                                      "tags above are those of the decomposed collectives)")
                if rows.peer[i] < 0:  # MPI_PROC_NULL
                    rows.skipped.add(i)
                    continue
            yield from self.row(rows, i, op)

    def row(self, t: _Rows, i: int, op: str):
        r = t.r
        if op in ("init", "finalize"):
            yield f"{r} {op}\n"
        elif op in _P2P:
            yield f"{r} {op} {t.peer[i]} {t.tag[i]} {t.bytes[i]} {B}\n"
        elif op == "wait":
            yield from self.wait(t, i)
        elif op == "sendrecv":
            yield f"{r} isend {t.peer[i]} {t.tag[i]} {t.bytes[i]} {B}\n"
        elif op == "sendrecv_recv":
            yield f"{r} irecv {t.peer[i]} {t.tag[i]} {t.bytes[i]} {B}\n"
            if i > 0 and t.op[i - 1] == "sendrecv" and i - 1 not in t.skipped:
                yield f"{r} wait {r} {t.peer[i - 1]} {t.tag[i - 1]}\n"
            yield f"{r} wait {t.peer[i]} {r} {t.tag[i]}\n"
        else:
            yield from self.collective(t, i, op)

    def wait(self, t: _Rows, i: int):
        """The wait of the isend/irecv it completes (none: a request the trace does not have, or to
        MPI_PROC_NULL)."""
        k = t.req[i] - t.seq[0]  # the task's rows are seq 0, 1, 2, ... (validated)
        if t.req[i] < 0 or k in t.skipped:
            return
        op = t.op[k] if 0 <= k < len(t.op) else "missing row"
        if op == "isend":
            yield f"{t.r} wait {t.r} {t.peer[k]} {t.tag[k]}\n"
        elif op == "irecv":
            yield f"{t.r} wait {t.peer[k]} {t.r} {t.tag[k]}\n"
        else:
            raise self.refuse(t.r, t.seq[i], f"the wait completes row {t.req[i]}, a {op}, not an isend or irecv")

    def collective(self, t: _Rows, i: int, op: str):
        r, comm = t.r, t.comm[i]
        if comm != 0 or op in _VCOLL:
            yield from self.messages(t, i, op)
            return
        b, root = t.bytes[i], max(t.peer[i], 0)
        per = -(-b // self.trace.ntasks)
        yield {"barrier": f"{r} barrier\n", "bcast": f"{r} bcast {b} {root} {B}\n",
               "reduce": f"{r} reduce {b} 0 {root} {B}\n", "allreduce": f"{r} allreduce {b} 0 {B}\n",
               "gather": f"{r} gather {b} {b} {root} {B} {B}\n", "scatter": f"{r} scatter {b} {b} {root} {B} {B}\n",
               "allgather": f"{r} allgather {b} {b} {B} {B}\n", "alltoall": f"{r} alltoall {per} {per} {B} {B}\n"}[op]

    def messages(self, t: _Rows, i: int, op: str):
        """A collective as the messages of hpcvar's decomposition (hpcvar.sim.replay_ref._lower_collective): per
        step its isends, its irecvs, then a wait for each."""
        from hpcvar.traces.collectives import steps

        r, comm = t.r, t.comm[i]
        members, index = self.trace.comms.get(comm), self.index.get(comm, {})
        if members is None or r not in index:
            raise self.refuse(r, t.seq[i], f"the {op} is on communicator {comm}, which the trace does not describe "
                                           "or of which the task is no member")
        me, tag, n = index[r], COLL_TAG_BASE + comm, len(members)
        root = index.get(t.peer[i], 0) if t.peer[i] >= 0 else 0
        k = self.kth.get((r, comm), 0)
        self.kth[(r, comm)] = k + 1
        sent: dict[int, list[int]] = {}  # per source: the bytes it sends me in this collective, in order

        def incoming(p: int) -> int:
            if p not in sent:
                rows = self.decomposed.get((members[p], comm), [])
                b = rows[k][0] if k < len(rows) else 0
                sent[p] = [nb for s_, _ in steps(op, n, p, root, b, self.algo) for q, nb in s_ if q == me]
            return sent[p].pop(0) if sent[p] else 0

        for sends, recvs in steps(op, n, me, root, t.bytes[i], self.algo):
            yield from (f"{r} isend {members[p]} {tag} {nb} {B}\n" for p, nb in sends)
            yield from (f"{r} irecv {members[p]} {tag} {incoming(p)} {B}\n" for p, _ in recvs)
            yield from (f"{r} wait {r} {members[p]} {tag}\n" for p, _ in sends)
            yield from (f"{r} wait {members[p]} {r} {tag}\n" for p, _ in recvs)

    def flops(self, ns: int) -> str:
        """ns of compute as flops at the rate: whole at 1e9 flop/s (exact), else Python's shortest repr."""
        return str(ns) if self.rate == 1e9 else repr(ns * self.rate / 1e9)

    def refuse(self, r: int, s: int, what: str) -> InputFileError:
        return InputFileError(f"task {r} seq {s}: {what}", self.where,
                              todo="Cut the section out ('hpcvar trace cut') or replay the trace with hpcvar")


__all__ = ["COLL_TAG_BASE", "index_entries", "write_tit"]
