"""The native event trace: one Parquet file, one row per traced MPI call.

Format (docs/formats.md, "Event traces"), version TRACE_VERSION:

    task int32, seq int64, op string, peer int32, bytes int64, tag int32, comm int32,
    t_start_ns int64, t_end_ns int64, req int64
    and, where recorded (OPTIONAL_COLUMNS): poll_ns int64, cpu_ns int64

``seq`` numbers a task's rows from 0; ``peer`` is a rank of MPI_COMM_WORLD
(the root for rooted collectives, -1 where none); ``req`` is, on a ``wait``
row, the seq of the isend/irecv it completes (-1 elsewhere). Compute time is
the gap between a row's t_start_ns and the previous row's t_end_ns, less the
row's ``poll_ns``: the time the task spent, inside that gap, in MPI calls that
found nothing (an MPI_Iprobe without a message, an MPI_Test* that completed
nothing; 0 where not recorded). ``cpu_ns`` is the calling thread's CPU time
during that computation (-1 where not recorded: ``hpcvar trace --cpu-time``).
A ``probe`` row is a successful MPI_Iprobe or an MPI_Probe (the message is
there; its receive is a row of its own). The Parquet schema metadata key
``hpcvar.trace`` holds JSON: format, version, ntasks, comms ({id: [world
ranks]}), timed (false for time-independent imports), source.

Version history:
  1 (0.1.0): first version.
  2: op ``probe``; the optional columns ``poll_ns`` and ``cpu_ns``. Version 1 files are read (no polls, no CPU
     time); a version 1 reader refuses version 2 files (it would take their polls for computation).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from hpcvar.errors import InputFileError

if TYPE_CHECKING:
    import pandas as pd

TRACE_VERSION = 2
READ_VERSIONS = (1, 2)
META_KEY = b"hpcvar.trace"

# op codes of native/trace/hv_trace.c, in the same order
OPS = ["init", "finalize", "send", "recv", "isend", "irecv", "sendrecv", "sendrecv_recv", "wait", "barrier",
       "bcast", "reduce", "allreduce", "gather", "gatherv", "scatter", "scatterv", "allgather", "allgatherv",
       "alltoall", "alltoallv", "probe"]
P2P_OPS = {"send", "recv", "isend", "irecv", "sendrecv", "sendrecv_recv", "wait", "probe"}
COLLECTIVE_OPS = set(OPS[9:21])
COLUMNS = {"task": "int32", "seq": "int64", "op": "object", "peer": "int32", "bytes": "int64", "tag": "int32",
           "comm": "int32", "t_start_ns": "int64", "t_end_ns": "int64", "req": "int64"}

# Bounds of an imported or recorded trace: task numbers index per-task arrays (10**22 tasks is damage, not an
# application), times and sizes are int64 columns whose sums must not wrap.
MAX_TASKS = 1 << 24
MAX_NS = 10**17  # units.MAX_TIME_S in ns
MAX_BYTES = 1 << 62

# columns a trace has where they were recorded, and their value where not: poll_ns (time in polls that found
# nothing, inside the gap before the row) and cpu_ns (the thread's CPU time of the computation in that gap)
OPTIONAL_COLUMNS = {"poll_ns": "int64", "cpu_ns": "int64"}
OPTIONAL_ABSENT = {"poll_ns": 0, "cpu_ns": -1}

# the columns in memory (numpy): COLUMNS' types, ``op`` as int8 codes into OPS
NUMPY_TYPES = {"task": np.int32, "seq": np.int64, "op": np.int8, "peer": np.int32, "bytes": np.int64,
               "tag": np.int32, "comm": np.int32, "t_start_ns": np.int64, "t_end_ns": np.int64, "req": np.int64}
OPTIONAL_NUMPY_TYPES = {"poll_ns": np.int64, "cpu_ns": np.int64}
# what a missing value (a null written by another tool) means; task, seq and the times have no default
FILL_VALUES = {"peer": -1, "req": -1, "bytes": 0, "tag": 0, "comm": 0, **OPTIONAL_ABSENT}

# the tracer's records (native/trace/hv_trace.c): HVTRACE 1 (48 bytes), HVTRACE 2 (88 bytes: CPU clocks and polls)
RAW_RECORD_V1 = np.dtype([("t_start_ns", "<i8"), ("t_end_ns", "<i8"), ("bytes", "<i8"), ("req", "<i8"),
                          ("op", "<i4"), ("peer", "<i4"), ("tag", "<i4"), ("comm", "<i4")])
RAW_RECORD = np.dtype([("t_start_ns", "<i8"), ("t_end_ns", "<i8"), ("bytes", "<i8"), ("req", "<i8"),
                       ("cpu_start_ns", "<i8"), ("cpu_end_ns", "<i8"), ("poll_ns", "<i8"), ("poll_cpu_ns", "<i8"),
                       ("op", "<i4"), ("peer", "<i4"), ("tag", "<i4"), ("comm", "<i4"), ("npoll", "<i4"),
                       ("rdelay_us", "<i4")])
RAW_RECORDS = {1: RAW_RECORD_V1, 2: RAW_RECORD}


class Trace:
    """An event trace in memory: its rows and its communicators.

    The rows are held either as numpy columns (``column(name)``: NUMPY_TYPES and the OPTIONAL_NUMPY_TYPES
    recorded, see ``has_column``; ``op`` as int8 codes into OPS), what the readers produce and the C lowering
    reads, or as a DataFrame with COLUMNS (``events``), built from the columns (without a copy) the first time
    something asks for it: code that only replays a trace in C never imports pandas. Once the DataFrame exists
    it is the one copy of the rows (``column`` reads from it).
    """

    def __init__(self, events: pd.DataFrame | None = None, ntasks: int = 0, comms: dict[int, list[int]] | None = None,
                 timed: bool = True, source: str = "", meta: dict | None = None, *,
                 columns: dict[str, np.ndarray] | None = None):
        if (events is None) == (columns is None):
            raise ValueError("give the rows either as events (a DataFrame) or as columns")
        self._events = events
        self._columns = columns
        self.ntasks = ntasks
        self.comms: dict[int, list[int]] = comms if comms is not None else {}
        self.timed, self.source = timed, source
        self.meta: dict = meta if meta is not None else {}
        if 0 not in self.comms:
            self.comms[0] = list(range(self.ntasks))

    @property
    def events(self) -> pd.DataFrame:
        if self._events is None:
            assert self._columns is not None  # one of the two is always set
            self._events = events_frame(self._columns)
            self._columns = None
        return self._events

    @events.setter
    def events(self, df: pd.DataFrame) -> None:
        self._events, self._columns = df, None

    @property
    def nrows(self) -> int:
        if self._events is not None:
            return len(self._events)
        assert self._columns is not None  # one of the two is always set
        return len(next(iter(self._columns.values())))

    def has_column(self, name: str) -> bool:
        """Whether the rows have this column (COLUMNS always; OPTIONAL_COLUMNS where recorded)."""
        return name in (self._columns if self._columns is not None else self.events.columns)

    def column(self, name: str) -> np.ndarray:
        """A column as numpy (NUMPY_TYPES, OPTIONAL_NUMPY_TYPES; ``op``: int8 codes into OPS, -1 for a name not in
        OPS), without a copy where the rows already hold it in that type."""
        if self._columns is not None:
            return self._columns[name]
        if name == "op":
            return op_codes(self.events["op"])
        return self.events[name].to_numpy()

    def drop_rows(self) -> None:
        """Forget the rows (the lowering holds what the replays need); the trace keeps its size and comms."""
        self._events = None
        self._columns = {c: np.empty(0, t) for c, t in NUMPY_TYPES.items()}

    def task_rows(self, task: int) -> pd.DataFrame:
        return self.events[self.events["task"] == task]


def optional_columns(ev: pd.DataFrame) -> list[str]:
    """The OPTIONAL_COLUMNS the events have (recorded), in OPTIONAL_COLUMNS' order."""
    return [c for c in OPTIONAL_COLUMNS if c in ev.columns]


def op_codes(ops) -> np.ndarray:
    """int8 codes (OPS) of an op column (a categorical over OPS: its codes, without a copy; else strings, -1
    where a name is not in OPS)."""
    import pandas as pd

    cat = ops.dtype if isinstance(ops.dtype, pd.CategoricalDtype) else None
    if cat is not None and list(cat.categories) == OPS:
        codes = ops.array.codes  # a view
    else:
        codes = pd.Categorical(ops, categories=OPS).codes
    return codes.astype(np.int8, copy=False)


def make_events(rows: list[dict] | pd.DataFrame) -> pd.DataFrame:
    """A DataFrame with the native columns (defaults: peer -1, bytes 0, tag 0, comm 0, req -1), and the optional
    columns the rows have (a missing value: poll_ns 0, cpu_ns -1)."""
    import pandas as pd

    df = pd.DataFrame(rows).copy()
    defaults = {"peer": -1, "bytes": 0, "tag": 0, "comm": 0, "req": -1, "t_start_ns": 0, "t_end_ns": 0}
    for c, v in {**defaults, **OPTIONAL_ABSENT}.items():
        if c not in df.columns:
            if c in defaults:
                df[c] = v
        else:
            df[c] = df[c].fillna(v)
    if "seq" not in df.columns:
        df["seq"] = df.groupby("task").cumcount()
    types = {**COLUMNS, **{c: OPTIONAL_COLUMNS[c] for c in optional_columns(df)}}
    df = df[list(types)]
    return df.astype({c: t for c, t in types.items() if t != "object"}).reset_index(drop=True)


def validate(trace: Trace, where: str) -> None:
    """Raise InputFileError on unknown ops, bad task numbers, impossible values or non-contiguous seq.
    Range checks are reductions (min, max) and the order checks go CHUNK rows at a time: no temporary of
    the trace's size unless a check fails (or the rows are not grouped by task)."""
    if trace._events is not None:
        missing = [c for c in COLUMNS if c not in trace._events.columns]
        if missing:
            raise InputFileError(f"the trace lacks columns {missing}", where, todo="Write it with hpcvar trace")
    _check_ops(trace, where)
    task = trace.column("task")
    if len(task) and (task.min() < 0 or task.max() >= trace.ntasks):
        raise InputFileError(f"task numbers must be in 0..{trace.ntasks - 1}", where,
                             todo="Fix 'ntasks' in the metadata or the task column")
    _check_values(trace, where)
    _check_seq(task, trace.column("seq"), where)


def _check_ops(trace: Trace, where: str) -> None:
    codes = trace.column("op")  # -1: a name that is not in OPS, or a missing value
    if not len(codes) or codes.min() >= 0:
        return
    i = int(np.argmax(codes < 0))
    name = trace.events["op"].iloc[i] if trace._events is not None else codes[i]
    raise InputFileError(f"unknown op '{name}' at task {trace.column('task')[i]} seq {trace.column('seq')[i]}", where,
                         todo=f"Known ops: {', '.join(OPS)}")


def _check_values(trace: Trace, where: str) -> None:
    """Refuse values no MPI call has: a peer outside -1..ntasks-1, a negative or absurd size, a time outside
    0..MAX_NS or a call ending before it starts (damage, or a tracer and reader that disagree)."""
    if not trace.nrows:
        return
    t0, t1 = trace.column("t_start_ns"), trace.column("t_end_ns")
    ntasks = trace.ntasks
    for name, lo, hi, what in (("peer", -1, ntasks - 1, f"peer outside -1..{ntasks - 1}"),
                               ("bytes", 0, MAX_BYTES, f"size outside 0..{MAX_BYTES}"),
                               ("t_start_ns", 0, MAX_NS, f"start time outside 0..{MAX_NS} ns")):
        col = trace.column(name)
        if col.min() < lo or col.max() > hi:
            _value_error(trace, int(np.argmax((col < lo) | (col > hi))), what, where)
    bad = _first_true(lambda end, start: (end < start) | (end > MAX_NS), t1, t0)
    if bad >= 0:
        _value_error(trace, bad, f"end before its start or beyond {MAX_NS} ns", where)
    for name, lo in (("poll_ns", 0), ("cpu_ns", -1)):
        if trace.has_column(name):
            col = trace.column(name)
            if col.min() < lo or col.max() > MAX_NS:
                _value_error(trace, int(np.argmax((col < lo) | (col > MAX_NS))), f"{name} outside {lo}..{MAX_NS}",
                             where)


def _value_error(trace: Trace, i: int, what: str, where: str) -> None:
    r = {c: trace.column(c)[i] for c in COLUMNS}
    op = OPS[r["op"]] if 0 <= r["op"] < len(OPS) else r["op"]
    raise InputFileError(f"{what} at task {r['task']} seq {r['seq']} ({op}: peer {r['peer']}, "
                         f"bytes {r['bytes']}, t {r['t_start_ns']}..{r['t_end_ns']})", where,
                         todo="The trace is damaged: record or import it again")


CHUNK = 1 << 20  # rows per step of the order checks: temporaries of a few MiB, not of the trace's size


def _first_true(cond, *cols: np.ndarray) -> int:
    """The first row where ``cond(*slices)`` holds, evaluated CHUNK rows at a time; -1 if none."""
    for lo in range(0, len(cols[0]), CHUNK):
        hit = cond(*(c[lo:lo + CHUNK] for c in cols))
        if hit.any():
            return lo + int(np.argmax(hit))
    return -1


def _seq_break(task: np.ndarray, seq: np.ndarray) -> int:
    """The first row that breaks (task ascending, seq = 0, 1, 2, ... within each task); -1 if none."""
    if not len(task):
        return -1
    if seq[0] != 0:
        return 0
    i = _first_true(_breaks, task[1:], task[:-1], seq[1:], seq[:-1])
    return -1 if i < 0 else i + 1


def _breaks(t: np.ndarray, tp: np.ndarray, s: np.ndarray, sp: np.ndarray) -> np.ndarray:
    """Rows (t, s) that neither continue the previous row's task (tp, sp) by one nor start a later task at 0:
    the full test runs only where seq does not go on by one or the task changes (a few rows per task)."""
    hit = np.zeros(len(t), dtype=bool)
    cand = np.flatnonzero((s - sp != 1) | (t != tp))
    tc, tpc, sc, spc = t[cand], tp[cand], s[cand], sp[cand]
    hit[cand] = ~(((tc == tpc) & (sc - spc == 1)) | ((tc > tpc) & (sc == 0)))
    return hit


def in_task_seq_order(task: np.ndarray, seq: np.ndarray) -> bool:
    """Whether the rows are grouped by ascending task with seq = 0, 1, 2, ... in each (the order the C
    lowering reads; write_parquet writes it)."""
    return _seq_break(task, seq) < 0


def _check_seq(task: np.ndarray, seq: np.ndarray, where: str) -> None:
    """seq = 0, 1, 2, ... within each task, in the order the task's rows appear (tasks may interleave)."""
    i = _seq_break(task, seq)
    if i < 0:
        return
    if _first_true(lambda t, tp: t < tp, task[1:], task[:-1]) >= 0:  # not grouped by task: a stable sort
        order = np.argsort(task, kind="stable")
        task, seq = task[order], seq[order]
        i = _seq_break(task, seq)
        if i < 0:
            return
    t = int(task[i])
    expect = i - int(np.searchsorted(task[:i], t, side="left"))
    raise InputFileError(f"task {t}: seq is not 0,1,2,... (row {expect} has seq {int(seq[i])}); the "
                         "trace is truncated or was reordered", where, todo="Re-record or re-merge the trace")


def _trace_meta(raw: bytes, where: str) -> dict:
    """The 'hpcvar.trace' metadata: a JSON object with a sane ntasks and comms of world ranks."""
    try:
        meta = json.loads(raw)
        if not isinstance(meta, dict):
            raise ValueError("not a JSON object")
        n = meta.get("ntasks")
        if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= MAX_TASKS:
            raise ValueError(f"ntasks {str(n)[:30]} is not in 1..{MAX_TASKS}")
        comms = meta.get("comms", {})
        if not isinstance(comms, dict) or not all(
                isinstance(v, list) and all(isinstance(x, int) and 0 <= x < n for x in v) for v in comms.values()):
            raise ValueError(f"comms are not lists of ranks in 0..{n - 1}")
        meta["comms"] = {int(k): v for k, v in comms.items()}
    except (ValueError, UnicodeDecodeError) as e:  # JSONDecodeError is a ValueError
        raise InputFileError(f"the 'hpcvar.trace' metadata is damaged ({str(e)[:120]})", where,
                             todo="Write the trace again with 'hpcvar trace run' or 'hpcvar trace import'") from None
    return meta


def write_parquet(trace: Trace, path: str | Path) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from hpcvar.results.store import atomic_write_bytes

    ev = trace.events.sort_values(["task", "seq"], kind="stable")
    table = pa.Table.from_pandas(ev[[*COLUMNS, *optional_columns(ev)]], preserve_index=False)
    meta = {"format": "hpcvar-trace", "version": TRACE_VERSION, "ntasks": trace.ntasks,
            "comms": {str(k): v for k, v in trace.comms.items()}, "timed": trace.timed, "source": trace.source,
            **{k: v for k, v in trace.meta.items() if k not in ("format", "version")}}
    table = table.replace_schema_metadata({**(table.schema.metadata or {}), META_KEY: json.dumps(meta).encode()})
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="zstd")
    path = Path(path)
    atomic_write_bytes(path, sink.getvalue().to_pybytes())
    return path


def read_parquet(path: str | Path) -> Trace:
    """A native trace: the file read row group by row group into preallocated numpy columns (Arrow holds
    one row group's decoded buffers at a time, never the whole file's), the events frame built over those
    columns without a copy, then validated."""
    path = Path(path)
    pf = _open_parquet(path)
    try:
        meta = _file_meta(pf, str(path))
        cols = _read_row_groups(pf, str(path))
    finally:
        pf.close()
    trace = Trace(columns=cols, ntasks=meta["ntasks"], comms=meta["comms"],
                  timed=bool(meta.get("timed", True)), source=str(meta.get("source", "")),
                  meta={k: v for k, v in meta.items() if k not in ("comms", "ntasks", "timed", "source")})
    del cols
    validate(trace, str(path))
    return trace


def _unreadable(e: Exception, where: str) -> InputFileError:
    return InputFileError(f"cannot read the trace as Parquet ({e}); it may be truncated", where,
                          todo="Re-record it with 'hpcvar trace run', or import it with 'hpcvar trace import'")


def _open_parquet(path: Path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    if not path.is_file():
        raise InputFileError("no such trace file", str(path), todo="Give a trace written by 'hpcvar trace run'")
    try:
        try:  # 'op' decoded as a dictionary: the lookup to OPS then runs over its few words
            return pq.ParquetFile(path, read_dictionary=["op"])
        except KeyError:  # no 'op' column: the reader names the missing columns
            return pq.ParquetFile(path)
    except (pa.ArrowException, OSError) as e:
        raise _unreadable(e, str(path)) from None


def _file_meta(pf, where: str) -> dict:
    raw = (pf.schema_arrow.metadata or {}).get(META_KEY)
    if raw is None:
        raise InputFileError("the Parquet file has no 'hpcvar.trace' metadata: not an hpcvar event trace",
                             where, todo="Write it with 'hpcvar trace run' or 'hpcvar trace import'")
    meta = _trace_meta(raw, where)
    if meta.get("version") not in READ_VERSIONS:
        raise InputFileError(f"trace version {meta.get('version')!r} is not a version this hpcvar reads "
                             f"({', '.join(map(str, READ_VERSIONS))})", where,
                             todo="Convert it with the hpcvar that wrote it")
    return meta


def _read_row_groups(pf, where: str) -> dict[str, np.ndarray]:
    """The columns (NUMPY_TYPES) of every row group, copied into arrays allocated once for the file."""
    import pyarrow as pa

    from hpcvar import _memory

    _check_columns(pf.schema_arrow.names, where)
    n = pf.metadata.num_rows
    types = {**NUMPY_TYPES, **{c: t for c, t in OPTIONAL_NUMPY_TYPES.items() if c in pf.schema_arrow.names}}
    cols = {c: _memory.empty(n, t) for c, t in types.items()}
    pos = 0
    for i in range(pf.num_row_groups):
        try:
            table = pf.read_row_group(i, columns=list(types))
        except (pa.ArrowException, OSError) as e:
            raise _unreadable(e, where) from None
        if pos + table.num_rows > n:
            break
        _fill_columns(cols, pos, table, where)
        pos += table.num_rows
        del table
    pa.default_memory_pool().release_unused()  # Arrow's allocator keeps a row group's buffers for reuse
    if pos != n:
        raise InputFileError(f"the row groups do not hold the {n} rows the file's footer announces", where,
                             todo="The trace is damaged: record or import it again")
    return cols


def _check_columns(names: list[str], where: str) -> None:
    missing = [c for c in COLUMNS if c not in names]
    if missing:
        raise InputFileError(f"the trace lacks columns {missing}", where, todo="Write it with hpcvar trace")
    twice = sorted({c for c in (*COLUMNS, *OPTIONAL_COLUMNS) if names.count(c) > 1})
    if twice:
        raise InputFileError(f"the trace has columns {twice} twice", where, todo="The trace is damaged")


def _fill_columns(cols: dict[str, np.ndarray], pos: int, table, where: str) -> None:
    """Rows pos.. of ``cols`` from an Arrow table (one row group): ``op`` as codes into OPS (a lookup over
    the chunk's dictionary), the numbers as exact integers (nulls: FILL_VALUES)."""
    for name in cols:
        at = pos
        for chunk in table.column(name).chunks:
            dst = cols[name][at:at + len(chunk)]
            if name == "op":
                dst[:] = _op_codes(chunk, table, at - pos, where)
            else:
                _fill_ints(dst, chunk, name, where)
            at += len(chunk)


def _op_codes(chunk, table, first_row: int, where: str) -> np.ndarray:
    import pyarrow as pa

    if chunk.null_count:
        raise InputFileError("column 'op' has missing values", where, todo="The trace is damaged")
    try:
        if not pa.types.is_dictionary(chunk.type):  # hpcvar writes a dictionary: pyarrow.compute (0.03 s) not needed
            import pyarrow.compute as pc

            chunk = pc.dictionary_encode(chunk)
        words = chunk.dictionary.to_pylist()
    except pa.ArrowException:
        raise InputFileError(f"column 'op' holds {chunk.type}, not the names of MPI calls", where,
                             todo=f"Known ops: {', '.join(OPS)}") from None
    remap = np.array([OPS.index(w) if w in OPS else -1 for w in words] or [0], np.int8)
    codes = remap[_numpy(chunk.indices)]
    if len(codes) and codes.min() < 0:
        i = int(np.argmax(codes < 0))
        row = first_row + i
        raise InputFileError(f"unknown op '{words[chunk.indices[i].as_py()]}' at task "
                             f"{table.column('task')[row].as_py()} seq {table.column('seq')[row].as_py()}", where,
                             todo=f"Known ops: {', '.join(OPS)}")
    return codes


def _numpy(chunk) -> np.ndarray:
    """A numpy view of an Arrow array of numbers without nulls, from its data buffer: Arrow's own ``to_numpy``
    imports pandas (over 0.2 s) the first time it runs. Other arrays (booleans, nulls) go through it."""
    import pyarrow as pa

    t = chunk.type
    if chunk.null_count or not (pa.types.is_integer(t) or pa.types.is_floating(t)):
        return chunk.to_numpy(zero_copy_only=False)
    dtype = np.dtype(t.to_pandas_dtype())
    return np.frombuffer(chunk.buffers()[1], dtype=dtype, count=len(chunk), offset=chunk.offset * dtype.itemsize)


def _fill_ints(dst: np.ndarray, chunk, name: str, where: str) -> None:
    """``dst`` = the chunk's values when each is exactly an integer of dst's type; a missing value is
    FILL_VALUES[name] (an error for task, seq and the times)."""
    import pyarrow as pa

    t = chunk.type
    if not (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t)):
        raise _not_integers(name, dst.dtype, where)
    missing = chunk.is_null().to_numpy(zero_copy_only=False) if chunk.null_count else None
    vals = _numpy(chunk.fill_null(False if pa.types.is_boolean(t) else 0)) if missing is not None else _numpy(chunk)
    if vals.dtype.kind == "f":
        nan = np.isnan(vals)
        missing = nan if missing is None else missing | nan
        vals = np.where(nan, 0.0, vals)
    if missing is not None and missing.any() and name not in FILL_VALUES:
        raise InputFileError(f"column '{name}' has missing values", where, todo="The trace is damaged")
    dst[:] = _exact(vals, name, dst.dtype, where)
    if missing is not None:
        dst[missing] = FILL_VALUES.get(name, 0)


def _exact(vals: np.ndarray, name: str, dtype: np.dtype, where: str) -> np.ndarray:
    """``vals`` when already ``dtype``; else their cast when every value is an integer in its range (an int64
    task 2**32 is not task 0, 1.5 is no size)."""
    if vals.dtype == dtype:
        return vals
    info = np.iinfo(dtype)
    if vals.dtype.kind == "f":  # [min, -min): the bounds exactly representable as doubles
        ok = (vals >= float(info.min)) & (vals < -float(info.min)) & (vals == np.floor(vals))
    else:
        ok = (vals >= info.min) & (vals <= info.max)
    if not np.all(ok):
        raise _not_integers(name, dtype, where)
    return vals.astype(dtype)


def _not_integers(name: str, dtype, where: str) -> InputFileError:
    return InputFileError(f"column '{name}' holds values that are not {np.dtype(dtype).name} integers", where,
                          todo="The trace is damaged or was not written by hpcvar")


def events_frame(cols: dict[str, np.ndarray]) -> pd.DataFrame:
    """The events DataFrame over numpy columns (NUMPY_TYPES; ``op`` as codes into OPS) without a copy: one
    block per column, ``op`` a categorical over OPS (one byte per row)."""
    import pandas as pd

    data: dict = {c: cols[c] for c in (*COLUMNS, *OPTIONAL_COLUMNS) if c in cols}
    data["op"] = pd.Categorical.from_codes(cols["op"], categories=OPS, validate=False)
    return pd.DataFrame(data, copy=False)


def events_from_arrow(table, where: str) -> pd.DataFrame:
    """The events DataFrame of an Arrow table with the native columns (the conversions of read_parquet)."""
    _check_columns(table.column_names, where)
    types = {**NUMPY_TYPES, **{c: t for c, t in OPTIONAL_NUMPY_TYPES.items() if c in table.column_names}}
    cols = {c: np.empty(table.num_rows, t) for c, t in types.items()}
    _fill_columns(cols, 0, table, where)
    return events_frame(cols)


# ---- the tracer's per-rank raw files (native/trace/hv_trace.c) ----

def _raw_header(data: bytes, path: Path) -> tuple[dict[str, str], int]:
    """The 'key=value' lines between 'HVTRACE 1' (or 2) and 'end', and the offset after them; ``head["version"]``
    is the version of the first line."""
    head: dict[str, str] = {}
    pos, line_no, version = 0, 0, 1
    while True:
        nl = data.find(b"\n", pos)
        if nl < 0:
            raise InputFileError("the header has no 'end' line: the file is truncated", str(path), line_no + 1,
                                 todo="Re-run the traced application to its MPI_Finalize")
        line = data[pos:nl].decode("ascii", "replace")
        pos, line_no = nl + 1, line_no + 1
        if line_no == 1:
            if line not in ("HVTRACE 1", "HVTRACE 2"):
                raise InputFileError(f"not an hpcvar raw trace (first line '{line[:40]}')", str(path), 1,
                                     todo="Give the directory the tracer wrote (HV_TRACE_DIR)")
            version = int(line.split()[1])
            continue
        if line == "end":
            head["version"] = str(version)
            return head, pos
        k, _, v = line.partition("=")
        head[k] = v


def read_raw_rank(path: Path) -> tuple[dict, np.ndarray, dict[int, list[int]]]:
    """(header, records, {local comm id: world ranks}) of one rank.<r>.hvt file (HVTRACE 1 or 2: the records
    are RAW_RECORDS[version], ``head["version"]`` the version); ``rank`` and ``size`` of the header are checked
    integers (``head["rank"]``, ``head["size"]`` stay strings)."""
    try:
        data = path.read_bytes()
    except OSError as e:
        raise InputFileError(f"cannot read the raw trace: {e.strerror}", str(path)) from None
    head, pos = _raw_header(data, path)
    dtype = RAW_RECORDS[int(head["version"])]
    try:
        n = int(head.get("records", "-1"))
        nbytes = int(head.get("record_bytes", dtype.itemsize))
        size = int(head.get("size", ""))
        rank = int(head.get("rank", ""))
    except ValueError:
        n = nbytes = size = rank = -1
    if nbytes != dtype.itemsize or n < 0 or not 1 <= size <= MAX_TASKS or not 0 <= rank < size:
        raise InputFileError("unexpected rank, size, record size or record count in the header "
                             f"(rank={head.get('rank', '')[:20]} size={head.get('size', '')[:20]} "
                             f"records={head.get('records', '')[:20]} "
                             f"record_bytes={head.get('record_bytes', '')[:20]})",
                             str(path), todo="Use the hpcvar whose tracer wrote the file")
    need = n * dtype.itemsize
    if len(data) - pos < need:
        raise InputFileError(f"the file is truncated: {n} records announced, "
                             f"{(len(data) - pos) // dtype.itemsize} present", str(path),
                             todo="Re-run the traced application (was the disk full or the job killed?)")
    rec = np.frombuffer(data, dtype=dtype, count=n, offset=pos)
    comms = {}
    for j, ln in enumerate(data[pos + need:].decode("ascii", "replace").splitlines(), 1):
        parts = ln.split()
        if len(parts) >= 3 and parts[0] == "comm":
            try:
                members = [int(x) for x in parts[3:]]
                if int(parts[2]) != len(members) or not all(0 <= m < size for m in members):
                    raise ValueError
                comms[int(parts[1])] = members
            except ValueError:
                # after the binary records: counted among the text lines that follow them
                raise InputFileError(f"communicator line {j} after the records '{ln[:60]}' is not 'comm ID N' and "
                                     f"N ranks in 0..{size - 1}", str(path), todo="The trace file is damaged") \
                    from None
    return head, rec, comms


def _raw_frame(rec: np.ndarray, where: Path) -> pd.DataFrame:
    """One rank's records as rows: the native columns, and from HVTRACE 2 records poll_ns and cpu_ns (the thread's
    CPU time between the previous call's exit and this call's entry, less the polls' CPU time: the computation's
    CPU time; -1 where the CPU clock was not read). Rows of one call (a Waitall's requests) share their times: the
    gap is taken from the latest exit so far, as the replay takes the wall-clock gap."""
    import pandas as pd

    df = pd.DataFrame({c: rec[c] for c in RAW_RECORD_V1.names or ()})
    if "cpu_start_ns" not in (rec.dtype.names or ()):
        return df
    poll = rec["poll_ns"]
    if len(poll) and (poll.min() < 0 or poll.max() > MAX_NS):
        raise InputFileError("a poll time outside 0..MAX_NS", str(where), todo="The trace file is damaged")
    df["poll_ns"] = poll
    c0, c1 = rec["cpu_start_ns"], rec["cpu_end_ns"]
    cpu = np.full(len(rec), -1, np.int64)
    if len(rec) and c0.min() >= 0 and c1.min() >= 0:
        reach = np.maximum.accumulate(c1)
        cpu[1:] = np.maximum(c0[1:] - reach[:-1] - rec["poll_cpu_ns"][1:], 0)
        cpu[0] = 0
    df["cpu_ns"] = cpu
    return df


def _rank_rows(f: Path, rec: np.ndarray, head: dict, local: dict[int, list[int]],
               members_to_id: dict[tuple[int, ...], int], comms: dict[int, list[int]]) -> pd.DataFrame:
    """One rank's rows, its communicators given global ids by their members (``members_to_id`` and ``comms``
    grow)."""
    world = tuple(range(int(head["size"])))
    members_to_id.setdefault(world, 0)
    comms[0] = list(world)
    remap = {}
    for lid, mem in local.items():
        key = tuple(mem)
        if key not in members_to_id:
            members_to_id[key] = len(members_to_id)
            comms[members_to_id[key]] = list(mem)
        remap[lid] = members_to_id[key]
    df = _raw_frame(rec, f)
    codes = df["op"].to_numpy()
    if len(codes) and (codes.min() < 0 or codes.max() >= len(OPS)):
        raise InputFileError(f"unknown op code {int(codes.max())}", str(f), todo="Use the matching hpcvar")
    df["op"] = np.array(OPS, dtype=object)[codes]
    df["comm"] = df["comm"].map(remap).fillna(0).astype("int32")
    df["task"] = int(head["rank"])
    df["seq"] = np.arange(len(df))
    return df


def _check_ranks(heads: list[dict], size: int, nfiles: int, directory: Path) -> None:
    ranks = sorted(int(h["rank"]) for h in heads)
    dup = [r for r, s in zip(ranks, ranks[1:], strict=False) if r == s]
    if dup:
        raise InputFileError(f"two files hold rank {dup[0]}", str(directory),
                             todo="Trace again into an empty directory")
    if ranks != list(range(size)):
        missing = sorted(set(range(size)) - set(ranks))
        raise InputFileError(f"trace files of ranks {missing} are missing ({nfiles} of {size})", str(directory),
                             todo="Did some ranks die before MPI_Finalize? Re-run the application")


# the CPU clocks of the tracer (hpcvar trace --cpu-clock): the thread's CPU clock, or its user-mode time
CPU_CLOCKS = ("thread", "user")


def _merged_meta(heads: list[dict], npolls: dict[int, int], size: int) -> dict:
    """The trace's metadata from the ranks' headers: the clock and its costs, the end reasons, with --cpu-time the
    CPU clock's cost, and the polls per task when there were any."""
    meta = {"clock": heads[0].get("clock"), "clock_cost_tsc_ns": float(heads[0].get("clock_cost_tsc_ns", 0)),
            "clock_cost_mono_ns": float(heads[0].get("clock_cost_mono_ns", 0)),
            "end_reasons": sorted({h.get("end_reason", "") for h in heads})}
    clock = next((h["cpu"] for h in heads if h.get("cpu") in CPU_CLOCKS), None)
    if clock:
        meta.update(cpu=clock, clock_cost_cpu_ns=float(heads[0].get("clock_cost_cpu_ns", 0)))
    if any(npolls.values()):
        meta["polls"] = [int(npolls.get(r, 0)) for r in range(size)]
    return meta


def merge_raw(directory: str | Path, source: str = "") -> Trace:
    """Merge rank.<r>.hvt files into one Trace; communicators get global ids by their members."""
    directory = Path(directory)
    files = sorted(directory.glob("rank.*.hvt"), key=lambda p: [int(x) for x in re.findall(r"\d+", p.name)[:1]])
    if not files:
        raise InputFileError("no rank.<r>.hvt files: the application wrote no trace", str(directory),
                             todo="Check that LD_PRELOAD reached the ranks (see docs/replay.md) and that "
                                  "the application calls MPI_Finalize")
    import pandas as pd

    frames: list = []
    npolls: dict[int, int] = {}
    members_to_id: dict[tuple[int, ...], int] = {}
    comms: dict[int, list[int]] = {}
    size, heads = 0, []  # files is not empty: set from the first header
    for f in files:
        head, rec, local = read_raw_rank(f)
        heads.append(head)
        if size and int(head["size"]) != size:
            raise InputFileError(f"the header says {head['size']} ranks, rank.{heads[0]['rank']}.hvt says {size}",
                                 str(f), todo="The files come from different runs: trace again")
        size = int(head["size"])
        if "npoll" in (rec.dtype.names or ()):
            npolls[int(head["rank"])] = int(rec["npoll"].sum())
        frames.append(_rank_rows(f, rec, head, local, members_to_id, comms))
    _check_ranks(heads, size, len(files), directory)
    ev = make_events(pd.concat(frames, ignore_index=True))
    t0 = int(ev["t_start_ns"].min()) if len(ev) else 0
    if len(ev) and max(int(ev["t_end_ns"].max()), int(ev["t_start_ns"].max())) - t0 > MAX_NS:
        raise InputFileError(f"the calls span more than {MAX_NS} ns: a damaged time stamp", str(directory),
                             todo="Trace the application again")
    ev["t_start_ns"] -= t0
    ev["t_end_ns"] -= t0
    if "cpu_ns" in ev.columns and (ev["cpu_ns"] < 0).all():  # the CPU clock was not read (no --cpu-time)
        ev = ev.drop(columns="cpu_ns")
    trace = Trace(events=ev, ntasks=size, comms=comms, timed=True, source=source,
                  meta=_merged_meta(heads, npolls, size))
    validate(trace, str(directory))
    return trace


__all__ = ["COLLECTIVE_OPS", "COLUMNS", "MAX_BYTES", "MAX_NS", "MAX_TASKS", "NUMPY_TYPES", "OPS", "OPTIONAL_ABSENT",
           "OPTIONAL_COLUMNS", "P2P_OPS", "RAW_RECORD", "RAW_RECORDS", "RAW_RECORD_V1", "READ_VERSIONS",
           "TRACE_VERSION", "Trace", "events_frame", "events_from_arrow", "in_task_seq_order", "make_events",
           "merge_raw", "optional_columns", "read_parquet", "read_raw_rank", "validate", "write_parquet"]
