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

Two parsers give the same rows and the same first error: the compiled one (native/sim/tit.c through
``hpcvar.traces.tit_native``, ASCII text) and ``_Parser``, the reference, one line at a time. ``engine``
(``auto``: C when the library is installed and the text is ASCII; ``native``; ``python``; default:
$HPCVAR_IMPORT_ENGINE, else auto) picks one; text with non-ASCII characters (Unicode line breaks,
spaces and digits count as Python counts them) is always read by the reference.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from hpcvar.errors import InputFileError, UsageError, read_user_bytes
from hpcvar.traces import import_engine
from hpcvar.traces.columns import events_frame
from hpcvar.traces.parquet import MAX_BYTES, MAX_NS, MAX_TASKS, OPS, Trace
from hpcvar.units import MAX_SIZE

_P2P = {"send", "isend", "recv", "irecv"}
_COLL = {"barrier", "bcast", "reduce", "allreduce", "gather", "scatter", "allgather", "alltoall"}
_ROOTED = ("reduce", "gather", "scatter", "bcast")
_IGNORED = {"comm_size", "comm_split", "comm_dup", "test"}
_CODE = {op: i for i, op in enumerate(OPS)}
MAX_FLOPS_RATE = 1e20  # flop/s: beyond any machine (the largest are near 1e18)
# the first line that is not blank and does not start with '#' (str.splitlines' and str.strip's ASCII sets)
_FIRST_LINE = re.compile(rb"(?:^|(?<=[\n\r\v\f\x1c-\x1e]))(?!#)[ \t\x1f]*[^ \t\x1f\n\r\v\f\x1c-\x1e]"
                         rb"[^\n\r\v\f\x1c-\x1e]*")


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


# ---- the errors (one wording for both parsers) ---------------------------------------------------------

def _cannot_read(raw: str, e: Exception, fname: str, ln: int) -> InputFileError:
    return InputFileError(f"cannot read '{raw.strip()}' ({e or 'missing argument'})", fname, ln,
                          todo="Write '<rank> <action> <args>', e.g. '0 send 1 1024'")


def _unknown(action: str, fname: str, ln: int) -> InputFileError:
    return InputFileError(f"unknown action '{action}'", fname, ln,
                          todo="Supported: init finalize compute sleep send Isend recv Irecv wait "
                               "waitall barrier bcast reduce allreduce gather scatter allgather allToAll")


def _no_action(path: Path) -> InputFileError:
    return InputFileError("the TIT trace has no action", str(path), todo="Give a non-empty trace")


def _bad_peer(peer: int, ntasks: int, fname: str, ln: int) -> InputFileError:
    return InputFileError(f"rank {peer} is named as a peer or root but has no action (ranks 0..{ntasks - 1})",
                          fname, ln, todo="Fix the rank or add its actions")


def _bad_alltoall(per_peer: int, ntasks: int, path: Path) -> InputFileError:
    return InputFileError(f"an allToAll of {per_peer} bytes per peer on {ntasks} ranks sends beyond {MAX_BYTES} "
                          "bytes", str(path), todo="Fix the size")


def _no_pending() -> ValueError:
    return ValueError("wait without a pending Isend/Irecv")


def _no_pending_between(src: int, dst: int) -> ValueError:
    return ValueError(f"no pending request between {src} and {dst}")


def _beyond(r: int) -> ValueError:
    return ValueError(f"rank {r} runs beyond {MAX_NS / 1e9:g} s")


# ---- reading ------------------------------------------------------------------------------------------

def read_tit(path: str | Path, flops_rate: float = 1e9, engine: str | None = None) -> Trace:
    if not 0 < flops_rate <= MAX_FLOPS_RATE:  # also nan and inf; 0 divided every compute by zero
        raise UsageError(f"flop rate {flops_rate} is not in (0, {MAX_FLOPS_RATE:g}] flop/s", "--flops-rate",
                         "Give the flop/s of the machine to replay on, e.g. --flops-rate 1e10")
    path = Path(path)
    if not path.is_file():
        raise InputFileError("no such TIT file", str(path), todo="Give a SimGrid time-independent trace")
    sources = _sources(path)
    if used_engine(sources, engine) == "native":
        cols, ntasks = _parse_native(sources, flops_rate, path)
    else:
        cols, ntasks = _Parser(flops_rate).parse(sources, path)
    return Trace(events=_events(cols), ntasks=ntasks, timed=False, source=str(path),
                 meta={"imported_from": "simgrid-tit", "flops_rate": flops_rate})


def used_engine(sources: list[tuple[str, bytes]], engine: str | None = None) -> str:
    """``native`` or ``python``: the parser that reads these files."""
    from hpcvar.traces import tit_native

    eng = import_engine(engine, tit_native.available, tit_native.lib)
    return "native" if eng == "native" and all(d.isascii() for _, d in sources) else "python"


def _sources(path: Path) -> list[tuple[str, bytes]]:
    """(name, bytes) of the files to parse: the file itself, or the per-rank files its lines name."""
    data = read_user_bytes(path)
    if not _is_index(data):
        return [(str(path), data)]
    return [(str(fp), read_user_bytes(fp)) for fp in _index_entries(path, data.decode())]


def _is_index(data: bytes) -> bool:
    """An index of per-rank files: its first line that is not blank nor starts with '#' has one field that
    is not a rank."""
    if data.isascii():
        m = _FIRST_LINE.search(data)
        first = m.group().decode().split() if m else []
    else:
        first = next((ln.split() for ln in data.decode().splitlines() if ln.strip() and not ln.startswith("#")),
                     [])
    return bool(first) and len(first) == 1 and not first[0].lstrip("p").isdigit()


def _index_entries(path: Path, text: str):
    """The files an index names (relative to its directory), each checked when reached."""
    for entry in text.splitlines():
        entry = entry.strip()
        if entry and not entry.startswith("#"):
            fp = Path(entry) if Path(entry).is_absolute() else path.parent / entry
            if not fp.is_file():
                raise InputFileError(f"the index names a missing file '{entry}'", str(path))
            yield fp


def _events(cols: dict[str, np.ndarray]) -> pd.DataFrame:
    """The events frame from the parsers' arrays (every TIT row lasts 0 s)."""
    return events_frame({**cols, "t_start": cols["t"], "t_end": cols["t"].copy()})


# ---- the compiled parser ------------------------------------------------------------------------------

def _parse_native(sources: list[tuple[str, bytes]], flops_rate: float, path: Path):
    from hpcvar.traces import tit_native

    res = tit_native.parse([d for _, d in sources], flops_rate)
    if res.err == tit_native.E_NOT_ASCII:  # never: used_engine sends only ASCII text here
        return _Parser(flops_rate).parse(sources, path)
    if res.err:
        raise _native_error(res, sources, flops_rate, path)
    assert res.cols is not None
    return res.cols, res.ntasks


def _native_error(res, sources: list[tuple[str, bytes]], flops_rate: float, path: Path) -> InputFileError:
    """The reference's error for the compiled parser's first error."""
    from hpcvar.traces import tit_native as tn

    if res.err == tn.E_NO_ACTION:
        return _no_action(path)
    if res.err == tn.E_ALLTOALL:
        return _bad_alltoall(res.a, res.b, path)
    fname, data = sources[res.file]
    if res.err == tn.E_PEER:
        return _bad_peer(res.a, res.b, fname, res.line)
    raw = data[res.span[0]:res.span[1]].decode()
    f = raw.split()
    if res.err == tn.E_UNKNOWN:
        return _unknown(f[1], fname, res.line)
    return _cannot_read(raw, _line_exception(res, f, flops_rate), fname, res.line)


def _line_exception(res, f: list[str], flops_rate: float) -> Exception:
    """The ValueError or IndexError the reference raises on this line (its message is part of the error)."""
    from hpcvar.traces import tit_native as tn

    fixed = {tn.E_WAIT_EMPTY: _no_pending, tn.E_WAIT_NONE: lambda: _no_pending_between(res.a, res.b),
             tn.E_BEYOND: lambda: _beyond(res.a)}
    if res.err in fixed:
        return fixed[res.err]()
    calls = {tn.E_RANK: lambda: _rank(f[res.tok]), tn.E_SIZE: lambda: _size(f[res.tok]),
             tn.E_COMPUTE: lambda: _ns(float(f[res.tok]) / flops_rate, "compute"),
             tn.E_SLEEP: lambda: _ns(float(f[res.tok]), "sleep"), tn.E_MISSING: lambda: f[len(f)]}
    try:
        calls[res.err]()
    except (IndexError, ValueError) as e:
        return e
    raise AssertionError(f"native/sim/tit.c refused '{' '.join(f)}' (error {res.err}) but the reference accepts "
                         "it: a bug, please report it")


# ---- the reference ------------------------------------------------------------------------------------

class _Parser:
    """The reference parser, one line at a time: per rank its rows ``(op, peer, bytes, req, t_ns)``, its
    clock and its pending Isend/Irecv (their seq, oldest first)."""

    def __init__(self, flops_rate: float):
        self.rate = flops_rate
        self.rows: dict[int, list[tuple]] = {}
        self.clock: dict[int, int] = {}
        self.pending: dict[int, list[int]] = {}
        self.peer_max: tuple[int, str, int] = (-1, "", 0)  # the highest peer or root named, and where
        self.where: tuple[str, int] = ("", 0)

    def parse(self, sources: list[tuple[str, bytes]], path: Path):
        for fname, data in sources:
            for ln, raw in enumerate(data.decode().splitlines(), 1):
                self.line(fname, ln, raw)
        return self.finish(path)

    def line(self, fname: str, ln: int, raw: str) -> None:
        f = raw.split()
        if not f or raw.lstrip().startswith("#"):
            return
        self.where = (fname, ln)
        try:
            r = _rank(f[0])
            act = f[1].lower()
            self.rows.setdefault(r, [])
            self.clock.setdefault(r, 0)
            self.action(r, act, f)
            if self.clock[r] > MAX_NS:
                raise _beyond(r)
        except (IndexError, ValueError) as e:
            raise _cannot_read(raw, e, fname, ln) from None

    def action(self, r: int, act: str, f: list[str]) -> None:
        args = f[2:]
        if act in ("init", "finalize"):
            self.add(r, act)
        elif act == "compute":
            self.clock[r] += _ns(float(args[0]) / self.rate, "compute")
        elif act == "sleep":
            self.clock[r] += _ns(float(args[0]), "sleep")
        elif act in _P2P:
            self.add(r, act, peer=_rank(args[0]), nbytes=_size(args[1]))
            if act in ("isend", "irecv"):
                self.pending.setdefault(r, []).append(len(self.rows[r]) - 1)
        elif act == "wait":
            self.wait(r, args)
        elif act == "waitall":
            for s in self.pending.pop(r, []):
                self.complete(r, s)
        elif act in _COLL:
            self.collective(r, act, args)
        elif act not in _IGNORED:
            raise _unknown(f[1], *self.where)

    def add(self, r: int, op: str, peer: int = -1, nbytes: int = 0, req: int = -1) -> None:
        self.rows[r].append((op, peer, nbytes, req, self.clock[r]))
        if peer > self.peer_max[0]:
            self.peer_max = (peer, *self.where)

    def wait(self, r: int, args: list[str]) -> None:
        """The most recent pending request (SimGrid's old semantics), or with ``wait SRC DST [TAG]`` the
        oldest pending one between them."""
        q = self.pending.get(r) or []
        if not q:
            raise _no_pending()
        pick = len(q) - 1
        if len(args) >= 2:
            src, dst = _rank(args[0]), _rank(args[1])
            rl = self.rows[r]
            cand = [k for k, s in enumerate(q) if (rl[s][0] == "isend" and r == src and rl[s][1] == dst)
                    or (rl[s][0] == "irecv" and r == dst and rl[s][1] == src)]
            if not cand:
                raise _no_pending_between(src, dst)
            pick = cand[0]
        self.complete(r, q.pop(pick))

    def complete(self, r: int, s: int) -> None:
        op, peer, nbytes, _, _ = self.rows[r][s]
        self.add(r, "wait", peer=peer, nbytes=nbytes, req=s)

    def collective(self, r: int, op: str, args: list[str]) -> None:
        nb = _size(args[0]) if args and op != "barrier" else 0
        root = -1
        if op == "bcast" and len(args) >= 2:
            root = _rank(args[1])
        elif op in ("reduce", "gather", "scatter") and len(args) >= 3:
            root = _rank(args[2])
        elif op in _ROOTED:
            root = 0
        if op == "alltoall":
            nb = _size(args[0])  # per-peer send size; scaled to the total in finish()
        self.add(r, op, peer=root, nbytes=nb)

    def finish(self, path: Path) -> tuple[dict[str, np.ndarray], int]:
        """The columns, rows sorted by rank (allToAll sizes times ntasks), then a finalize row for each
        rank whose last row is not one (it keeps the compute after that row), in order of first line."""
        if not self.rows:
            raise _no_action(path)
        ntasks = max(self.rows) + 1
        if self.peer_max[0] >= ntasks:
            raise _bad_peer(self.peer_max[0], ntasks, *self.peer_max[1:])
        flat = []
        for r in sorted(self.rows):
            for seq, (op, peer, nb, req, t) in enumerate(self.rows[r]):
                if op == "alltoall" and nb * ntasks > MAX_BYTES:
                    raise _bad_alltoall(nb, ntasks, path)
                flat.append((r, seq, _CODE[op], peer, nb * ntasks if op == "alltoall" else nb, req, t))
        flat += [(r, len(rl), _CODE["finalize"], -1, 0, -1, self.clock[r]) for r, rl in self.rows.items()
                 if not rl or rl[-1][0] != "finalize"]
        from hpcvar.traces.tit_native import COLUMNS as NATIVE

        cols = list(zip(*flat, strict=True))
        return {name: np.array(cols[i], dtype) for i, (name, dtype) in enumerate(NATIVE.items())}, ntasks


__all__ = ["MAX_FLOPS_RATE", "read_tit", "used_engine"]
