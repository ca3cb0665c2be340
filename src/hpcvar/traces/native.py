"""The native event trace: one Parquet file, one row per traced MPI call.

Format (docs/formats.md, "Event traces"), version TRACE_VERSION:

    task int32, seq int64, op string, peer int32, bytes int64, tag int32, comm int32,
    t_start_ns int64, t_end_ns int64, req int64

``seq`` numbers a task's rows from 0; ``peer`` is a rank of MPI_COMM_WORLD
(the root for rooted collectives, -1 where none); ``req`` is, on a ``wait``
row, the seq of the isend/irecv it completes (-1 elsewhere). Compute time is
the gap between a row's t_start_ns and the previous row's t_end_ns. The
Parquet schema metadata key ``hpcvar.trace`` holds JSON: format, version,
ntasks, comms ({id: [world ranks]}), timed (false for time-independent
imports), source.

Version history:
  1 (0.1.0): first version.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from hpcvar.errors import InputFileError

TRACE_VERSION = 1
META_KEY = b"hpcvar.trace"

# op codes of native/trace/hv_trace.c, in the same order
OPS = ["init", "finalize", "send", "recv", "isend", "irecv", "sendrecv", "sendrecv_recv", "wait", "barrier",
       "bcast", "reduce", "allreduce", "gather", "gatherv", "scatter", "scatterv", "allgather", "allgatherv",
       "alltoall", "alltoallv"]
P2P_OPS = {"send", "recv", "isend", "irecv", "sendrecv", "sendrecv_recv", "wait"}
COLLECTIVE_OPS = set(OPS[9:])
COLUMNS = {"task": "int32", "seq": "int64", "op": "object", "peer": "int32", "bytes": "int64", "tag": "int32",
           "comm": "int32", "t_start_ns": "int64", "t_end_ns": "int64", "req": "int64"}

# Bounds of an imported or recorded trace: task numbers index per-task arrays (10**22 tasks is damage, not an
# application), times and sizes are int64 columns whose sums must not wrap.
MAX_TASKS = 1 << 24
MAX_NS = 10**17  # units.MAX_TIME_S in ns
MAX_BYTES = 1 << 62

RAW_RECORD = np.dtype([("t_start_ns", "<i8"), ("t_end_ns", "<i8"), ("bytes", "<i8"), ("req", "<i8"),
                       ("op", "<i4"), ("peer", "<i4"), ("tag", "<i4"), ("comm", "<i4")])


@dataclass
class Trace:
    """An event trace in memory: the rows (a DataFrame with COLUMNS) and its communicators."""

    events: pd.DataFrame
    ntasks: int
    comms: dict[int, list[int]] = field(default_factory=dict)
    timed: bool = True
    source: str = ""
    meta: dict = field(default_factory=dict)

    def __post_init__(self):
        if 0 not in self.comms:
            self.comms[0] = list(range(self.ntasks))

    def task_rows(self, task: int) -> pd.DataFrame:
        return self.events[self.events["task"] == task]


def make_events(rows: list[dict] | pd.DataFrame) -> pd.DataFrame:
    """A DataFrame with the native columns (defaults: peer -1, bytes 0, tag 0, comm 0, req -1)."""
    df = pd.DataFrame(rows).copy()
    defaults = {"peer": -1, "bytes": 0, "tag": 0, "comm": 0, "req": -1, "t_start_ns": 0, "t_end_ns": 0}
    for c, v in defaults.items():
        if c not in df.columns:
            df[c] = v
        else:
            df[c] = df[c].fillna(v)
    if "seq" not in df.columns:
        df["seq"] = df.groupby("task").cumcount()
    df = df[list(COLUMNS)]
    return df.astype({c: t for c, t in COLUMNS.items() if t != "object"}).reset_index(drop=True)


def validate(trace: Trace, where: str) -> None:
    """Raise InputFileError on unknown ops, bad task numbers or non-contiguous seq."""
    ev = trace.events
    missing = [c for c in COLUMNS if c not in ev.columns]
    if missing:
        raise InputFileError(f"the trace lacks columns {missing}", where, todo="Write it with hpcvar trace")
    op = ev["op"]
    if isinstance(op.dtype, pd.CategoricalDtype) and set(op.cat.categories) <= set(OPS):
        bad = op.cat.codes.to_numpy() < 0  # a categorical over known ops: only missing values can be bad
    else:
        bad = ~op.isin(OPS).to_numpy()
    if bad.any():
        r = ev[bad].iloc[0]
        raise InputFileError(f"unknown op '{r['op']}' at task {r['task']} seq {r['seq']}", where,
                             todo=f"Known ops: {', '.join(OPS)}")
    if len(ev) and (ev["task"].min() < 0 or ev["task"].max() >= trace.ntasks):
        raise InputFileError(f"task numbers must be in 0..{trace.ntasks - 1}", where,
                             todo="Fix 'ntasks' in the metadata or the task column")
    _check_values(ev, trace.ntasks, where)
    task = ev["task"].to_numpy()
    seq = ev["seq"].to_numpy()
    if not len(task):
        return
    order = None if bool(np.all(task[1:] >= task[:-1])) else np.argsort(task, kind="stable")
    if order is not None:
        task, seq = task[order], seq[order]
    first = np.concatenate(([True], task[1:] != task[:-1]))
    ok = np.where(first, seq == 0, np.concatenate(([True], seq[1:] - seq[:-1] == 1)))
    bad = np.flatnonzero(~ok)
    if len(bad):
        i = int(bad[0])
        t = int(task[i])
        starts = np.flatnonzero(first)
        expect = np.arange(len(task)) - np.repeat(starts, np.diff(np.append(starts, len(task))))
        raise InputFileError(f"task {t}: seq is not 0,1,2,... (row {int(expect[i])} has seq {int(seq[i])}); the "
                             "trace is truncated or was reordered", where, todo="Re-record or re-merge the trace")


def _check_values(ev: pd.DataFrame, ntasks: int, where: str) -> None:
    """Refuse values no MPI call has: a peer outside -1..ntasks-1, a negative or absurd size, a time outside
    0..MAX_NS or a call ending before it starts (damage, or a tracer and reader that disagree)."""
    if not len(ev):
        return
    t0, t1 = ev["t_start_ns"].to_numpy(), ev["t_end_ns"].to_numpy()
    checks = [(ev["peer"].to_numpy(), lambda a: (a < -1) | (a >= ntasks), f"peer outside -1..{ntasks - 1}"),
              (ev["bytes"].to_numpy(), lambda a: (a < 0) | (a > MAX_BYTES), f"size outside 0..{MAX_BYTES}"),
              (t0, lambda a: (a < 0) | (a > MAX_NS), f"start time outside 0..{MAX_NS} ns"),
              (t1, lambda a: (a < t0) | (a > MAX_NS), f"end before its start or beyond {MAX_NS} ns")]
    for col, bad_of, what in checks:
        bad = np.flatnonzero(bad_of(col))
        if len(bad):
            r = ev.iloc[int(bad[0])]
            raise InputFileError(f"{what} at task {r['task']} seq {r['seq']} ({r['op']}: peer {r['peer']}, "
                                 f"bytes {r['bytes']}, t {r['t_start_ns']}..{r['t_end_ns']})", where,
                                 todo="The trace is damaged: record or import it again")


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
    table = pa.Table.from_pandas(ev[list(COLUMNS)], preserve_index=False)
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
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = Path(path)
    if not path.is_file():
        raise InputFileError("no such trace file", str(path), todo="Give a trace written by 'hpcvar trace run'")
    try:
        table = pq.read_table(path, read_dictionary=["op"])
    except (pa.ArrowInvalid, OSError) as e:
        raise InputFileError(f"cannot read the trace as Parquet ({e}); it may be truncated", str(path),
                             todo="Re-record it with 'hpcvar trace run', or import it with 'hpcvar trace import'") \
            from None
    raw = (table.schema.metadata or {}).get(META_KEY)
    if raw is None:
        raise InputFileError("the Parquet file has no 'hpcvar.trace' metadata: not an hpcvar event trace",
                             str(path), todo="Write it with 'hpcvar trace run' or 'hpcvar trace import'")
    meta = _trace_meta(raw, str(path))
    if meta.get("version") != TRACE_VERSION:
        raise InputFileError(f"trace version {meta.get('version')!r} is not the version this hpcvar reads "
                             f"({TRACE_VERSION})", str(path), todo="Convert it with the hpcvar that wrote it")
    trace = Trace(events=events_from_arrow(table, str(path)), ntasks=meta["ntasks"], comms=meta["comms"],
                  timed=bool(meta.get("timed", True)), source=str(meta.get("source", "")),
                  meta={k: v for k, v in meta.items() if k not in ("comms", "ntasks", "timed", "source")})
    validate(trace, str(path))
    return trace


def events_from_arrow(table, where: str) -> pd.DataFrame:
    """The events DataFrame from an Arrow table without a per-row step: one pandas block per column
    (``split_blocks``, no consolidation copy) while Arrow frees what it converted (``self_destruct``: the
    table is unusable afterwards), numeric columns in the COLUMNS types, ``op`` as a categorical over OPS
    (one byte per row instead of a Python string)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    missing = [c for c in COLUMNS if c not in table.column_names]
    if missing:
        raise InputFileError(f"the trace lacks columns {missing}", where, todo="Write it with hpcvar trace")
    table = table.select(list(COLUMNS))
    op = table.column("op")
    if not pa.types.is_dictionary(op.type):
        op = pc.dictionary_encode(op)
    op = op.unify_dictionaries() if isinstance(op, pa.ChunkedArray) else pa.chunked_array([op])
    words = op.chunk(0).dictionary.to_pylist() if op.num_chunks else []
    unknown = [w for w in words if w not in OPS]
    if unknown:
        bad = pc.is_in(pc.cast(op, pa.string()), pa.array(unknown, pa.string()))
        first = int(np.flatnonzero(bad.to_numpy(zero_copy_only=False))[0])
        raise InputFileError(f"unknown op '{op[first].as_py()}' at task {table.column('task')[first].as_py()} seq "
                             f"{table.column('seq')[first].as_py()}", where, todo=f"Known ops: {', '.join(OPS)}")
    remap = np.array([OPS.index(w) for w in words] or [0], np.int8)
    codes = np.concatenate([remap[c.indices.to_numpy(zero_copy_only=False)] for c in op.chunks]) if op.num_chunks \
        else np.zeros(0, np.int8)
    del op
    table = table.drop_columns(["op"])
    for name in ("peer", "req"):
        if table.column(name).null_count:
            table = table.set_column(table.column_names.index(name), name, pc.fill_null(table.column(name), -1))
    df = table.to_pandas(split_blocks=True, self_destruct=True)
    del table
    df["op"] = pd.Categorical.from_codes(codes, categories=OPS)
    df = df[list(COLUMNS)]
    for name, dtype in COLUMNS.items():
        if name != "op" and df[name].dtype != dtype:
            df[name] = _exact_cast(df[name], name, dtype, where)
    return df


def _exact_cast(col: pd.Series, name: str, dtype: str, where: str) -> pd.Series:
    """``col`` in ``dtype`` when every value fits exactly; a value that would wrap (an int64 task 2**32 is
    not task 0), a fraction or a missing task, seq or time is an InputFileError."""
    if col.isna().any():
        if name in ("task", "seq", "t_start_ns", "t_end_ns"):
            raise InputFileError(f"column '{name}' has missing values", where, todo="The trace is damaged")
        col = col.fillna(0)
    info = np.iinfo(dtype)
    try:
        vals = col.to_numpy(dtype=np.float64) if col.dtype.kind == "f" else col.to_numpy()
        ok = (vals >= info.min) & (vals <= info.max) & (vals == np.floor(vals) if col.dtype.kind == "f" else True)
    except (TypeError, ValueError):
        ok = np.zeros(1, dtype=bool)
    if not np.all(ok):
        raise InputFileError(f"column '{name}' holds values that are not {dtype} integers", where,
                             todo="The trace is damaged or was not written by hpcvar")
    return col.astype(dtype)


# ---- the tracer's per-rank raw files (native/trace/hv_trace.c) ----

def read_raw_rank(path: Path) -> tuple[dict, np.ndarray, dict[int, list[int]]]:
    """(header, records, {local comm id: world ranks}) of one rank.<r>.hvt file; ``rank`` and ``size`` of the
    header are checked integers (``head["rank"]``, ``head["size"]`` stay strings)."""
    try:
        data = path.read_bytes()
    except OSError as e:
        raise InputFileError(f"cannot read the raw trace: {e.strerror}", str(path)) from None
    head: dict[str, str] = {}
    pos, line_no = 0, 0
    while True:
        nl = data.find(b"\n", pos)
        if nl < 0:
            raise InputFileError("the header has no 'end' line: the file is truncated", str(path), line_no + 1,
                                 todo="Re-run the traced application to its MPI_Finalize")
        line = data[pos:nl].decode("ascii", "replace")
        pos, line_no = nl + 1, line_no + 1
        if line_no == 1:
            if line != "HVTRACE 1":
                raise InputFileError(f"not an hpcvar raw trace (first line '{line[:40]}')", str(path), 1,
                                     todo="Give the directory the tracer wrote (HV_TRACE_DIR)")
            continue
        if line == "end":
            break
        k, _, v = line.partition("=")
        head[k] = v
    try:
        n = int(head.get("records", "-1"))
        nbytes = int(head.get("record_bytes", RAW_RECORD.itemsize))
        size = int(head.get("size", ""))
        rank = int(head.get("rank", ""))
    except ValueError:
        n = nbytes = size = rank = -1
    if nbytes != RAW_RECORD.itemsize or n < 0 or not 1 <= size <= MAX_TASKS or not 0 <= rank < size:
        raise InputFileError("unexpected rank, size, record size or record count in the header "
                             f"(rank={head.get('rank', '')[:20]} size={head.get('size', '')[:20]} "
                             f"records={head.get('records', '')[:20]} "
                             f"record_bytes={head.get('record_bytes', '')[:20]})",
                             str(path), todo="Use the hpcvar whose tracer wrote the file")
    need = n * RAW_RECORD.itemsize
    if len(data) - pos < need:
        raise InputFileError(f"the file is truncated: {n} records announced, "
                             f"{(len(data) - pos) // RAW_RECORD.itemsize} present", str(path),
                             todo="Re-run the traced application (was the disk full or the job killed?)")
    rec = np.frombuffer(data, dtype=RAW_RECORD, count=n, offset=pos)
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


def merge_raw(directory: str | Path, source: str = "") -> Trace:
    """Merge rank.<r>.hvt files into one Trace; communicators get global ids by their members."""
    directory = Path(directory)
    files = sorted(directory.glob("rank.*.hvt"), key=lambda p: [int(x) for x in re.findall(r"\d+", p.name)[:1]])
    if not files:
        raise InputFileError("no rank.<r>.hvt files: the application wrote no trace", str(directory),
                             todo="Check that LD_PRELOAD reached the ranks (see docs/replay.md) and that "
                                  "the application calls MPI_Finalize")
    frames: list = []
    members_to_id: dict[tuple[int, ...], int] = {}
    comms: dict[int, list[int]] = {}
    size, heads = 0, []  # files is not empty: set from the first header
    for f in files:
        head, rec, local = read_raw_rank(f)
        heads.append(head)
        rank = int(head["rank"])
        if size and int(head["size"]) != size:
            raise InputFileError(f"the header says {head['size']} ranks, rank.{heads[0]['rank']}.hvt says {size}",
                                 str(f), todo="The files come from different runs: trace again")
        size = int(head["size"])
        world = tuple(range(size))
        members_to_id.setdefault(world, 0)
        comms[0] = list(world)
        remap = {}
        for lid, mem in local.items():
            key = tuple(mem)
            if key not in members_to_id:
                members_to_id[key] = len(members_to_id)
                comms[members_to_id[key]] = list(mem)
            remap[lid] = members_to_id[key]
        df = pd.DataFrame(rec)
        codes = df["op"].to_numpy()
        if len(codes) and (codes.min() < 0 or codes.max() >= len(OPS)):
            raise InputFileError(f"unknown op code {int(codes.max())}", str(f), todo="Use the matching hpcvar")
        df["op"] = np.array(OPS, dtype=object)[codes]
        df["comm"] = df["comm"].map(remap).fillna(0).astype("int32")
        df["task"] = rank
        df["seq"] = np.arange(len(df))
        frames.append(df)
    ranks = sorted(int(h["rank"]) for h in heads)
    dup = [r for r, s in zip(ranks, ranks[1:], strict=False) if r == s]
    if dup:
        raise InputFileError(f"two files hold rank {dup[0]}", str(directory),
                             todo="Trace again into an empty directory")
    if ranks != list(range(size)):
        missing = sorted(set(range(size)) - set(ranks))
        raise InputFileError(f"trace files of ranks {missing} are missing ({len(files)} of {size})", str(directory),
                             todo="Did some ranks die before MPI_Finalize? Re-run the application")
    ev = make_events(pd.concat(frames, ignore_index=True))
    t0 = int(ev["t_start_ns"].min()) if len(ev) else 0
    if len(ev) and max(int(ev["t_end_ns"].max()), int(ev["t_start_ns"].max())) - t0 > MAX_NS:
        raise InputFileError(f"the calls span more than {MAX_NS} ns: a damaged time stamp", str(directory),
                             todo="Trace the application again")
    ev["t_start_ns"] -= t0
    ev["t_end_ns"] -= t0
    meta = {"clock": heads[0].get("clock"), "clock_cost_tsc_ns": float(heads[0].get("clock_cost_tsc_ns", 0)),
            "clock_cost_mono_ns": float(heads[0].get("clock_cost_mono_ns", 0)),
            "end_reasons": sorted({h.get("end_reason", "") for h in heads})}
    trace = Trace(events=ev, ntasks=size, comms=comms, timed=True, source=source, meta=meta)
    validate(trace, str(directory))
    return trace


__all__ = ["COLLECTIVE_OPS", "COLUMNS", "MAX_BYTES", "MAX_NS", "MAX_TASKS", "OPS", "P2P_OPS", "TRACE_VERSION", "Trace",
           "make_events", "merge_raw",
           "events_from_arrow", "read_parquet", "read_raw_rank", "validate", "write_parquet"]
