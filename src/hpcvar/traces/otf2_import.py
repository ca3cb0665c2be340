"""Import of OTF2 archives (Score-P): in C on libotf2 (native/sim/otf2_read.c, built where libotf2 is found)
or through the optional ``otf2`` package (``pip install 'hpcvar[otf2]'``), the reference.

Reading: every location group of type process is a task (in definition order). An MPI call is the span
between the Enter and Leave of a region named ``MPI_*``; the MPI records inside it say what it did:
MpiSend / MpiRecv (send, recv; inside MPI_Sendrecv: the two halves), MpiIsend (isend), MpiIrecvRequest
(irecv; peer, tag and bytes filled in from the MpiIrecv that completes it), MpiIsendComplete / MpiIrecv
(one ``wait`` row per completed request, with ``req`` = the seq of its isend/irecv), MpiCollectiveEnd
(the collective; bytes = max(size_sent, size_received), the root translated to a world rank). Peers are
translated from communicator ranks to task numbers through the communicator's group. Timestamps are
converted with the archive's timer resolution. A task whose first row is not an init gets one (at its
first row's start), one whose last row is not a finalize gets one (at its last row's end); times count
from the earliest row.

``engine`` (``auto``: C when libhv_otf2.so is installed, else the package; ``native``; ``python``; default:
$HPCVAR_IMPORT_ENGINE, else auto) picks the reader; both give the same rows (tests/unit/test_otf2_native.py).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from hpcvar.errors import InputFileError, MissingToolError
from hpcvar.traces import import_engine
from hpcvar.traces.columns import trace_columns
from hpcvar.traces.parquet import OPS, Trace, validate

_COLL = {"BARRIER": "barrier", "BCAST": "bcast", "REDUCE": "reduce", "ALLREDUCE": "allreduce", "GATHER": "gather",
         "GATHERV": "gatherv", "SCATTER": "scatter", "SCATTERV": "scatterv", "ALLGATHER": "allgather",
         "ALLGATHERV": "allgatherv", "ALLTOALL": "alltoall", "ALLTOALLV": "alltoallv"}
_ROOTED = ("bcast", "reduce", "gather", "gatherv", "scatter", "scatterv")
MAX_ABS_NS = 1 << 62  # a time this far from the clock offset is damage (and two of them would not fit int64)
_OPEN_TODO = "Check the archive is complete (traces.otf2 and its directory)"
_READ_TODO = "The archive is damaged or incomplete: trace the run again"


def read_otf2(path: str | Path, engine: str | None = None, prefetch_arrow: bool = True) -> Trace:
    """The trace of an OTF2 archive; ``prefetch_arrow``: as hpcvar.traces.load.load_trace."""
    from hpcvar.traces import otf2_native

    eng = import_engine(engine, otf2_native.available, otf2_native.lib)
    if eng == "python":
        _otf2_package(path)
    path = Path(path)
    if not path.is_file():
        raise InputFileError("no such OTF2 anchor file", str(path), todo="Give the archive's .otf2 file")
    cols, ntasks = _read_native(path, prefetch_arrow) if eng == "native" else _read_python(path)
    trace = Trace(columns=trace_columns(cols), ntasks=ntasks, timed=True, source=str(path),
                  meta={"imported_from": "otf2"})
    validate(trace, str(path))
    return trace


def used_engine(engine: str | None = None) -> str:
    """``native`` or ``python``: the reader read_otf2 uses."""
    from hpcvar.traces import otf2_native

    return import_engine(engine, otf2_native.available, otf2_native.lib)


def _otf2_package(path):
    try:
        import otf2.reader
    except ImportError:
        raise MissingToolError("reading OTF2 needs the 'otf2' package (or hpcvar built with libotf2)", str(path),
                               "pip install 'hpcvar[otf2]', or install libotf2 (Debian: libotf2-trace-dev) and "
                               "reinstall hpcvar (make install)") from None
    return otf2


def _no_process(path: Path) -> InputFileError:
    return InputFileError("the OTF2 archive has no MPI process", str(path), todo="Trace an MPI run with Score-P")


def _bad_resolution(res, path: Path) -> InputFileError:
    return InputFileError(f"the archive's timer resolution is {res}", str(path),
                          todo="The archive is damaged: trace the run again")


def _bad_time(ns: float, path: Path) -> InputFileError:
    return InputFileError(f"a timestamp is {ns:.6g} ns from the clock offset, beyond 2^62", str(path),
                          todo="The archive is damaged: trace the run again")


# ---- the compiled reader ------------------------------------------------------------------------------

def _read_native(path: Path, arrow: bool = True):
    from hpcvar.results.store import prefetch_arrow
    from hpcvar.traces import otf2_native as on

    if arrow:  # what reads a trace stores Arrow next (a run's tables, trace import's Parquet): meanwhile
        prefetch_arrow()
    res = on.read(str(path))
    if res.err == on.E_OPEN:
        raise InputFileError(f"cannot open the OTF2 archive ({res.msg})", str(path), todo=_OPEN_TODO)
    if res.err == on.E_RESOLUTION:
        raise _bad_resolution(res.value, path)
    if res.err == on.E_READ:
        raise InputFileError(f"cannot read the OTF2 archive ({res.msg[:200]})", str(path), todo=_READ_TODO)
    if res.err == on.E_TIME:
        raise InputFileError(res.msg, str(path), todo="The archive is damaged: trace the run again")
    if res.err == on.E_NO_PROCESS:
        raise _no_process(path)
    assert res.cols is not None
    return res.cols, res.ntasks


# ---- the reference (the otf2 package) -----------------------------------------------------------------

def _read_python(path: Path):
    otf2 = _otf2_package(path)
    try:
        reader_cm = otf2.reader.open(str(path))
    except Exception as e:  # the otf2 bindings raise their own error types
        raise InputFileError(f"cannot open the OTF2 archive ({e})", str(path), todo=_OPEN_TODO) from None
    from _otf2.ErrorCodes import Error as Otf2Error

    try:
        with reader_cm as tr:
            ctx = _Context(tr.definitions, path)
            for loc, ev in tr.events:
                ctx.event(loc, ev)
    except Otf2Error as e:  # the C library found the archive damaged while reading it
        raise InputFileError(f"cannot read the OTF2 archive ({str(e)[:200]})", str(path), todo=_READ_TODO) from None
    return _columns(ctx.rows, ctx.ntasks, path), ctx.ntasks


class _Context:
    """The definitions the events need, the rows per task, the open MPI call per task and the pending
    requests ``(task, request id) -> seq``."""

    def __init__(self, defs, path: Path):
        groups = [g for g in defs.location_groups if "PROCESS" in str(getattr(g, "location_group_type", "PROCESS"))]
        rank_of_group = {id(g): i for i, g in enumerate(groups)}
        self.rank_of_loc = {id(loc): rank_of_group[id(loc.group)] for loc in defs.locations
                            if id(loc.group) in rank_of_group}
        self.ntasks = len(groups)
        self.res = defs.clock_properties.timer_resolution if defs.clock_properties else 1e9
        if not self.res > 0:
            raise _bad_resolution(self.res, path)
        self.off = defs.clock_properties.global_offset if defs.clock_properties else 0
        self.comm_locs = _comm_locations(defs, self.rank_of_loc)
        self.rows: dict[int, list[dict]] = {r: [] for r in range(self.ntasks)}
        self.open_call: dict[int, dict] = {}
        self.pending: dict[tuple[int, int], int] = {}

    def world(self, comm, r) -> int:
        """The task of rank ``r`` of ``comm`` (-1: none; a communicator without members: ``r`` itself)."""
        if r is None or r < 0 or comm is None:
            return -1
        mem = getattr(getattr(comm, "group", None), "members", None)
        if not mem:
            return r
        m = mem[r] if r < len(mem) else None
        if m is None:
            return -1
        if isinstance(m, int):
            return self.comm_locs[m] if m < len(self.comm_locs) else m
        return self.rank_of_loc.get(id(m), -1)

    def event(self, loc, ev) -> None:
        r = self.rank_of_loc.get(id(loc))
        if r is None:
            return
        ns = int((ev.time - self.off) * 1e9 / self.res)
        name = type(ev).__name__
        if name == "Enter" and ev.region.name.startswith("MPI_"):
            self.open_call[r] = {"region": ev.region.name, "t": ns, "rows": []}
            return
        cur = self.open_call.get(r)
        if name == "Leave" and cur is not None and ev.region.name == cur["region"]:
            self.leave(r, cur, ns)
        elif cur is not None:
            self.record(r, cur, name, ev)

    def leave(self, r: int, cur: dict, ns: int) -> None:
        """The open call's rows, with its times."""
        rl = self.rows[r]
        if cur["region"] in ("MPI_Init", "MPI_Init_thread") and not rl:
            rl.append(dict(op="init", t_start_ns=ns, t_end_ns=ns))
        for row in cur["rows"]:
            row["t_start_ns"], row["t_end_ns"] = cur["t"], ns
            if "_irecv_key" in row:
                self.pending[row.pop("_irecv_key")] = len(rl)
            rl.append(row)
        if cur["region"] == "MPI_Finalize":
            rl.append(dict(op="finalize", t_start_ns=cur["t"], t_end_ns=cur["t"]))
        del self.open_call[r]

    def record(self, r: int, cur: dict, name: str, ev) -> None:
        """An MPI record inside the open call: a row of the call."""
        reg, out = cur["region"], cur["rows"]
        if name == "MpiSend":
            out.append(dict(op="sendrecv" if reg == "MPI_Sendrecv" else "send",
                            peer=self.world(ev.communicator, ev.receiver), bytes=ev.msg_length, tag=ev.msg_tag))
        elif name == "MpiRecv":
            out.append(dict(op="sendrecv_recv" if reg == "MPI_Sendrecv" else "recv",
                            peer=self.world(ev.communicator, ev.sender), bytes=ev.msg_length, tag=ev.msg_tag))
        elif name == "MpiIsend":
            out.append(dict(op="isend", peer=self.world(ev.communicator, ev.receiver), bytes=ev.msg_length,
                            tag=ev.msg_tag, _irecv_key=(r, ev.request_id)))
        elif name == "MpiIrecvRequest":
            out.append(dict(op="irecv", _irecv_key=(r, ev.request_id)))
        elif name in ("MpiIsendComplete", "MpiIrecv"):
            self.complete(r, out, name, ev)
        elif name == "MpiCollectiveEnd":
            op = _COLL.get(str(ev.collective_op).rsplit(".", 1)[-1].upper())
            if op is not None:
                root = ev.root if op in _ROOTED else -1
                out.append(dict(op=op, peer=self.world(ev.communicator, root) if root is not None and root >= 0
                                else -1, bytes=max(ev.size_sent, ev.size_received)))

    def complete(self, r: int, out: list, name: str, ev) -> None:
        """A completed request: a wait row for its isend/irecv (an irecv gets its peer, size and tag now)."""
        seq = self.pending.pop((r, ev.request_id), None)
        if seq is None:
            return
        src = self.rows[r][seq]
        if name == "MpiIrecv":
            src.update(peer=self.world(ev.communicator, ev.sender), bytes=ev.msg_length, tag=ev.msg_tag)
        out.append(dict(op="wait", peer=src.get("peer", -1), bytes=src.get("bytes", 0), tag=src.get("tag", 0),
                        req=seq))


def _columns(rows: dict[int, list[dict]], ntasks: int, path: Path) -> dict[str, np.ndarray]:
    """The columns: per task an init row first and a finalize row last where missing (the waits' req
    shifted past the added init), times from the earliest row."""
    flat = []
    for r in range(ntasks):
        rl = rows[r]
        if not rl or rl[0]["op"] != "init":
            t = rl[0]["t_start_ns"] if rl else 0
            rl.insert(0, dict(op="init", t_start_ns=t, t_end_ns=t))
            for row in rl:
                if row["op"] == "wait":
                    row["req"] = row.get("req", -1) + 1 if row.get("req", -1) >= 0 else -1
        if rl[-1]["op"] != "finalize":
            rl.append(dict(op="finalize", t_start_ns=rl[-1]["t_end_ns"], t_end_ns=rl[-1]["t_end_ns"]))
        flat += [(r, i, OPS.index(w["op"]), w.get("peer", -1), w.get("bytes", 0), w.get("tag", 0), w.get("req", -1),
                  w["t_start_ns"], w["t_end_ns"]) for i, w in enumerate(rl)]
    if not flat:
        raise _no_process(path)
    bad = [t for row in flat for t in row[7:] if not -MAX_ABS_NS < t < MAX_ABS_NS]
    if bad:
        raise _bad_time(bad[0], path)
    from hpcvar.traces.otf2_native import COLUMNS as NATIVE

    cols = {name: np.array(c, np.int64) for name, c in zip(NATIVE, zip(*flat, strict=True), strict=True)}
    t0 = cols["t_start"].min()
    cols["t_start"] -= t0
    cols["t_end"] -= t0
    return {name: cols[name].astype(dtype) for name, dtype in NATIVE.items()}


def _comm_locations(defs, rank_of_loc) -> list[int]:
    """Ranks of the members of the MPI 'comm locations' group (Score-P's world), in order."""
    for g in defs.groups:
        if "COMM_LOCATIONS" in str(getattr(g, "group_type", "")):
            return [rank_of_loc.get(id(m), -1) if not isinstance(m, int) else m for m in g.members]
    return []


__all__ = ["read_otf2", "used_engine"]
