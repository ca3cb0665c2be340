"""Rich tables for the terminal: the latency renderer, and ``render_run``, the one way a stored run is shown.

A kind's renderer (``render=`` in hpcvar.kinds) takes ``(console, run)`` and reads the stored Run (its
``info["result"]``, its tables): a command prints its run through ``render_run`` once the run is stored, and
``hpcvar runs show`` ends with the same call, so both show the same view.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rich.console import Console, ConsoleOptions, RenderResult
from rich.markup import escape
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from hpcvar.units import format_rate_bytes, format_size, format_time_ns

if TYPE_CHECKING:
    from hpcvar.results.store import Run


# the width of a console whose output is not a terminal (a pipe, a file): wide enough that nothing wraps
PIPE_WIDTH = 100_000


class PipeConsole(Console):
    """The console of output that is not a terminal: every table is printed whole, for ``grep``, ``cut`` and
    ``awk``: no box drawing, no cell wrapped or cut with '…', no line wrapped at 80 columns."""

    def print(self, *objects: Any, **kwargs: Any) -> None:
        for o in objects:
            if isinstance(o, Table):
                plain_table(o)
        kwargs.setdefault("soft_wrap", True)
        super().print(*objects, **kwargs)


# ---- typed cells: a quantity and its unit, written for people on a terminal and as bare numbers in a pipe ----
# the units each family is written in, smallest first, with their size in the family's base unit (ns, B, B/s)
FAMILY_UNITS: dict[str, tuple[tuple[str, float], ...]] = {
    "time": (("ns", 1.0), ("us", 1e3), ("ms", 1e6), ("s", 1e9)),
    "size": (("B", 1.0), ("KiB", 1024.0), ("MiB", 1024.0**2), ("GiB", 1024.0**3)),
    "rate": (("B/s", 1.0), ("kB/s", 1e3), ("MB/s", 1e6), ("GB/s", 1e9)),
}
_FORMAT = {"time": format_time_ns, "size": format_size, "rate": format_rate_bytes}


@dataclass(frozen=True)
class Cell:
    """A table cell that is a quantity in its family's base unit (``time``: ns, ``size``: bytes, ``rate``:
    bytes/s), or the interval ``value``-``hi``; None or NaN is missing ("-"). A terminal shows it as people
    read it ('2.50 ms', '1.70-1.79 us', '4MiB'); a pipe (``PipeConsole``) writes bare numbers in one unit per
    column, named in the header ('median (ns)'). Build them with ``ns``, ``seconds``, ``nbytes``, ``rate``,
    ``ns_interval``."""

    family: str
    value: float | None
    hi: float | None = None

    def missing(self) -> bool:
        return self.value is None or not math.isfinite(self.value) or (self.hi is not None and
                                                                       not math.isfinite(self.hi))

    def unit(self) -> str:
        """The unit its text for people is written in (the interval's: its upper end's)."""
        v = abs(self.value if self.hi is None else self.hi) if not self.missing() else 0.0  # type: ignore[arg-type]
        units = FAMILY_UNITS[self.family]
        return next((u for u, size in reversed(units) if v >= size), units[0][0])

    def __str__(self) -> str:
        if self.missing():
            return "-"
        if self.hi is None:
            return _FORMAT[self.family](float(self.value))  # type: ignore[arg-type]
        scale = dict(FAMILY_UNITS[self.family])[self.unit()]
        return f"{self.value / scale:.3g}-{self.hi / scale:.3g} {self.unit()}"  # type: ignore[operator]

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield Text(str(self))

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement(len(str(self)), len(str(self)))

    def plain(self, scale: float) -> str:
        """Bare number(s) in the unit of size ``scale``."""
        if self.missing():
            return "-"
        vals = [self.value] if self.hi is None else [self.value, self.hi]
        return "-".join(_plain_number(float(v) / scale) for v in vals)  # type: ignore[arg-type]


def ns(value: float | None) -> Cell:
    """A time in ns."""
    return Cell("time", value)


def seconds(value: float | None) -> Cell:
    """A time given in s."""
    return Cell("time", None if value is None else value * 1e9)


def nbytes(value: float | None) -> Cell:
    """A size in bytes."""
    return Cell("size", value)


def rate(value: float | None) -> Cell:
    """A rate in bytes per second."""
    return Cell("rate", value)


def ns_interval(lo: float, hi: float) -> Cell:
    """An interval of times in ns ('1.70-1.79 us': both ends in the unit of the upper end)."""
    return Cell("time", lo, hi)


_EMPTY_CELLS = ("", "-")


def _typed_column(c: Any) -> bool:
    """Give a column of typed cells one unit (False when its cells are not all typed cells of one family)."""
    cells = c._cells
    if not cells or not all(isinstance(x, Cell) or str(x).strip() in _EMPTY_CELLS for x in cells):
        return False
    typed = [x for x in cells if isinstance(x, Cell)]
    if not typed or len({x.family for x in typed}) != 1:
        return False
    units = dict(FAMILY_UNITS[typed[0].family])
    present = [x.unit() for x in typed if not x.missing()]
    unit = min(present, key=lambda u: units[u]) if present else next(iter(units))  # no value turns into 0.00
    c._cells = [x.plain(units[unit]) if isinstance(x, Cell) else str(x) for x in cells]
    c.header = f"{c.header} ({unit})" if isinstance(c.header, str) else c.header
    return True


def _plain_number(v: float) -> str:
    """6 significant digits, never an exponent: 2500000, 1.2, 0.000512."""
    if abs(v) < 1e15 and abs(v - round(v)) <= 1e-9 * max(1.0, abs(v)):
        return str(int(round(v)))  # sizes stay exact: 1MiB is 1048576
    text = f"{v:.6g}"
    if "e" in text:
        text = f"{float(text):.12f}".rstrip("0").rstrip(".")
    return text


def one_unit_per_column(t: Table) -> None:
    """A column of typed cells (``Cell``: quantities with units, '-' where missing) gets one unit, named in its
    header ('median (us)'), and bare numbers in its cells: what a pipe needs (sort, awk)."""
    for c in t.columns:
        _typed_column(c)


def plain_table(t: Table) -> Table:
    """``t`` without box drawing, every cell on one line and never cut, one unit per column (nested tables
    too)."""
    t.box = None
    t.show_edge = False
    t.expand = False
    for c in t.columns:
        c.no_wrap = True
        c.overflow = "ignore"
        for cell in c._cells:
            if isinstance(cell, Table):
                plain_table(cell)
    if t.show_header:
        one_unit_per_column(t)
    return t


def make_console(stderr: bool = False) -> Console:
    """The one console factory of hpcvar's output: a terminal gets rich tables fitted to its width; a pipe or a
    file gets a ``PipeConsole`` (whole tables, no wrapping, no colour)."""
    stream = sys.stderr if stderr else sys.stdout
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):
        tty = False
    if tty:
        return Console(stderr=stderr, highlight=False)
    return PipeConsole(stderr=stderr, highlight=False, width=PIPE_WIDTH, soft_wrap=True, no_color=True,
                       color_system=None)


def render_run(console: Console, run: Run) -> None:
    """A stored run through its kind's renderer (hpcvar.results.kinds; the result of a kind without one is
    printed as data), then what every view says, here once: the run's warnings, its figures and where it is
    stored."""
    from hpcvar.results.kinds import kind_of

    kind = kind_of(run.info.get("command"))
    fn = kind.view("render") if kind else None
    if run.info.get("result") is None:
        console.print(f"no result: the run is {run.status}", markup=False)
    elif fn:
        fn(console, run)
    else:
        from rich.pretty import Pretty

        console.print(Pretty(run.info.get("result")))
    for w in run_warnings(run):
        console.print(f"[yellow]warning:[/] {escape(w)}")
    plots = run_plots(run)
    if plots:
        console.print("plots: " + ", ".join(plots), markup=False, soft_wrap=True)
    console.print(f"stored in {run.path}", markup=False, soft_wrap=True)


def run_warnings(run: Run) -> list[str]:
    """The run's warnings (run.json ``warnings``), and those that runs of earlier versions kept only in their
    result (``warning``, ``warnings``), each once."""
    result = _result(run)
    out = [str(w) for w in run.info.get("warnings") or []]
    legacy = list(result.get("warnings") or []) + ([result["warning"]] if result.get("warning") else [])
    return out + [str(w) for w in dict.fromkeys(legacy) if str(w) not in out]


def _result(run: Run) -> dict[str, Any]:
    result = run.info.get("result")
    return result if isinstance(result, dict) else {}


def run_plots(run: Run) -> list[str]:
    """The figures a run's result lists (``plots``), those of its own ``plots/`` directory found where the run
    is now (a run directory moved or copied elsewhere keeps its figures)."""
    result = _result(run)
    made_in = str(result.get("run") or run.path)
    out = []
    for p in result.get("plots") or []:
        p = str(p)
        if p.startswith(made_in + "/"):
            p = str(run.path / p[len(made_in) + 1:])
        out.append(p)
    return out
