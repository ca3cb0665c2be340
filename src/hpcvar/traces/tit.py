"""Import of SimGrid time-independent traces (TIT): ``<rank> <action> <args...>`` per line.

One file with every rank's lines, or an index file whose lines name one file per rank (what SimGrid's
``smpirun -trace-ti`` writes). Both dialects of SimGrid are read, chosen per file (hpcvar.traces.tit_dialect):
SimGrid <= 3.19's (``Isend DST COUNT``) and >= 3.20's (``isend DST TAG COUNT [DATATYPE]``, ``wait SRC DST
TAG``). Counts are elements of their datatype (the ids SimGrid's recorder writes, mapped to sizes); tags are
kept; ``compute FLOPS`` and the FLOPS of ``reduce``/``allreduce`` (SimGrid runs them after the collective)
last FLOPS / ``flops_rate`` seconds, ``sleep SECONDS`` lasts SECONDS. A line that fits neither dialect, or both
with different meanings, is an error naming file:line. The trace is time-independent: rows last 0 s and the
trace is marked ``timed = false`` (no E_abs).

Two parsers give the same rows and the same first error: the compiled one (native/sim/tit.c through
``hpcvar.traces.tit_native``, ASCII text) and ``_Parser``, the reference, one line at a time. ``engine``
(``auto``: C when the library is installed and the text is ASCII; ``native``; ``python``; default:
$HPCVAR_IMPORT_ENGINE, else auto) picks one; text with non-ASCII characters (Unicode line breaks,
spaces and digits count as Python counts them) is always read by the reference. Both report an error as
(kind, token, two values) and ``_message`` writes it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from hpcvar.errors import InputFileError, UsageError
from hpcvar.traces import import_engine, tit_prefetch
from hpcvar.traces import tit_dialect as td
from hpcvar.traces.columns import trace_columns
from hpcvar.traces.parquet import MAX_BYTES, MAX_NS, MAX_TASKS, OPS, Trace
from hpcvar.traces.tit_files import sources as _sources
from hpcvar.units import MAX_SIZE

_CODE = {op: i for i, op in enumerate(OPS)}
MAX_FLOPS_RATE = 1e20  # flop/s: beyond any machine (the largest are near 1e18)
MAX_TAG = 2**31 - 1  # an int, as SimGrid reads it

# error kinds (native/sim/tit.h, same order)
(OK, E_RANK, E_SIZE, E_COMPUTE, E_SLEEP, E_MISSING, E_WAIT_EMPTY, E_WAIT_NONE, E_BEYOND, E_UNKNOWN, E_NO_ACTION,
 E_PEER, E_ALLTOALL, E_NOT_ASCII, E_MEMORY, E_DIALECT, E_AMBIGUOUS, E_NARGS, E_TAG, E_DATATYPE, E_BYTES,
 E_UNSUPPORTED, E_TOTAL) = range(23)
# names SimGrid's recorder writes that its replay (and hpcvar) does not read, and what to write instead
_RECORDER_ONLY = {"Ssend": "send", "ISsend": "isend", "bsend": "send", "ibsend": "isend", "Start": None,
                  "Startall": None, "waitAny": None, "testany": None, "testall": None, "testsome": None}


class _LineError(Exception):
    """An error of the reference parser on the current line: its kind, the token and two values (those of
    the C parser)."""

    def __init__(self, kind: int, tok: int = 0, a: int = 0, b: int = 0):
        super().__init__(kind)
        self.kind, self.tok, self.a, self.b = kind, tok, a, b


# ---- values ----------------------------------------------------------------------------------------------

def _rank(tok: str) -> int:
    """A rank ``3`` or ``p3`` in 0..MAX_TASKS-1 (ValueError otherwise)."""
    r = int(tok[1:]) if tok.startswith("p") else int(tok)
    if not 0 <= r < MAX_TASKS:
        raise ValueError(tok)
    return r


def _count(tok: str) -> int:
    """A count (``1024``, ``1e6``, truncated as SimGrid truncates): 0..units.MAX_SIZE (ValueError otherwise)."""
    v = float(tok)
    if not 0 <= v <= MAX_SIZE:  # also nan and inf
        raise ValueError(tok)
    return int(v)


def _tag(tok: str) -> int:
    v = int(tok)
    if not 0 <= v <= MAX_TAG:
        raise ValueError(tok)
    return v


def _ns(tok: str, divisor: float) -> int:
    """float(tok) / divisor seconds in ns: finite, non-negative, at most MAX_NS (ValueError otherwise)."""
    seconds = float(tok) / divisor
    if not 0 <= seconds * 1e9 <= MAX_NS:  # also nan and inf
        raise ValueError(tok)
    return int(round(seconds * 1e9))


# ---- the errors (one wording for both parsers) -----------------------------------------------------------

class _Ctx:
    """What an error message needs besides the line: the flop rate, the dialect asked for, and per file its
    grammar and the line that chose it (0: --dialect)."""

    def __init__(self, rate: float, dialect: int, dialect_text: str = "auto"):
        self.rate, self.dialect, self.dialect_text = rate, dialect, dialect_text


def _message(kind: int, f: list[str], tok: int, a: int, b: int, ctx: _Ctx) -> tuple[str, str | None]:
    """(what, todo) of a line's error."""
    t = f[tok][:40] if tok < len(f) else ""
    if kind in _VALUE_MESSAGES:
        what, todo = _VALUE_MESSAGES[kind]
        return what.format(t=t, rate=ctx.rate, max_size=MAX_SIZE, max_s=MAX_NS / 1e9, max_tasks=MAX_TASKS - 1,
                           max_tag=MAX_TAG, a=a, b=b), todo
    if kind == E_UNKNOWN:
        return _unknown(f[1], b)
    if kind == E_DIALECT:
        return _dialect_conflict(f, a, b, ctx)
    if kind == E_AMBIGUOUS:
        return (f"'{f[1]}' with {len(f) - 2} arguments reads as SimGrid <= 3.19's 'PEER COUNT DATATYPE' and as "
                f">= 3.20's 'PEER TAG COUNT', and no line of the file says which dialect it is",
                "Give the SimGrid version that wrote the trace: --dialect 3.19 or --dialect 3.32 (for example)")
    if kind == E_NARGS:
        in_dialect = f" in {td.GRAMMAR_NAMES[a]}'s dialect" if a in td.GRAMMAR_NAMES else ""
        world = f" (a count per rank: the trace has {b} ranks)" if b else ""
        return f"'{f[1]}' takes {td.describe(f[1], a, b)}{in_dialect}{world}, not {len(f) - 2}", None
    if kind == E_DATATYPE:
        return _datatype(t, a, b, ctx)
    if kind == E_UNSUPPORTED:
        return (f"hpcvar does not read '{f[1]}' lines (MPI_Scan and MPI_Exscan have no row in hpcvar's traces)",
                "Remove the line (its time then counts as compute) or replay the trace with SimGrid")
    raise AssertionError(f"error kind {kind}")


_TAG_TODO = "Tags are 0..2147483647 (MPI_ANY_TAG, -1, is not resolved: give the tag the message was sent with)"
_VALUE_MESSAGES: dict[int, tuple[str, str | None]] = {
    E_RANK: ("'{t}' is not a rank (0..{max_tasks}, written 3 or p3)", None),
    E_SIZE: ("'{t}' is not a count of elements (0..{max_size})", None),
    E_COMPUTE: ("'{t}' is not an amount of flops lasting 0..{max_s:g} s at {rate:g} flop/s",
                "Give flops as a number; --flops-rate sets the machine's flop/s"),
    E_SLEEP: ("'{t}' is not a duration in 0..{max_s:g} s", None),
    E_MISSING: ("a rank without an action", "Write '<rank> <action> <args>', e.g. '0 isend 1 0 1024'"),
    E_WAIT_EMPTY: ("wait without a pending Isend/Irecv (SimGrid <= 3.19: 'wait' completes the most recent one)",
                   None),
    E_WAIT_NONE: ("no pending isend/irecv from rank {a} to rank {b} with tag {t}",
                  "'wait SRC DST TAG' completes the oldest pending request with that source, destination and tag"),
    E_BEYOND: ("rank {a} runs beyond {max_s:g} s", None),
    E_TAG: ("'{t}' is not a tag (0..{max_tag})", _TAG_TODO),
    E_BYTES: ("'{t}' elements of {a} bytes are more than {max_size} bytes", None),
    E_TOTAL: ("the counts from '{t}' on, of {a}-byte elements, add up to more than {max_size} bytes", None),
}


def _unknown(action: str, grammar: int) -> tuple[str, str | None]:
    what = f"unknown action '{action}'"
    if action in _RECORDER_ONLY:
        instead = _RECORDER_ONLY[action]
        what += " (SimGrid's recorder writes it, but SimGrid's replay does not read it either)"
        return what, (f"Write '{instead}' instead" if instead else "Remove the line or write the calls it stands for")
    same = [n for n in td.ACTIONS if n.lower() == action.lower()]
    todo = "Action names are case-sensitive, as in SimGrid"
    if same:
        todo += f": did you mean {' or '.join(repr(s) for s in same)}?"
    names = sorted(n for n, (_, g, _) in td.ACTIONS.items() if g & (grammar or td.BOTH))
    return what, f"{todo} ({td.GRAMMAR_NAMES.get(grammar, 'both dialects')}: {' '.join(names)})"


def _dialect_conflict(f: list[str], line: int, grammar: int, ctx: _Ctx) -> tuple[str, str | None]:
    mine = td.classify(f[1], len(f) - 2)
    what = f"'{f[1]}' with {len(f) - 2} argument{'s' * (len(f) != 3)} is {td.GRAMMAR_NAMES[mine]}'s dialect, but "
    if line:
        what += f"line {line} of the file is {td.GRAMMAR_NAMES[grammar]}'s"
        return what, "A file is written in one dialect: fix the line (SimGrid's action names are case-sensitive)"
    what += f"--dialect {ctx.dialect_text} is {td.GRAMMAR_NAMES[grammar]}'s"
    return what, "Give the SimGrid version that wrote the trace, or --dialect auto"


def _datatype(t: str, err: int, grammar: int, ctx: _Ctx) -> tuple[str, str | None]:
    fix = "Write the count in bytes with datatype 6 (MPI_BYTE)"
    if err == td.DT_DERIVED:
        return (f"datatype {t}: a derived datatype (or MPI_DATATYPE_NULL), whose size SimGrid's recorder does not "
                "write (SimGrid's replay sends 0 bytes)", fix)
    if err == td.DT_AMBIGUOUS:
        return (f"datatype {t} has a size that changed between SimGrid versions ({td.sizes_by_version(int(t))})",
                "Give the SimGrid version that wrote the trace, e.g. --dialect 3.32")
    if ctx.dialect != td.AUTO:
        table, n = td.VERSION_NAMES[ctx.dialect], len(td.DATATYPE_SIZES[ctx.dialect])
    elif grammar == td.OLD:
        table, n = td.VERSION_NAMES[td.V319], len(td.DATATYPE_SIZES[td.V319])
    else:
        table, n = "SimGrid", len(td.AUTO_SIZES)
    if err == td.DT_NOSIZE:
        return f"datatype {t} has no size in {table} (MPI_UB, MPI_LB or a type SimGrid did not define)", fix
    return f"'{t}' is not a datatype id of {table} (0..{n - 1}, as SimGrid writes them)", fix


def _no_action(path: Path) -> InputFileError:
    return InputFileError("the TIT trace has no action", str(path), todo="Give a non-empty trace")


def _bad_peer(peer: int, ntasks: int, fname: str, ln: int) -> InputFileError:
    return InputFileError(f"rank {peer} is named as a peer or root but has no action (ranks 0..{ntasks - 1})",
                          fname, ln, todo="Fix the rank or add its actions")


def _bad_alltoall(per_peer: int, ntasks: int, path: Path) -> InputFileError:
    return InputFileError(f"an alltoall of {per_peer} bytes per peer on {ntasks} ranks sends beyond {MAX_BYTES} "
                          "bytes", str(path), todo="Fix the count")


def _line_error(raw: str, e: _LineError, fname: str, ln: int, ctx: _Ctx) -> InputFileError:
    what, todo = _message(e.kind, raw.split(), e.tok, e.a, e.b, ctx)
    return InputFileError(f"cannot read '{raw.strip()[:100]}': {what}", fname, ln, todo=todo)


# ---- reading ---------------------------------------------------------------------------------------------

def dialect_code(dialect: str | None) -> int:
    """The dialect code of a --dialect value (None: auto)."""
    try:
        return td.parse_dialect(dialect or "auto")
    except ValueError:
        raise UsageError(f"unknown TIT dialect '{str(dialect)[:30]}'", "--dialect",
                         "Give auto, or the SimGrid version that wrote the trace (3.19, 3.25, 3.32, ...)") from None


def read_tit(path: str | Path, flops_rate: float = 1e9, engine: str | None = None,
             dialect: str | None = None, prefetch_arrow: bool = True) -> Trace:
    """The trace of a TIT file or index; ``dialect``: auto (None) or the SimGrid version that wrote it;
    ``prefetch_arrow``: as hpcvar.traces.load.load_trace."""
    if not 0 < flops_rate <= MAX_FLOPS_RATE:  # also nan and inf; 0 divided every compute by zero
        raise UsageError(f"flop rate {flops_rate} is not in (0, {MAX_FLOPS_RATE:g}] flop/s", "--flops-rate",
                         "Give the flop/s of the machine to replay on, e.g. --flops-rate 1e10")
    code = dialect_code(dialect)
    path = Path(path)
    if not path.is_file():
        raise InputFileError("no such TIT file", str(path), todo="Give a SimGrid time-independent trace")
    started = tit_prefetch.take(path, flops_rate, code) if engine != "python" else None
    sources, pending = started or (_sources(path), None)
    ctx = _Ctx(flops_rate, code, dialect or "auto")
    if used_engine(sources, engine) == "native":
        cols, ntasks, grammars = _parse_native(sources, ctx, path, pending, prefetch_arrow)
    else:
        parser = _Parser(ctx)
        cols, ntasks = parser.parse(sources, path)
        grammars = parser.grammars
    names = sorted({td.GRAMMAR_NAMES.get(g, "either") for g in grammars})
    return Trace(columns=_columns(cols), ntasks=ntasks, timed=False, source=str(path),
                 meta={"imported_from": "simgrid-tit", "flops_rate": flops_rate, "tit_dialect": names,
                       "tit_datatypes": "auto" if code == td.AUTO else td.VERSION_NAMES[code]})


def used_engine(sources: list[tuple[str, bytes]], engine: str | None = None) -> str:
    """``native`` or ``python``: the parser that reads these files."""
    from hpcvar.traces import tit_native

    eng = import_engine(engine, tit_native.available, tit_native.lib)
    return "native" if eng == "native" and all(d.isascii() for _, d in sources) else "python"


def _columns(cols: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The trace's columns from the parsers' arrays (every TIT row lasts 0 s)."""
    return trace_columns({**cols, "t_start": cols["t"], "t_end": cols["t"].copy()})


# ---- the compiled parser ---------------------------------------------------------------------------------

def _parse_native(sources: list[tuple[str, bytes]], ctx: _Ctx, path: Path, pending=None, arrow: bool = True):
    """The compiled parser's columns, ntasks and grammars; ``pending``: its parse of these files, started
    before (hpcvar.traces.tit_prefetch)."""
    from hpcvar.results.store import prefetch_arrow
    from hpcvar.traces import tit_native

    if arrow:  # what reads a trace stores Arrow next (a run's tables, trace import's Parquet): meanwhile
        prefetch_arrow()
    if pending is not None:
        res = tit_native.finish(pending)
    else:
        res = tit_native.parse([d for _, d in sources], ctx.rate, ctx.dialect)
    if res.err == E_NOT_ASCII:  # never: used_engine sends only ASCII text here
        parser = _Parser(ctx)
        return (*parser.parse(sources, path), parser.grammars)
    if res.err:
        raise _native_error(res, sources, ctx, path)
    assert res.cols is not None
    return res.cols, res.ntasks, res.grammars


def _native_error(res, sources: list[tuple[str, bytes]], ctx: _Ctx, path: Path) -> InputFileError:
    """The reference's error for the compiled parser's first error."""
    if res.err == E_NO_ACTION:
        return _no_action(path)
    if res.err == E_ALLTOALL:
        return _bad_alltoall(res.a, res.b, path)
    fname, data = sources[res.file]
    if res.err == E_PEER:
        return _bad_peer(res.a, res.b, fname, res.line)
    raw = data[res.span[0]:res.span[1]].decode()
    return _line_error(raw, _LineError(res.err, res.tok, res.a, res.b), fname, res.line, ctx)


# ---- the reference ---------------------------------------------------------------------------------------

def _detect(lines: list[str]) -> tuple[int, int]:
    """(grammar, line) of the first line only one grammar reads; (UNDECIDED, 0) if none."""
    for ln, raw in enumerate(lines, 1):
        f = raw.split()
        if len(f) >= 2 and not f[0].startswith("#"):
            c = td.classify(f[1], len(f) - 2)
            if c in (td.C_OLD, td.C_NEW):
                return c, ln
    return td.UNDECIDED, 0


class _Parser:
    """The reference parser, one line at a time: per rank its rows ``(op, peer, bytes, tag, req, t_ns)``, its
    clock, its pending isend/irecv (their seq, oldest first) and the size of a count without a datatype."""

    def __init__(self, ctx: _Ctx):
        self.ctx = ctx
        self.rate = ctx.rate
        self.rows: dict[int, list[tuple]] = {}
        self.clock: dict[int, int] = {}
        self.pending: dict[int, list[int]] = {}
        self.default_size: dict[int, int] = {}
        self.peer_max: tuple[int, str, int] = (-1, "", 0)  # the highest peer or root named, and where
        self.where: tuple[str, int] = ("", 0)
        self.grammars: list[int] = []
        self.grammar = td.UNDECIDED
        self.sources: list[tuple[str, bytes]] = []
        self.world = 0  # the ranks of the trace, counted when a v-collective needs them

    def world_size(self) -> int:
        """The highest rank any line names first, + 1: the size of MPI_COMM_WORLD that a v-collective's counts
        cover (lines whose first field is no rank do not count; they are errors when reached)."""
        if not self.world:
            for _, data in self.sources:
                for raw in data.decode().splitlines():
                    f = raw.split()
                    if f and not f[0].startswith("#"):
                        try:
                            self.world = max(self.world, _rank(f[0]) + 1)
                        except ValueError:
                            pass
        return self.world

    def parse(self, sources: list[tuple[str, bytes]], path: Path):
        self.sources = sources
        for fname, data in sources:
            lines = data.decode().splitlines()
            if self.ctx.dialect == td.AUTO:
                self.grammar, chosen_at = _detect(lines)
            else:
                self.grammar, chosen_at = (td.OLD if self.ctx.dialect == td.V319 else td.NEW), 0
            self.grammars.append(self.grammar)
            for ln, raw in enumerate(lines, 1):
                self.line(fname, ln, raw, chosen_at)
        return self.finish(path)

    def line(self, fname: str, ln: int, raw: str, chosen_at: int) -> None:
        f = raw.split()
        if not f or f[0].startswith("#"):
            return
        self.where = (fname, ln)
        try:
            r = self._arg(_rank, f, 0, E_RANK)
            if len(f) < 2:
                raise _LineError(E_MISSING, 1)
            self.rows.setdefault(r, [])
            self.clock.setdefault(r, 0)
            self._check_dialect(f, chosen_at)
            self.action(r, f)
            if self.clock[r] > MAX_NS:
                raise _LineError(E_BEYOND, 0, r)
        except _LineError as e:
            raise _line_error(raw, e, fname, ln, self.ctx) from None

    def _check_dialect(self, f: list[str], chosen_at: int) -> None:
        """The line's name and number of arguments against the file's grammar; then their count against the
        action's layout."""
        c = td.classify(f[1], len(f) - 2)
        if c == td.UNKNOWN:
            raise _LineError(E_UNKNOWN, 1, 0, self.grammar)
        if c in (td.C_OLD, td.C_NEW) and c != self.grammar:  # (an undecided file has no such line)
            raise _LineError(E_DIALECT, 1, chosen_at, self.grammar)
        if c == td.AMBIGUOUS and self.grammar == td.UNDECIDED:
            raise _LineError(E_AMBIGUOUS, 1)
        n = self.world_size() if td.ACTIONS[f[1]][0] == td.K_VCOLL else 0
        lo, hi, _ = td.layout(f[1], self.grammar, n)
        if not lo <= len(f) - 2 <= (hi if hi >= 0 else len(f)):
            raise _LineError(E_NARGS, 1, self.grammar, n)

    # -- tokens --

    @staticmethod
    def _arg(fn, f: list[str], i: int, kind: int, *extra):
        try:
            return fn(f[i], *extra)
        except ValueError:
            raise _LineError(kind, i) from None

    def _datatype(self, r: int, f: list[str], i: int) -> int:
        """The size of the datatype at field i (absent: the rank's default)."""
        if i >= len(f):
            return self.default_size.get(r, 1)
        size, err = td.datatype_size(f[i], self.ctx.dialect, self.grammar)
        if err:
            raise _LineError(E_DATATYPE, i, err, self.grammar)
        return size

    @staticmethod
    def _bytes(count: int, size: int, i: int) -> int:
        if count * size > MAX_SIZE:
            raise _LineError(E_BYTES, i, size)
        return count * size

    def _opt_rank(self, f: list[str], i: int, default: int) -> int:
        return self._arg(_rank, f, i, E_RANK) if i < len(f) else default

    # -- actions --

    def action(self, r: int, f: list[str]) -> None:
        kind, _, name = td.ACTIONS[f[1]]
        op = name or ""
        if kind == td.K_P2P:
            self.p2p(r, op, f)
        elif kind == td.K_WAIT:
            self.wait(r, f)
        elif kind == td.K_COLL:
            self.collective(r, op, f)
        elif kind == td.K_SENDRECV:
            self.sendrecv(r, f)
        elif kind == td.K_VCOLL:
            self.vcollective(r, op, f)
        else:
            self.local(r, kind, f)

    def local(self, r: int, kind: int, f: list[str]) -> None:
        """An action of task r alone: init, finalize, compute, sleep, test, waitall (or one not supported)."""
        if kind == td.K_INIT:
            self.default_size[r] = 8 if len(f) > 2 else 1  # SimGrid: MPI_DOUBLE after 'init X', else MPI_BYTE
            self.add(r, "init")
        elif kind == td.K_FINALIZE:
            self.add(r, "finalize")
        elif kind == td.K_COMPUTE:
            self.clock[r] += self._arg(_ns, f, 2, E_COMPUTE, self.rate)
        elif kind == td.K_SLEEP:
            self.clock[r] += self._arg(_ns, f, 2, E_SLEEP, 1.0)
        elif kind == td.K_TEST:
            if self.grammar == td.NEW:
                self._arg(_rank, f, 2, E_RANK), self._arg(_rank, f, 3, E_RANK), self._arg(_tag, f, 4, E_TAG)
        elif kind == td.K_WAITALL:
            for s in self.pending.pop(r, []):
                self.complete(r, s)
        elif kind == td.K_UNSUPPORTED:
            raise _LineError(E_UNSUPPORTED, 1)

    def add(self, r: int, op: str, peer: int = -1, nbytes: int = 0, tag: int = 0, req: int = -1) -> None:
        self.rows[r].append((op, peer, nbytes, tag, req, self.clock[r]))
        if peer > self.peer_max[0]:
            self.peer_max = (peer, *self.where)

    def p2p(self, r: int, op: str, f: list[str]) -> None:
        """PEER [TAG] COUNT [DATATYPE] (the tag: only in the 3.20 grammar)."""
        peer = self._arg(_rank, f, 2, E_RANK)
        new = self.grammar == td.NEW
        tag = self._arg(_tag, f, 3, E_TAG) if new else 0
        ci = 4 if new else 3
        count = self._arg(_count, f, ci, E_SIZE)
        nbytes = self._bytes(count, self._datatype(r, f, ci + 1), ci)
        self.add(r, op, peer=peer, nbytes=nbytes, tag=tag)
        if op in ("isend", "irecv"):
            self.pending.setdefault(r, []).append(len(self.rows[r]) - 1)

    def wait(self, r: int, f: list[str]) -> None:
        """3.19: the most recent pending request; 3.20: ``wait SRC DST TAG``, the oldest pending one with that
        key (an isend of r: r, its peer, its tag; an irecv of r: its peer, r, its tag)."""
        q = self.pending.get(r) or []
        if self.grammar != td.NEW:
            if not q:
                raise _LineError(E_WAIT_EMPTY)
            self.complete(r, q.pop())
            return
        src, dst = self._arg(_rank, f, 2, E_RANK), self._arg(_rank, f, 3, E_RANK)
        tag = self._arg(_tag, f, 4, E_TAG)
        rl = self.rows[r]
        for k, s in enumerate(q):
            op, peer, _, t, _, _ = rl[s]
            key = (r, peer) if op == "isend" else (peer, r)
            if t == tag and key == (src, dst):
                self.complete(r, q.pop(k))
                return
        raise _LineError(E_WAIT_NONE, 4, src, dst)

    def complete(self, r: int, s: int) -> None:
        _, peer, nbytes, tag, _, _ = self.rows[r][s]
        self.add(r, "wait", peer=peer, nbytes=nbytes, tag=tag, req=s)

    def collective(self, r: int, op: str, f: list[str]) -> None:
        """The row (bytes: this rank's contribution, docs/formats.md), then the FLOPS of reduce/allreduce."""
        if op == "barrier":
            self.add(r, op)
            return
        count = self._arg(_count, f, 2, E_SIZE)
        ns, root = 0, -1
        if op in ("reduce", "allreduce"):
            ns = self._arg(_ns, f, 3, E_COMPUTE, self.rate)
            root = self._opt_rank(f, 4, 0) if op == "reduce" else -1
            nbytes = self._bytes(count, self._datatype(r, f, 5 if op == "reduce" else 4), 2)
        elif op == "bcast":
            root = self._opt_rank(f, 3, 0)
            nbytes = self._bytes(count, self._datatype(r, f, 4), 2)
        else:  # SEND RECV [ROOT] [DT1 [DT2]]
            recv = self._arg(_count, f, 3, E_SIZE)
            rooted = op in ("gather", "scatter")
            if rooted:
                root = self._opt_rank(f, 4, 0)
            d = 5 if rooted else 4
            send_size, recv_size = self._datatype(r, f, d), self._datatype(r, f, d + 1)
            send_b, recv_b = self._bytes(count, send_size, 2), self._bytes(recv, recv_size, 3)
            nbytes = recv_b if op == "scatter" else send_b  # scatter: the block received (significant everywhere)
        self.add(r, op, peer=root, nbytes=nbytes)
        self.clock[r] += ns

    def _counts(self, f: list[str], i: int, n: int) -> int:
        """The sum of the n counts from field i."""
        return sum(self._arg(_count, f, k, E_SIZE) for k in range(i, i + n))

    @staticmethod
    def _total(total: int, size: int, i: int) -> int:
        if total * size > MAX_SIZE:
            raise _LineError(E_TOTAL, i, size)
        return total * size

    def vcollective(self, r: int, op: str, f: list[str]) -> None:
        """gatherv, scatterv, allgatherv, alltoallv with a count per rank (bytes: this rank's, the root's the sum),
        reducescatter as a reduce to rank 0 of the sum then a scatterv of each rank's count, then its flops."""
        n = self.world_size()
        if op == "gatherv":
            send, total = self._arg(_count, f, 2, E_SIZE), self._counts(f, 3, n)
            root = self._opt_rank(f, 3 + n, 0)
            ss, rs = self._datatype(r, f, 4 + n), self._datatype(r, f, 5 + n)
            sb, tb = self._bytes(send, ss, 2), self._total(total, rs, 3)
            self.add(r, op, peer=root, nbytes=tb if r == root else sb)
        elif op == "scatterv":
            total, recv = self._counts(f, 2, n), self._arg(_count, f, 2 + n, E_SIZE)
            root = self._opt_rank(f, 3 + n, 0)
            ss, rs = self._datatype(r, f, 4 + n), self._datatype(r, f, 5 + n)
            tb, rb = self._total(total, ss, 2), self._bytes(recv, rs, 2 + n)
            self.add(r, op, peer=root, nbytes=tb if r == root else rb)
        elif op == "allgatherv":
            send, total = self._arg(_count, f, 2, E_SIZE), self._counts(f, 3, n)
            ss, rs = self._datatype(r, f, 3 + n), self._datatype(r, f, 4 + n)
            self._bytes(send, ss, 2)
            self.add(r, op, nbytes=self._total(total, rs, 3))
        elif op == "alltoallv":
            self._arg(_count, f, 2, E_SIZE)
            sent = self._counts(f, 3, n)
            self._arg(_count, f, 3 + n, E_SIZE)
            received = self._counts(f, 4 + n, n)
            ss, rs = self._datatype(r, f, 4 + 2 * n), self._datatype(r, f, 5 + 2 * n)
            sb = self._total(sent, ss, 3)
            self._total(received, rs, 4 + n)
            self.add(r, op, nbytes=sb)
        else:  # reducescatter
            total = self._counts(f, 2, n)
            ns = self._arg(_ns, f, 2 + n, E_COMPUTE, self.rate)
            size = self._datatype(r, f, 3 + n)
            tb = self._total(total, size, 2)
            mine = self._arg(_count, f, 2 + r, E_SIZE) * size
            self.add(r, "reduce", peer=0, nbytes=tb)
            self.add(r, "scatterv", peer=0, nbytes=tb if r == 0 else mine)
            self.clock[r] += ns

    def sendrecv(self, r: int, f: list[str]) -> None:
        """``sendRecv SEND_COUNT DST RECV_COUNT SRC [DT1 [DT2]]`` (SimGrid 3.32; tag 0 on both sides)."""
        sc, dst = self._arg(_count, f, 2, E_SIZE), self._arg(_rank, f, 3, E_RANK)
        rc, src = self._arg(_count, f, 4, E_SIZE), self._arg(_rank, f, 5, E_RANK)
        ss, rs = self._datatype(r, f, 6), self._datatype(r, f, 7)
        sb, rb = self._bytes(sc, ss, 2), self._bytes(rc, rs, 4)
        self.add(r, "sendrecv", peer=dst, nbytes=sb)
        self.add(r, "sendrecv_recv", peer=src, nbytes=rb)

    def finish(self, path: Path) -> tuple[dict[str, np.ndarray], int]:
        """The columns, rows sorted by rank (alltoall sizes times ntasks), then a finalize row for each
        rank whose last row is not one (it keeps the compute after that row), in order of first line."""
        if not self.rows:
            raise _no_action(path)
        ntasks = max(self.rows) + 1
        if self.peer_max[0] >= ntasks:
            raise _bad_peer(self.peer_max[0], ntasks, *self.peer_max[1:])
        flat = []
        for r in sorted(self.rows):
            for seq, (op, peer, nb, tag, req, t) in enumerate(self.rows[r]):
                if op == "alltoall" and nb * ntasks > MAX_BYTES:
                    raise _bad_alltoall(nb, ntasks, path)
                flat.append((r, seq, _CODE[op], peer, nb * ntasks if op == "alltoall" else nb, tag, req, t))
        flat += [(r, len(rl), _CODE["finalize"], -1, 0, 0, -1, self.clock[r]) for r, rl in self.rows.items()
                 if not rl or rl[-1][0] != "finalize"]
        from hpcvar.traces.tit_native import COLUMNS as NATIVE

        cols = list(zip(*flat, strict=True))
        return {name: np.array(cols[i], dtype) for i, (name, dtype) in enumerate(NATIVE.items())}, ntasks


__all__ = ["MAX_FLOPS_RATE", "dialect_code", "read_tit", "used_engine"]
