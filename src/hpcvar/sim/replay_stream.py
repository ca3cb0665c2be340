"""The streaming replay: a native Parquet trace replayed in C with memory bounded by the trace's width (tasks,
distinct match keys, live requests), not its length (docs/replay.md, "Traces bigger than memory").

``open_trace(path)`` reads only the file's footer and metadata (``StreamTrace``: what the job needs of a trace
besides its rows). ``lower(trace, algo, compute)`` reads the rows row group by row group (only the columns
the lowering needs), hands the C lowering (native/sim/lower.c, stream mode) chunks of whole tasks, and writes
the ops to a temporary file, each task's contiguous, as packed records (9 bytes a compute, 25 a send, receive
or probe, 9 + 4 per request a wait); request ids are renumbered per task from a pool of recycled slots. The
measured side (span, MPI time per task) comes from the same pass. ``run(sim, enc)`` replays the file with the
same core (native/sim/replay.c) as the in-memory path: the core reads each task's ops through a buffer of
``buffer_bytes()`` refilled by pread when it runs dry. The results are identical to the in-memory replay
(tests/unit/test_replay_stream.py); per-row times (``--chrome``, ``--breakdown``) are not kept.
"""

from __future__ import annotations

import ctypes
import functools
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from hpcvar.errors import HpcvarError, InputFileError, UsageError

BUFFER_ENV = "HPCVAR_STREAM_BUFFER"  # bytes of each task's op buffer (tests force refills with a few dozen)
DEFAULT_BUFFER = 1 << 16
BUFFER_BUDGET = 1 << 28  # bytes of all the tasks' buffers together: a buffer is smaller when the tasks are many
CHUNK_ENV = "HPCVAR_STREAM_CHUNK_ROWS"  # rows read before the whole tasks among them are lowered
DEFAULT_CHUNK_ROWS = 1 << 20


def buffer_bytes(ntasks: int = 1) -> int:
    """Each task's op buffer in bytes: $HPCVAR_STREAM_BUFFER, else 64 KiB or BUFFER_BUDGET / ntasks if that is
    less (the core raises it to the longest record)."""
    v = os.environ.get(BUFFER_ENV)
    if not v:
        return max(4096, min(DEFAULT_BUFFER, BUFFER_BUDGET // max(1, ntasks)))
    try:
        n = int(v)
    except ValueError:
        n = 0
    if n < 32:
        raise UsageError(f"{BUFFER_ENV}={v} is not a byte count of at least 32", BUFFER_ENV,
                         "Give a number of bytes (65536), or unset it")
    return n


PRUNE_ENV = "HPCVAR_STREAM_PRUNE_KEYS"  # the lowering's match keys pruned from this many on (tests: a few)
DEFAULT_PRUNE = 1 << 16


def _env_int(name: str, default: int) -> int:
    """A test knob: $name as a count of at least 1, else the default."""
    v = os.environ.get(name)
    return max(1, int(v)) if v and v.isdigit() else default


def _chunk_rows() -> int:
    return _env_int(CHUNK_ENV, DEFAULT_CHUNK_ROWS)


@dataclass
class StreamTrace:
    """A native Parquet trace known by its footer and metadata only: what the replay job needs besides rows."""

    path: Path
    ntasks: int
    nrows: int
    comms: dict[int, list[int]]
    timed: bool
    source: str
    meta: dict
    columns: list[str]

    def has_column(self, name: str) -> bool:
        return name in self.columns


def is_parquet(path: str, fmt: str) -> bool:
    """Whether ``fmt`` (auto: by extension or content, as load_trace) names hpcvar's Parquet trace."""
    from hpcvar.traces.load import trace_format

    return trace_format(Path(path), fmt) in ("parquet", "native")


def open_trace(path: str, fmt: str = "auto") -> StreamTrace:
    """The trace's footer and metadata; a UsageError for a format the streaming replay does not read."""
    from hpcvar.traces import parquet

    if not is_parquet(path, fmt):
        raise UsageError(f"--stream replays hpcvar's Parquet traces only, not {path}", "--stream",
                         f"Convert it first: 'hpcvar trace import {path} -o TRACE.parquet', then replay that")
    p = Path(path)
    pf = parquet._open_parquet(p)
    try:
        meta = parquet._file_meta(pf, str(p))
        names = list(pf.schema_arrow.names)
        parquet._check_columns(names, str(p))
        nrows = pf.metadata.num_rows
    finally:
        pf.close()
    return StreamTrace(p, meta["ntasks"], nrows, meta["comms"] or {0: list(range(meta["ntasks"]))},
                       bool(meta.get("timed", True)), str(meta.get("source", "")),
                       {k: v for k, v in meta.items() if k not in ("comms", "ntasks", "timed", "source")}, names)


@dataclass
class StreamEncoded:
    """The ops of a trace in a temporary file (see the module's doc), and what the core needs to read them."""

    ntasks: int
    nrows: int
    task_off: np.ndarray  # int64, ntasks + 1: ops of task t are [task_off[t], task_off[t+1]) (global numbering)
    byte_off: np.ndarray  # int64, ntasks + 1: their bytes in the file
    row_off: np.ndarray   # int64, ntasks + 1: rows of task t (row ids are row_off[t] + seq)
    nops: int
    nkeys: int
    nreqs: int
    maxrec: int
    nbytes_file: int
    measured: tuple       # (total_s, comm_s) per task
    fd: int
    path: str
    rows: None = None
    key_slots: int = 0  # the most match-key queue slots a replay of it allocated (the peak of keys in use)
    _closed: bool = field(default=False, repr=False)

    def row_of(self, r: int) -> tuple[int, int]:
        t = int(np.searchsorted(self.row_off, r, side="right") - 1)
        return t, int(r - self.row_off[t])

    def close(self) -> None:
        """Close and delete the ops file."""
        if not self._closed:
            self._closed = True
            os.close(self.fd)
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                pass

    def __del__(self):
        self.close()


@functools.cache
def _lib():
    from hpcvar.sim.replay_native import lib

    so = lib()
    so.hv_rp_stream_open.restype = ctypes.c_void_p
    so.hv_rp_stream_open.argtypes = [ctypes.c_int64, ctypes.c_int64]
    so.hv_rp_stream_close.restype = ctypes.c_int
    so.hv_rp_stream_close.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_int64)]
    return so


def _read_columns(pf, i: int, types: dict, where: str) -> dict[str, np.ndarray]:
    """Row group i's columns ``types`` as numpy (the readers' checks: op codes, exact integers)."""
    import pyarrow as pa

    from hpcvar.traces import parquet

    try:
        table = pf.read_row_group(i, columns=list(types))
    except (pa.ArrowException, OSError) as e:
        raise parquet._unreadable(e, where) from None
    cols = {c: np.empty(table.num_rows, t) for c, t in types.items()}
    parquet._fill_columns(cols, 0, table, where)
    return cols


def _unsorted(where: str, task: int, seq: int, prev: int) -> InputFileError:
    return InputFileError(f"the rows are not sorted by task then seq = 0, 1, 2, ... (task {task} seq {seq} after "
                          f"task {prev}): --stream reads them in file order", where,
                          todo="Replay it in memory (--no-stream), which sorts the rows first")


def _check_order(cols: dict, last_task: int, where: str) -> None:
    """The chunk's rows in (task, seq = 0, 1, ...) order, after the tasks lowered so far (< last_task + 1)."""
    from hpcvar.traces.parquet import _seq_break

    task, seq = cols["task"], cols["seq"]
    if not len(task):
        return
    i = _seq_break(task, seq)
    if i >= 0:
        raise _unsorted(where, int(task[i]), int(seq[i]), int(task[i - 1]) if i > 0 else last_task)
    if task[0] <= last_task or task[-1] < 0:
        raise _unsorted(where, int(task[0]), int(seq[0]), last_task)


class _Lowering:
    """One streaming lowering: the C stream, the ops file and the per-task arrays filled chunk by chunk."""

    def __init__(self, trace: StreamTrace, algo: str, compute: str, tmpdir: str | None):
        from hpcvar.sim import replay_native as rn

        self.trace, self.algo, self.compute, self.where = trace, algo, compute, str(trace.path)
        self.types = {"task": np.int32, "seq": np.int64, **rn.LOWER_COLUMNS,
                      **{c: t for c, t in rn.LOWER_OPTIONAL.items() if trace.has_column(c)}}
        cids = sorted(trace.comms)
        self.ncomms = len(cids)
        self.comm = (np.array(cids, np.int32),
                     np.cumsum([0] + [len(trace.comms[c]) for c in cids]).astype(np.int64),
                     np.array([w for c in cids for w in trace.comms[c]], np.int32))
        n = trace.ntasks
        self.task_off, self.byte_off = np.zeros(n + 1, np.int64), np.zeros(n + 1, np.int64)
        self.row_off = np.zeros(n + 1, np.int64)
        self.mpi_ns = np.zeros(n)
        self.first = np.full(n, np.iinfo(np.int64).max)
        self.last = np.full(n, np.iinfo(np.int64).min)
        self.next_task, self.row_base, self.cpu_seen = 0, 0, False
        self.so = _lib()
        self.fd, self.path = tempfile.mkstemp(prefix="hpcvar-ops-", suffix=".bin", dir=tmpdir)
        self.st = self.so.hv_rp_stream_open(self.fd, _env_int(PRUNE_ENV, DEFAULT_PRUNE))
        if not self.st:
            self.discard()
            raise HpcvarError("lowering the trace ran out of memory", None, "Replay a shorter trace")

    def discard(self) -> None:
        os.close(self.fd)
        os.unlink(self.path)

    def chunk(self, cols: dict, upto: int) -> None:
        """Lower tasks [next_task, upto) whose rows are ``cols`` (all of them)."""
        from hpcvar.sim import replay_native as rn
        from hpcvar.traces.parquet import Trace, validate

        t0, rb = self.next_task, self.row_base
        k = upto - t0
        if k <= 0:
            return
        if len(cols["task"]):  # the in-memory reader's checks (op names, task numbers, values, seq), chunk by chunk
            validate(Trace(columns=cols, ntasks=self.trace.ntasks, comms=dict(self.trace.comms)), self.where)
        roff = np.searchsorted(cols["task"], np.arange(t0, upto + 1, dtype=np.int64)).astype(np.int64)
        c = rn._LowerConfig(nrows=len(cols["task"]), ntasks=k, algo=rn.ALGO_CODES[self.algo],
                            compute=rn.COMPUTE_CODES[self.compute], ncomms=self.ncomms,
                            ntasks_all=self.trace.ntasks, nrows_all=self.trace.nrows, task_base=t0, row_base=rb)
        c.row_off = roff.ctypes.data
        c.comm_id, c.comm_off, c.comm_mem = (a.ctypes.data for a in self.comm)
        conv = {name: np.ascontiguousarray(cols[name], dtype=t) for name, t in self.types.items()
                if name not in ("task", "seq")}
        for name, a in conv.items():
            setattr(c, rn._LOWER_FIELDS.get(name, name), a.ctypes.data)
        out = dict(task_off=np.empty(k + 1, np.int64), byte_off=np.empty(k + 1, np.int64), mpi_ns=np.empty(k),
                   first_start=np.empty(k, np.int64), last_end=np.empty(k, np.int64))
        for name, a in out.items():
            setattr(c, name, a.ctypes.data)
        c.stream = self.st
        if self.so.hv_rp_lower(ctypes.byref(c)) != 0:
            raise HpcvarError("lowering the trace ran out of memory, or writing its ops failed", self.path,
                              "Replay a shorter trace, or free memory or disk space (the ops go to $TMPDIR)")
        if c.err:
            rn._lower_errors(c, conv, roff, self.trace.source or self.where, task_base=t0)
        self.task_off[t0:upto + 1] = out["task_off"]
        self.byte_off[t0:upto + 1] = out["byte_off"]
        self.row_off[t0:upto + 1] = rb + roff
        self.mpi_ns[t0:upto], self.first[t0:upto], self.last[t0:upto] = (out["mpi_ns"], out["first_start"],
                                                                        out["last_end"])
        if self.compute == "cpu" and "cpu_ns" in cols and (cols["cpu_ns"] >= 0).any():
            self.cpu_seen = True
        self.next_task, self.row_base = upto, rb + len(cols["task"])

    def read(self) -> None:
        """Every row group in order, lowered by chunks of whole tasks (the last task of a chunk waits for the
        next one: its rows may go on there). Row groups of at least the chunk's rows are lowered where Arrow
        put them: only the rows of the task carried over are copied (with a concatenation of each whole group
        the copies took a third of the lowering's main thread)."""
        from concurrent.futures import ThreadPoolExecutor

        from hpcvar.traces import parquet

        where = self.where
        pf = parquet._open_parquet(self.trace.path)
        pool = ThreadPoolExecutor(1)  # the next row group decodes (Arrow, numpy) while C lowers this chunk
        try:
            carry: dict | None = None
            pending: list[dict] = []
            npend, target, ngroups = 0, _chunk_rows(), pf.num_row_groups
            nxt = pool.submit(_read_columns, pf, 0, self.types, where) if ngroups else None
            for i in range(ngroups):
                assert nxt is not None
                got = nxt.result()
                nxt = pool.submit(_read_columns, pf, i + 1, self.types, where) if i + 1 < ngroups else None
                pending.append(got)
                npend += len(pending[-1]["task"])
                if npend < target and i + 1 < pf.num_row_groups:
                    continue
                cols = {c: np.concatenate([p[c] for p in pending]) for c in self.types} if len(pending) > 1 \
                    else pending[0]
                pending, npend = [], 0
                carry = self._lower_rows(carry, cols)
            self.chunk(carry if carry is not None else {c: np.empty(0, t) for c, t in self.types.items()},
                       self.trace.ntasks)
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
            pf.close()
        if self.row_base != self.trace.nrows:
            raise InputFileError(f"the row groups do not hold the {self.trace.nrows} rows the file's footer "
                                 "announces", where, todo="The trace is damaged: record or import it again")
        if self.compute == "cpu" and not self.cpu_seen:
            raise UsageError(f"the trace {where} has no CPU time", "--compute",
                             "Record it with 'hpcvar trace --cpu-time', or use --compute wall")

    def _lower_rows(self, carry: dict | None, cols: dict) -> dict:
        """Lower the carried task's rows with its rows at the start of ``cols``, then the whole tasks of the rest
        of ``cols`` (views, no copy); the rows of its last task are carried on (a copy)."""
        if carry is not None and len(carry["task"]):
            ct = int(carry["task"][0])
            other = np.flatnonzero(cols["task"] != ct)
            k = int(other[0]) if len(other) else len(cols["task"])
            head = {c: np.concatenate([carry[c], cols[c][:k]]) for c in self.types}
            _check_order(head, self.next_task - 1, self.where)
            if k == len(cols["task"]):  # the carried task goes on beyond these rows
                return head
            self.chunk(head, ct + 1)
            cols = {c: a[k:] for c, a in cols.items()}
        _check_order(cols, self.next_task - 1, self.where)
        ntasks = self.trace.ntasks
        if len(cols["task"]) and int(cols["task"][-1]) >= ntasks:
            raise InputFileError(f"task {int(cols['task'][-1])} is not below the trace's ntasks {ntasks}",
                                 self.where, todo="The trace is damaged: record or import it again")
        lt = int(cols["task"][-1]) if len(cols["task"]) else self.next_task
        cut = int(np.searchsorted(cols["task"], lt))
        self.chunk({c: a[:cut] for c, a in cols.items()}, lt)
        return {c: a[cut:].copy() for c, a in cols.items()}

    def abandon(self) -> None:
        self.so.hv_rp_stream_close(self.st, (ctypes.c_int64 * 6)())
        self.discard()

    def close(self) -> tuple[int, ...]:
        """The stream's figures (ops, keys, requests, longest record, bytes); the C stream freed."""
        res = (ctypes.c_int64 * 6)()
        rc = self.so.hv_rp_stream_close(self.st, res)
        if rc != 0:
            self.discard()
            raise HpcvarError(f"writing the lowered ops failed ({os.strerror(int(res[5]))})", self.path,
                              "Free disk space where $TMPDIR points, or set TMPDIR to a larger disk")
        return tuple(int(x) for x in res[:5])


def lower(trace: StreamTrace, algo: str = "binomial", compute: str = "wall", tmpdir: str | None = None
          ) -> StreamEncoded:
    """The trace lowered task by task into a temporary ops file (in ``tmpdir``, else $TMPDIR)."""
    from hpcvar.sim import replay_native as rn

    rn._check_algo(algo)
    rn._check_compute(compute)
    lw = _Lowering(trace, algo, compute, tmpdir)
    try:
        lw.read()
    except BaseException:  # an error or an interrupt: no C stream or ops file left behind
        lw.abandon()
        raise
    nops, nkeys, nreqs, maxrec, nbytes = lw.close()
    if max(trace.nrows, nreqs, nkeys) >= 2**31:
        lw.discard()
        raise HpcvarError(f"the trace has {trace.nrows} rows and {nreqs} live requests: more than the core's 2^31",
                          None, "Replay a shorter trace")
    present = lw.last >= lw.first
    span = np.where(present, lw.last - np.where(present, lw.first, 0), 0)
    return StreamEncoded(trace.ntasks, trace.nrows, lw.task_off, lw.byte_off, lw.row_off, nops, nkeys, nreqs, maxrec,
                         nbytes, (span * 1e-9, lw.mpi_ns * 1e-9), lw.fd, lw.path)


def run(sim, enc: StreamEncoded, progress=None):
    """Replay the ops file with the simulator's cluster, mapping, model and jitter; a ``Result`` (without row
    times)."""
    from hpcvar.sim import replay_native as rn
    from hpcvar.sim.replay_ref import Result

    cl, ntasks = sim.cluster, enc.ntasks
    node_of, nnodes, link_key, link_bw, link_lat = rn.cluster_arrays(sim)
    clock, comm = np.zeros(ntasks), np.zeros(ntasks)
    pen_sum, pen_n = np.zeros(ntasks), np.zeros(ntasks)
    kinds = np.zeros((ntasks, 4), np.int64)
    pc, blocked, stuck = np.zeros(ntasks, np.int64), np.zeros(ntasks, np.int64), np.zeros(ntasks, np.int64)
    c = rn._Config(ntasks=ntasks, nops=enc.nops, nreqs=enc.nreqs, nkeys=enc.nkeys, nrows=enc.nrows, nnodes=nnodes,
                   model=rn.MODEL_CODES[sim.model], eager=float(sim.eager), bandwidth=float(cl.bandwidth),
                   latency=float(cl.latency), shm_bandwidth=float(cl.shm_bandwidth),
                   shm_latency=float(cl.shm_latency), rndv_latency=float(cl.rndv_latency),
                   shm_rndv_latency=float(cl.shm_rndv_latency), send_buffer=float(cl.send_buffer),
                   rndv_first=float(cl.rndv_first), pair_serial=int(cl.pair_serial), nlinks=len(link_key),
                   stream_fd=enc.fd,
                   stream_buf=max(buffer_bytes(ntasks), enc.maxrec), stream_maxrec=enc.maxrec)
    rn._model_params(c, sim.model, sim.params)
    arrays = dict(link_key=link_key, link_bw=link_bw, link_lat=link_lat, task_off=enc.task_off,
                  byte_off=enc.byte_off, node_of=node_of, clock=clock, comm=comm, pen_sum=pen_sum, pen_n=pen_n,
                  kinds=kinds, pc=pc, blocked=blocked, stuck_row=stuck)
    if sim.jitter is not None:
        ja = sim.jitter.arrays()
        c.njtr = len(ja["off"]) - 1
        arrays.update(jtr_off=ja["off"], jtr_d=ja["d"], jtr_g=ja["g"], jtr_S=ja["S"], jtr_pos=ja["pos"])
    for name, arr in arrays.items():
        setattr(c, name, rn._ptr(arr))
    cb = rn.PROGRESS_FN(progress) if progress is not None else rn.PROGRESS_FN()
    c.progress = cb
    rc = rn.lib().hv_rp_run(ctypes.byref(c))
    if rc == -3:
        raise HpcvarError("the replay core could not read the lowered ops back", enc.path,
                          "Check the disk of $TMPDIR (the ops file may have been removed or truncated)")
    rn._check_rc(rc, c, sim.params)
    enc.key_slots = max(enc.key_slots, int(c.key_slots))
    rn._replay_errors(c, ntasks, blocked, sim.trace.source or "trace",
                      lambda t: int(stuck[t]), lambda: (int(c.first_unmatched_row), int(c.first_unmatched_peer)),
                      enc.row_of)
    conflicts = [{rn.KIND_NAMES[j]: int(v) for j, v in enumerate(kinds[t]) if v} for t in range(ntasks)]
    avg = np.divide(pen_sum, pen_n, out=np.ones(ntasks), where=pen_n > 0)
    return Result(ntasks, list(sim.node_of), clock, comm, {}, {}, conflicts, avg, int(c.nevents))


__all__ = ["BUFFER_ENV", "StreamEncoded", "StreamTrace", "buffer_bytes", "is_parquet", "lower", "open_trace", "run"]
