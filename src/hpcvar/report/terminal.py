"""Rich tables for the terminal: the latency renderer, and ``render_run``, the one way a stored run is shown.

A kind's renderer (``render=`` in hpcvar.kinds) takes ``(console, run)`` and reads the stored Run (its
``info["result"]``, its tables): a command prints its run through ``render_run`` once the run is stored, and
``hpcvar runs show`` ends with the same call, so both show the same view.
"""

from __future__ import annotations

import math
import re
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rich.console import Console, ConsoleOptions, RenderResult
from rich.markup import escape
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from hpcvar.report.runinfo import run_plots, run_result, run_warnings
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


class TermConsole(Console):
    """The console of a terminal: a table gets one unit per column (named in its header, the same for a median
    and its interval), numbers are never cut or wrapped, and a table wider than the terminal drops its last
    columns with a note naming them (a pipe, ``| cat``, prints every column)."""

    def print(self, *objects: Any, **kwargs: Any) -> None:
        notes: list[str] = []
        for o in objects:
            if isinstance(o, Table):
                notes += fit_table(o, self)
        super().print(*objects, **kwargs)
        for n in notes:
            super().print(n, markup=False, style="dim")


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
        return self.text(scale, _plain_number)

    def text(self, scale: float, fmt: Any) -> str:
        """Number(s) in the unit of size ``scale``, each written by ``fmt``; an interval 'lo-hi' (' to ' when
        an end is negative)."""
        if self.missing():
            return "-"
        ends = [self.value] if self.hi is None else [self.value, self.hi]
        vals = [fmt(float(v) / scale) for v in ends if v is not None]
        return (" to " if any(v.startswith("-") for v in vals) else "-").join(vals)


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


def _typed_cells(c: Any) -> list[Cell] | None:
    """The typed cells of a column whose cells are all typed cells of one family or empty (else None)."""
    cells = c._cells
    if not cells or not all(isinstance(x, Cell) or str(x).strip() in _EMPTY_CELLS for x in cells):
        return None
    typed = [x for x in cells if isinstance(x, Cell)]
    return typed if typed and len({x.family for x in typed}) == 1 else None


def column_unit(cells: list[Cell]) -> str:
    """The one unit of a column, chosen from its values (never per cell), by the report's rule
    (hpcvar.report.humanize.choose_unit): a size in the largest unit every value is a whole number of (1 B..4 MiB
    stays in B); a time or a rate in the largest unit at least half of its values (both ends of an interval)
    are 1 or more of, and its smallest 0.01 or more of (1.2 us..2 ms: us)."""
    from hpcvar.report.humanize import choose_unit

    values = [float(v) for x in cells if not x.missing() for v in (x.value, x.hi) if v is not None]
    return choose_unit(cells[0].family, values)[0]


def _column_units(t: Table) -> dict[int, tuple[str, float]]:
    """Each typed column's index -> (unit, size): one unit per column; a column of intervals (a median's CI) and
    the typed column on its left share one."""
    typed = {i: cells for i, c in enumerate(t.columns) if (cells := _typed_cells(c)) is not None}
    groups: list[list[int]] = []
    grouped: set[int] = set()
    for i in sorted(typed):  # an interval column (a median's CI) shares the unit of the typed column on its left
        left = i - 1
        if (i not in grouped and left in typed and left not in grouped and any(x.hi is not None for x in typed[i])
                and typed[left][0].family == typed[i][0].family):
            groups.append([left, i])
            grouped |= {left, i}
    groups += [[i] for i in typed if i not in grouped]
    out = {}
    for g in groups:
        cells = [x for i in g for x in typed[i]]
        unit = column_unit(cells)
        for i in g:
            out[i] = (unit, dict(FAMILY_UNITS[cells[0].family])[unit])
    return out


def _human_number(v: float) -> str:
    """3 significant digits for people, whole numbers from 100 up, never an exponent: 0.000512, 1.7, 12.5, 2500."""
    if v == 0 or abs(v) >= 100:
        return f"{v:.0f}"
    import numpy as np

    return np.format_float_positional(v, precision=3, unique=True, fractional=False, trim="-")


def _unit_columns(t: Table, fmt) -> None:
    """Typed columns -> text in one unit each (``fmt(value_in_unit)``), the unit named in the header."""
    for i, (unit, scale) in _column_units(t).items():
        c = t.columns[i]
        c._cells = [x.text(scale, fmt) if isinstance(x, Cell) else str(x) for x in c._cells]
        c.header = f"{c.header} ({unit})" if isinstance(c.header, str) else c.header
        c.justify = "right"


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
    _unit_columns(t, _plain_number)


def _numeric(text: str) -> bool:
    return bool(_NUMBER.fullmatch(text.strip()))


_NUM = r"[-+]?[0-9][0-9.,]*( ?(%|x|/s|[a-zA-Z]{1,3}(/s)?))?"
_NUMBER = re.compile(rf"{_NUM}((-| to ){_NUM})?|-|n/a")


def fit_table(t: Table, console: Console) -> list[str]:
    """``t`` for a terminal of ``console.width`` columns: one unit per typed column (3 significant digits),
    numbers never cut or wrapped (their column is as wide as its widest number), text wrapped; when even so the
    table is wider than the terminal, its last columns are dropped and the returned note names them."""
    if t.show_header:
        _unit_columns(t, _human_number)
    numbers = {}  # column index -> (width of its widest number, of its header on one line, of its longest word)
    for i, c in enumerate(t.columns):
        texts = [str(x) for x in c._cells if not isinstance(x, Table | Text)]
        if texts and len(texts) == len(c._cells) and all(_numeric(x) for x in texts):
            numbers[i] = (max(len(x) for x in texts), len(str(c.header)),
                          max([len(w) for w in str(c.header).split()], default=0))
        c.no_wrap = False
        c.overflow = "fold"
    for headers_whole in (True, False):  # a number column is never narrowed; its header wraps when needed
        for i, (cells, header, word) in numbers.items():
            t.columns[i].width = max(cells, header if headers_whole else word)
        if _min_width(t, console) <= console.width:
            break
    dropped: list[str] = []
    while len(t.columns) > 2 and _min_width(t, console) > console.width:
        dropped.insert(0, str(t.columns[-1].header))
        t.columns.pop()
    if not dropped:
        return []
    return [f"({len(dropped)} column(s) not shown at {console.width} columns: {', '.join(dropped)}; widen the "
            "terminal, or pipe the output ('| cat') for every column)"]


# a column of text is not narrowed below this many characters (its longest word, if shorter), so that it wraps
# into words rather than a letter a line
TEXT_MIN_WIDTH = 12


def _min_width(t: Table, console: Console) -> int:
    """The narrowest ``t`` can be printed: its number columns whole, its text columns wrapped down to
    ``TEXT_MIN_WIDTH`` (or their longest word), plus padding and borders."""
    widths = []
    for c in t.columns:
        if c.width is not None:
            widths.append(c.width)
            continue
        words = [len(w) for x in [c.header, *c._cells] if isinstance(x, str) for w in Text.from_markup(x).plain.split()]
        nested = [Measurement.get(console, console.options, x).minimum for x in c._cells if not isinstance(x, str)]
        widths.append(max([min(max(words, default=1), TEXT_MIN_WIDTH)] + nested))
    pad = t.padding[1] + t.padding[3] if len(t.padding) == 4 else 2
    return sum(widths) + len(widths) * pad + (len(widths) + 1 if t.box else 0) + (0 if t.show_edge or not t.box
                                                                                   else -2)


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
        return TermConsole(stderr=stderr, highlight=False)
    return PipeConsole(stderr=stderr, highlight=False, width=PIPE_WIDTH, soft_wrap=True, no_color=True,
                       color_system=None)


def render_run(console: Console, run: Run) -> None:
    """A stored run through its kind's renderer (hpcvar.results.kinds; the result of a kind without one is
    printed as data), then what every view says, here once: the run's warnings, its figures and where it is
    stored."""
    from hpcvar.results.kinds import kind_of

    kind = kind_of(run.info.get("command"))
    fn = kind.view("render") if kind else None
    if run.info.get("command") == "characterize":
        fn = render_characterization
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
    elif _draws_when_asked(run):
        console.print(f"figures: none drawn (add --plots, or 'hpcvar report {run.id}' draws them)", markup=False,
                      soft_wrap=True)
    console.print(f"stored in {run.path}", markup=False, soft_wrap=True)


def _draws_when_asked(run: Run) -> bool:
    """A run whose figures were not drawn (the simulators draw them only when asked) and are not there."""
    params = run.info.get("params") or {}
    return params.get("plots") is False and not params.get("plot_stem") and not any(
        (run.path / "plots").glob("*.png"))


# how many headlines of each step the characterization's table shows
STEP_HEADLINES = 2


def render_characterization(console: Console, run: Run) -> None:
    """A characterization: its one-line answer, then a table of its steps, each with its status, its run, how
    long it took and its first headlines (label, value, judgement) or why it did not run."""
    result = run_result(run)
    answer = result.get("answer") or {}
    if answer.get("line"):
        console.print(f"[bold]{escape(answer['line'])}[/]")
    children = {c.id: c for c in run.children()}
    t = Table(title="Steps", title_justify="left")
    for col in ("step", "status", "run", "time", "headlines"):
        t.add_column(col)
    for step in result.get("steps") or []:
        child = children.get(str(step.get("run")))
        t.add_row(str(step.get("name")), str(step.get("status")), str(step.get("run") or "-"),
                  seconds(step.get("elapsed_s")), _step_headlines(step, child))
    console.print(t)
    if result.get("report"):
        console.print(f"report: {result['report']}", markup=False, soft_wrap=True)


def _step_headlines(step: dict, child: Run | None) -> str:
    """A step's first headlines, '; '-separated ('label: value (status)'), or why it has none."""
    from hpcvar.errors import HpcvarError
    from hpcvar.report.plots import without_figures
    from hpcvar.report.sections import section_for

    if child is None:
        return str(step.get("reason") or step.get("error") or "")
    try:
        with without_figures():
            sec = section_for(child)
    except HpcvarError as e:
        return f"(no section: {e.what})"
    heads = sec.headlines[:STEP_HEADLINES] if sec else []
    more = len(sec.headlines) - len(heads) if sec else 0
    text = "; ".join(f"{h.label}: {h.value} ({h.status})" for h in heads)
    return text + (f" (+{more} more)" if more > 0 else "")
