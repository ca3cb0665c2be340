"""Import of OTF2 archives (Score-P) through the optional ``otf2`` package (``pip install 'hpcvar[otf2]'``).

Reading: every location group of type process is a task (in definition order). An MPI call is the span
between the Enter and Leave of a region named ``MPI_*``; the MPI records inside it say what it did:
MpiSend / MpiRecv (send, recv; inside MPI_Sendrecv: the two halves), MpiIsend (isend), MpiIrecvRequest
(irecv; peer, tag and bytes filled in from the MpiIrecv that completes it), MpiIsendComplete / MpiIrecv
(one ``wait`` row per completed request, with ``req`` = the seq of its isend/irecv), MpiCollectiveEnd
(the collective; bytes = max(size_sent, size_received), the root translated to a world rank). Peers are
translated from communicator ranks to task numbers through the communicator's group. Timestamps are
converted with the archive's timer resolution.
"""

from __future__ import annotations

from pathlib import Path

from hpcvar.errors import InputFileError, MissingToolError
from hpcvar.traces.native import Trace, make_events, validate

_COLL = {"BARRIER": "barrier", "BCAST": "bcast", "REDUCE": "reduce", "ALLREDUCE": "allreduce", "GATHER": "gather",
         "GATHERV": "gatherv", "SCATTER": "scatter", "SCATTERV": "scatterv", "ALLGATHER": "allgather",
         "ALLGATHERV": "allgatherv", "ALLTOALL": "alltoall", "ALLTOALLV": "alltoallv"}


def read_otf2(path: str | Path, engine: str | None = None) -> Trace:
    try:
        import otf2.reader
    except ImportError:
        raise MissingToolError("reading OTF2 needs the 'otf2' package", str(path),
                               "pip install 'hpcvar[otf2]'") from None
    path = Path(path)
    if not path.is_file():
        raise InputFileError("no such OTF2 anchor file", str(path), todo="Give the archive's .otf2 file")
    try:
        reader_cm = otf2.reader.open(str(path))
    except Exception as e:  # the otf2 bindings raise their own error types
        raise InputFileError(f"cannot open the OTF2 archive ({e})", str(path),
                             todo="Check the archive is complete (traces.otf2 and its directory)") from None
    from _otf2.ErrorCodes import Error as Otf2Error

    try:
        with reader_cm as tr:
            defs = tr.definitions
            groups = [g for g in defs.location_groups
                      if "PROCESS" in str(getattr(g, "location_group_type", "PROCESS"))]
            rank_of_group = {id(g): i for i, g in enumerate(groups)}
            rank_of_loc = {}
            for loc in defs.locations:
                r = rank_of_group.get(id(loc.group))
                if r is not None:
                    rank_of_loc[id(loc)] = r
            ntasks = len(groups)
            res = defs.clock_properties.timer_resolution if defs.clock_properties else 1e9
            if not res > 0:
                raise InputFileError(f"the archive's timer resolution is {res}", str(path),
                                     todo="The archive is damaged: trace the run again")
            off = defs.clock_properties.global_offset if defs.clock_properties else 0
            comm_locs = _comm_locations(defs, rank_of_loc)

            def world(comm, r):
                if r is None or r < 0 or comm is None:
                    return -1
                mem = getattr(getattr(comm, "group", None), "members", None)
                if not mem:
                    return r
                m = mem[r] if r < len(mem) else None
                if m is None:
                    return -1
                if isinstance(m, int):
                    return comm_locs[m] if m < len(comm_locs) else m
                return rank_of_loc.get(id(m), -1)

            rows: dict[int, list[dict]] = {r: [] for r in range(ntasks)}
            open_call: dict[int, dict] = {}
            pending: dict[tuple[int, int], int] = {}
            for loc, ev in tr.events:
                r = rank_of_loc.get(id(loc))
                if r is None:
                    continue
                ns = int((ev.time - off) * 1e9 / res)
                name = type(ev).__name__
                if name == "Enter" and ev.region.name.startswith("MPI_"):
                    open_call[r] = {"region": ev.region.name, "t": ns, "rows": []}
                    continue
                cur = open_call.get(r)
                if name == "Leave" and cur is not None and ev.region.name == cur["region"]:
                    rl = rows[r]
                    if cur["region"] in ("MPI_Init", "MPI_Init_thread") and not rl:
                        rl.append(dict(op="init", t_start_ns=ns, t_end_ns=ns))
                    for row in cur["rows"]:
                        row["t_start_ns"], row["t_end_ns"] = cur["t"], ns
                        if "_irecv_key" in row:
                            pending[row.pop("_irecv_key")] = len(rl)
                        rl.append(row)
                    if cur["region"] == "MPI_Finalize":
                        rl.append(dict(op="finalize", t_start_ns=cur["t"], t_end_ns=cur["t"]))
                    del open_call[r]
                    continue
                if cur is None:
                    continue
                reg = cur["region"]
                if name == "MpiSend":
                    op: str | None = "sendrecv" if reg == "MPI_Sendrecv" else "send"
                    cur["rows"].append(dict(op=op, peer=world(ev.communicator, ev.receiver), bytes=ev.msg_length,
                                            tag=ev.msg_tag))
                elif name == "MpiRecv":
                    op = "sendrecv_recv" if reg == "MPI_Sendrecv" else "recv"
                    cur["rows"].append(dict(op=op, peer=world(ev.communicator, ev.sender), bytes=ev.msg_length,
                                            tag=ev.msg_tag))
                elif name == "MpiIsend":
                    cur["rows"].append(dict(op="isend", peer=world(ev.communicator, ev.receiver), bytes=ev.msg_length,
                                            tag=ev.msg_tag, _irecv_key=(r, ev.request_id)))
                elif name == "MpiIrecvRequest":
                    cur["rows"].append(dict(op="irecv", _irecv_key=(r, ev.request_id)))
                elif name in ("MpiIsendComplete", "MpiIrecv"):
                    seq = pending.pop((r, ev.request_id), None)
                    if seq is None:
                        continue
                    src = rows[r][seq]
                    if name == "MpiIrecv":
                        src.update(peer=world(ev.communicator, ev.sender), bytes=ev.msg_length, tag=ev.msg_tag)
                    cur["rows"].append(dict(op="wait", peer=src.get("peer", -1), bytes=src.get("bytes", 0),
                                            tag=src.get("tag", 0), req=seq))
                elif name == "MpiCollectiveEnd":
                    op = _COLL.get(str(ev.collective_op).rsplit(".", 1)[-1].upper())
                    if op is None:
                        continue
                    root = ev.root if op in ("bcast", "reduce", "gather", "gatherv", "scatter", "scatterv") else -1
                    cur["rows"].append(dict(op=op, peer=world(ev.communicator, root) if root is not None and
                                            root >= 0 else -1, bytes=max(ev.size_sent, ev.size_received)))
    except Otf2Error as e:  # the C library found the archive damaged while reading it
        raise InputFileError(f"cannot read the OTF2 archive ({str(e)[:200]})", str(path),
                             todo="The archive is damaged or incomplete: trace the run again") from None
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
        for i, row in enumerate(rl):
            row.update(task=r, seq=i)
            row.setdefault("peer", -1)
            flat.append(row)
    if not flat:
        raise InputFileError("the OTF2 archive has no MPI process", str(path), todo="Trace an MPI run with Score-P")
    ev = make_events(flat)
    t0 = int(ev["t_start_ns"].min())
    ev["t_start_ns"] -= t0
    ev["t_end_ns"] -= t0
    trace = Trace(events=ev, ntasks=ntasks, timed=True, source=str(path), meta={"imported_from": "otf2"})
    validate(trace, str(path))
    return trace


def _comm_locations(defs, rank_of_loc) -> list[int]:
    """Ranks of the members of the MPI 'comm locations' group (Score-P's world), in order."""
    for g in defs.groups:
        if "COMM_LOCATIONS" in str(getattr(g, "group_type", "")):
            return [rank_of_loc.get(id(m), -1) if not isinstance(m, int) else m for m in g.members]
    return []


__all__ = ["read_otf2"]
