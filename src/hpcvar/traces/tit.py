"""Import of SimGrid time-independent traces (TIT): ``<rank> <action> <args...>`` per line.

One file with every rank's lines, or an index file whose lines name one file
per rank (SimGrid's layout). Ranks are ``0`` or ``p0``. Sizes are in bytes
(an optional trailing datatype argument is ignored); ``compute FLOPS`` lasts
FLOPS / ``flops_rate`` seconds, ``sleep SECONDS`` lasts SECONDS. Supported
actions: init, finalize, compute, sleep, send/Isend DST SIZE, recv/Irecv SRC SIZE,
wait (completes the most recent pending request, SimGrid's old semantics, or
the one matching ``wait SRC DST TAG``), waitall, barrier, bcast SIZE [ROOT],
reduce SIZE COMP [ROOT], allreduce SIZE COMP, gather SEND RECV [ROOT],
scatter SEND RECV [ROOT], allgather SEND RECV, allToAll SEND RECV,
comm_size N. The trace is time-independent: communication rows get zero
measured duration and the trace is marked ``timed = false`` (no E_abs).
"""

from __future__ import annotations

from pathlib import Path

from hpcvar.errors import InputFileError, read_user_text
from hpcvar.traces.native import Trace, make_events

_P2P = {"send": "send", "isend": "isend", "recv": "recv", "irecv": "irecv"}
_COLL = {"barrier": "barrier", "bcast": "bcast", "reduce": "reduce", "allreduce": "allreduce", "gather": "gather",
         "scatter": "scatter", "allgather": "allgather", "alltoall": "alltoall"}
_IGNORED = {"comm_size", "comm_split", "comm_dup", "test"}


def _rank(tok: str) -> int:
    return int(tok[1:]) if tok.startswith("p") else int(tok)


def read_tit(path: str | Path, flops_rate: float = 1e9) -> Trace:
    path = Path(path)
    if not path.is_file():
        raise InputFileError("no such TIT file", str(path), todo="Give a SimGrid time-independent trace")
    lines: list[tuple[str, int, str]] = []
    text = read_user_text(path).splitlines()
    first = next((ln.split() for ln in text if ln.strip() and not ln.startswith("#")), [])
    if first and len(first) == 1 and not first[0].lstrip("p").isdigit():  # an index of per-rank files
        for entry in text:
            entry = entry.strip()
            if entry and not entry.startswith("#"):
                fp = Path(entry) if Path(entry).is_absolute() else path.parent / entry
                if not fp.is_file():
                    raise InputFileError(f"the index names a missing file '{entry}'", str(path))
                lines.extend((str(fp), i, s) for i, s in enumerate(read_user_text(fp).splitlines(), 1))
    else:
        lines = [(str(path), i, s) for i, s in enumerate(text, 1)]
    rows: dict[int, list[dict]] = {}
    clock: dict[int, int] = {}
    pending: dict[int, list[int]] = {}
    for fname, ln, raw in lines:
        f = raw.split()
        if not f or raw.lstrip().startswith("#"):
            continue
        try:
            r = _rank(f[0])
            act = f[1].lower()
            args = f[2:]
            rl = rows.setdefault(r, [])
            t = clock.setdefault(r, 0)
            seq = len(rl)

            def add(op, peer=-1, nbytes=0, req=-1, dur=0, rl=rl, r=r):  # bound now: called in this iteration
                rl.append(dict(task=r, seq=len(rl), op=op, peer=peer, bytes=nbytes, req=req, t_start_ns=clock[r],
                               t_end_ns=clock[r] + dur))
                clock[r] += dur

            if act in ("init", "finalize"):
                add(act)
            elif act == "compute":
                clock[r] = t + int(round(float(args[0]) / flops_rate * 1e9))
            elif act == "sleep":
                clock[r] = t + int(round(float(args[0]) * 1e9))
            elif act in _P2P:
                add(_P2P[act], peer=_rank(args[0]), nbytes=int(float(args[1])))
                if act in ("isend", "irecv"):
                    pending.setdefault(r, []).append(seq)
            elif act == "wait":
                q = pending.get(r) or []
                if not q:
                    raise ValueError("wait without a pending Isend/Irecv")
                pick = len(q) - 1
                if len(args) >= 2:  # wait SRC DST [TAG]: the pending request between them
                    src, dst = _rank(args[0]), _rank(args[1])
                    cand = [k for k, s in enumerate(q) if (rl[s]["op"] == "isend" and r == src and
                                                           rl[s]["peer"] == dst) or
                            (rl[s]["op"] == "irecv" and r == dst and rl[s]["peer"] == src)]
                    if not cand:
                        raise ValueError(f"no pending request between {src} and {dst}")
                    pick = cand[0]
                s = q.pop(pick)
                add("wait", peer=rl[s]["peer"], nbytes=rl[s]["bytes"], req=s)
            elif act == "waitall":
                for s in pending.pop(r, []):
                    add("wait", peer=rl[s]["peer"], nbytes=rl[s]["bytes"], req=s)
            elif act in _COLL:
                op = _COLL[act]
                nb = int(float(args[0])) if args and op != "barrier" else 0
                root = -1
                if op == "bcast" and len(args) >= 2:
                    root = _rank(args[1])
                elif op in ("reduce", "gather", "scatter") and len(args) >= 3:
                    root = _rank(args[2])
                elif op in ("reduce", "gather", "scatter", "bcast"):
                    root = 0
                if op == "alltoall":
                    nb = int(float(args[0]))  # per-peer send size; scaled to the total below
                add(op, peer=root, nbytes=nb)
            elif act in _IGNORED:
                pass
            else:
                raise InputFileError(f"unknown action '{f[1]}'", fname, ln,
                                     todo="Supported: init finalize compute sleep send Isend recv Irecv wait "
                                          "waitall barrier bcast reduce allreduce gather scatter allgather allToAll")
        except (IndexError, ValueError) as e:
            raise InputFileError(f"cannot read '{raw.strip()}' ({e or 'missing argument'})", fname, ln,
                                 todo="Write '<rank> <action> <args>', e.g. '0 send 1 1024'") from None
    if not rows:
        raise InputFileError("the TIT trace has no action", str(path), todo="Give a non-empty trace")
    ntasks = max(rows) + 1
    flat = [row for r in sorted(rows) for row in rows[r]]
    for row in flat:
        if row["op"] == "alltoall":
            row["bytes"] *= ntasks
    # the compute after a task's last row (no row follows it) is kept as a finalize row
    for r in rows:
        if not rows[r] or rows[r][-1]["op"] != "finalize":
            flat.append(dict(task=r, seq=len(rows[r]), op="finalize", t_start_ns=clock[r], t_end_ns=clock[r]))
    trace = Trace(events=make_events(flat), ntasks=ntasks, timed=False, source=str(path),
                  meta={"imported_from": "simgrid-tit", "flops_rate": flops_rate})
    return trace


__all__ = ["read_tit"]
