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

from hpcvar.errors import InputFileError, UsageError, read_user_text
from hpcvar.traces.native import MAX_BYTES, MAX_NS, MAX_TASKS, Trace, make_events
from hpcvar.units import MAX_SIZE

_P2P = {"send": "send", "isend": "isend", "recv": "recv", "irecv": "irecv"}
_COLL = {"barrier": "barrier", "bcast": "bcast", "reduce": "reduce", "allreduce": "allreduce", "gather": "gather",
         "scatter": "scatter", "allgather": "allgather", "alltoall": "alltoall"}
_IGNORED = {"comm_size", "comm_split", "comm_dup", "test"}


def _rank(tok: str) -> int:
    """A rank ``3`` or ``p3`` in 0..MAX_TASKS-1 (ValueError otherwise)."""
    r = int(tok[1:]) if tok.startswith("p") else int(tok)
    if not 0 <= r < MAX_TASKS:
        raise ValueError(f"rank {tok[:30]} is not in 0..{MAX_TASKS - 1}")
    return r


def _size(tok: str) -> int:
    """A message size in bytes (``1024``, ``1e6``): whole, in 0..units.MAX_SIZE (ValueError otherwise)."""
    v = float(tok)
    if not 0 <= v <= MAX_SIZE:  # also nan and inf
        raise ValueError(f"size {tok[:30]} is not in 0..{MAX_SIZE} bytes")
    return int(v)


def _ns(seconds: float, what: str) -> int:
    """A duration in ns from seconds: finite, non-negative, at most MAX_NS (ValueError otherwise)."""
    if not 0 <= seconds * 1e9 <= MAX_NS:  # also nan and inf
        raise ValueError(f"{what} of {seconds:g} s is not in 0..{MAX_NS / 1e9:g} s")
    return int(round(seconds * 1e9))


MAX_FLOPS_RATE = 1e20  # flop/s: beyond any machine (the largest are near 1e18)


def read_tit(path: str | Path, flops_rate: float = 1e9) -> Trace:
    if not 0 < flops_rate <= MAX_FLOPS_RATE:  # also nan and inf; 0 divided every compute by zero
        raise UsageError(f"flop rate {flops_rate} is not in (0, {MAX_FLOPS_RATE:g}] flop/s", "--flops-rate",
                         "Give the flop/s of the machine to replay on, e.g. --flops-rate 1e10")
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
    peer_max: tuple[int, str, int] = (-1, "", 0)  # the highest peer or root named, and where
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

            # bound now: called in this iteration
            def add(op, peer=-1, nbytes=0, req=-1, dur=0, rl=rl, r=r, fname=fname, ln=ln):
                nonlocal peer_max
                rl.append(dict(task=r, seq=len(rl), op=op, peer=peer, bytes=nbytes, req=req, t_start_ns=clock[r],
                               t_end_ns=clock[r] + dur))
                clock[r] += dur
                if peer > peer_max[0]:
                    peer_max = (peer, fname, ln)

            if act in ("init", "finalize"):
                add(act)
            elif act == "compute":
                clock[r] = t + _ns(float(args[0]) / flops_rate, "compute")
            elif act == "sleep":
                clock[r] = t + _ns(float(args[0]), "sleep")
            elif act in _P2P:
                add(_P2P[act], peer=_rank(args[0]), nbytes=_size(args[1]))
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
                nb = _size(args[0]) if args and op != "barrier" else 0
                root = -1
                if op == "bcast" and len(args) >= 2:
                    root = _rank(args[1])
                elif op in ("reduce", "gather", "scatter") and len(args) >= 3:
                    root = _rank(args[2])
                elif op in ("reduce", "gather", "scatter", "bcast"):
                    root = 0
                if op == "alltoall":
                    nb = _size(args[0])  # per-peer send size; scaled to the total below
                add(op, peer=root, nbytes=nb)
            elif act in _IGNORED:
                pass
            else:
                raise InputFileError(f"unknown action '{f[1]}'", fname, ln,
                                     todo="Supported: init finalize compute sleep send Isend recv Irecv wait "
                                          "waitall barrier bcast reduce allreduce gather scatter allgather allToAll")
            if clock[r] > MAX_NS:
                raise ValueError(f"rank {r} runs beyond {MAX_NS / 1e9:g} s")
        except (IndexError, ValueError) as e:
            raise InputFileError(f"cannot read '{raw.strip()}' ({e or 'missing argument'})", fname, ln,
                                 todo="Write '<rank> <action> <args>', e.g. '0 send 1 1024'") from None
    if not rows:
        raise InputFileError("the TIT trace has no action", str(path), todo="Give a non-empty trace")
    ntasks = max(rows) + 1
    if peer_max[0] >= ntasks:
        raise InputFileError(f"rank {peer_max[0]} is named as a peer or root but has no action (ranks 0.."
                             f"{ntasks - 1})", peer_max[1], peer_max[2], todo="Fix the rank or add its actions")
    flat = [row for r in sorted(rows) for row in rows[r]]
    for row in flat:
        if row["op"] == "alltoall":
            row["bytes"] *= ntasks
            if row["bytes"] > MAX_BYTES:
                raise InputFileError(f"an allToAll of {row['bytes'] // ntasks} bytes per peer on {ntasks} ranks "
                                     f"sends beyond {MAX_BYTES} bytes", str(path), todo="Fix the size")
    # the compute after a task's last row (no row follows it) is kept as a finalize row
    for r in rows:
        if not rows[r] or rows[r][-1]["op"] != "finalize":
            flat.append(dict(task=r, seq=len(rows[r]), op="finalize", t_start_ns=clock[r], t_end_ns=clock[r]))
    trace = Trace(events=make_events(flat), ntasks=ntasks, timed=False, source=str(path),
                  meta={"imported_from": "simgrid-tit", "flops_rate": flops_rate})
    return trace


__all__ = ["read_tit"]
