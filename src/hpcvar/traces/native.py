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
    meta = json.loads(raw)
    if meta.get("version") != TRACE_VERSION:
        raise InputFileError(f"trace version {meta.get('version')!r} is not the version this hpcvar reads "
                             f"({TRACE_VERSION})", str(path), todo="Convert it with the hpcvar that wrote it")
    trace = Trace(events=events_from_arrow(table, str(path)), ntasks=int(meta["ntasks"]),
                  comms={int(k): [int(x) for x in v] for k, v in meta.get("comms", {}).items()},
                  timed=bool(meta.get("timed", True)), source=meta.get("source", ""),
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
            df[name] = df[name].fillna(0).astype(dtype)
    return df


# ---- the tracer's per-rank raw files (native/trace/hv_trace.c) ----

def read_raw_rank(path: Path) -> tuple[dict, np.ndarray, dict[int, list[int]]]:
    """(header, records, {local comm id: world ranks}) of one rank.<r>.hvt file."""
    data = path.read_bytes()
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
    n = int(head.get("records", "-1"))
    if int(head.get("record_bytes", RAW_RECORD.itemsize)) != RAW_RECORD.itemsize or n < 0:
        raise InputFileError("unexpected record size or count in the header", str(path),
                             todo="Use the hpcvar whose tracer wrote the file")
    need = n * RAW_RECORD.itemsize
    if len(data) - pos < need:
        raise InputFileError(f"the file is truncated: {n} records announced, "
                             f"{(len(data) - pos) // RAW_RECORD.itemsize} present", str(path),
                             todo="Re-run the traced application (was the disk full or the job killed?)")
    rec = np.frombuffer(data, dtype=RAW_RECORD, count=n, offset=pos)
    comms = {}
    for ln in data[pos + need:].decode("ascii", "replace").splitlines():
        parts = ln.split()
        if len(parts) >= 3 and parts[0] == "comm":
            comms[int(parts[1])] = [int(x) for x in parts[3:3 + int(parts[2])]]
    return head, rec, comms


def merge_raw(directory: str | Path, source: str = "") -> Trace:
    """Merge rank.<r>.hvt files into one Trace; communicators get global ids by their members."""
    directory = Path(directory)
    files = sorted(directory.glob("rank.*.hvt"), key=lambda p: int(re.findall(r"\d+", p.name)[0]))
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
    if ranks != list(range(size)):
        missing = sorted(set(range(size)) - set(ranks))
        raise InputFileError(f"trace files of ranks {missing} are missing ({len(files)} of {size})", str(directory),
                             todo="Did some ranks die before MPI_Finalize? Re-run the application")
    ev = make_events(pd.concat(frames, ignore_index=True))
    t0 = int(ev["t_start_ns"].min()) if len(ev) else 0
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
