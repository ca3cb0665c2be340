"""Rich tables for the terminal: the latency renderer, and ``render_run``, the one way a stored run is shown.

A kind's renderer (``render=`` in hpcvar.kinds) takes ``(console, run)`` and reads the stored Run (its
``info["result"]``, its tables): a command prints its run through ``render_run`` once the run is stored, and
``hpcvar runs show`` ends with the same call, so both show the same view.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

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


def plain_table(t: Table) -> Table:
    """``t`` without box drawing, every cell on one line and never cut (nested tables too)."""
    t.box = None
    t.show_edge = False
    t.expand = False
    for c in t.columns:
        c.no_wrap = True
        c.overflow = "ignore"
        for cell in c._cells:
            if isinstance(cell, Table):
                plain_table(cell)
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


def format_interval_ns(lo: float, hi: float) -> str:
    """'1.70-1.79 us': both ends in the unit of the upper end."""
    unit = format_time_ns(hi).split()[-1]
    scale = {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}[unit]
    return f"{lo / scale:.3g}-{hi / scale:.3g} {unit}"


def render_latency(console: Console, run: Run) -> None:
    result = run.info["result"]
    t = Table(title="Ping-pong, one-way latency", title_justify="left")
    for col in ("size", "n", "median", "95% CI", "p99", "p99.9", "max", "bandwidth"):
        t.add_column(col, justify="right", no_wrap=True)
    for r in result["sizes"]:
        t.add_row(format_size(r["size"]), str(r["n"]), format_time_ns(r["median_ns"]),
                  format_interval_ns(*r["median_ci_ns"]), format_time_ns(r["p99_ns"]),
                  format_time_ns(r["p99_9_ns"]), format_time_ns(r["max_ns"]),
                  format_rate_bytes(r["bw_bytes_per_s"]) if r["size"] else "-")
    console.print(t)
    if result.get("run"):
        console.print(f"stored in {result['run']}")


def render_run(console: Console, run: Run) -> None:
    """A stored run through its kind's renderer (hpcvar.kinds); the result of a kind without one is printed as
    data."""
    from hpcvar.kinds import kind_of

    kind = kind_of(run.info.get("command"))
    fn = kind.view("render") if kind else None
    if fn:
        fn(console, run)
    else:
        from rich.pretty import Pretty

        console.print(Pretty(run.info.get("result")))
