"""Plot helpers shared by every figure: one style, PNG + SVG, written atomically.

Use ``fig, ax = figure()`` then ``save(fig, run.plots_dir() / "name")``: writes
name.png (for the HTML report and the terminal user) and name.svg.

A report never rewrites a stored run: while ``hpcvar report`` draws a run's figures it sets ``redirect(dir)``,
and every ``save`` then writes into that directory (file names prefixed with the run's directory name)
instead of the run's ``plots/``, and only the PNG the report embeds.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from hpcvar.results.store import atomic_write_bytes

if TYPE_CHECKING:
    from matplotlib.typing import RcKeyType

STYLE: dict[RcKeyType, Any] = {
    "figure.figsize": (6.4, 4.0),
    "figure.dpi": 100,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "font.size": 10,
}


_REDIRECT: contextvars.ContextVar[Path | None] = contextvars.ContextVar("hpcvar_plots_redirect", default=None)
_FORMATS: contextvars.ContextVar[tuple[str, ...] | None] = contextvars.ContextVar("hpcvar_plots_formats",
                                                                                  default=None)


@contextlib.contextmanager
def redirect(directory: Path, formats: tuple[str, ...] | None = ("png",)) -> Iterator[Path]:
    """Within the block, figures saved for a run go to ``directory`` (created) and not to the run, in
    ``formats`` only (default: the PNG a report embeds; None: what each ``save`` asks)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    token, ftoken = _REDIRECT.set(directory), _FORMATS.set(formats)
    try:
        yield directory
    finally:
        _REDIRECT.reset(token)
        _FORMATS.reset(ftoken)


_NO_FIGURES: contextvars.ContextVar[bool] = contextvars.ContextVar("hpcvar_no_figures", default=False)


@contextlib.contextmanager
def without_figures() -> Iterator[None]:
    """Within the block, ``save`` writes nothing (the paths it returns do not exist): for a view that needs a
    run's section for its headlines only (``hpcvar runs show`` of a characterization)."""
    token = _NO_FIGURES.set(True)
    try:
        yield
    finally:
        _NO_FIGURES.reset(token)


_BASELINES: contextvars.ContextVar[dict | None] = contextvars.ContextVar("hpcvar_baselines", default=None)


@contextlib.contextmanager
def baselines(pairs: dict) -> Iterator[None]:
    """Within the block, ``baseline_for(run)`` gives the run's counterpart in a baseline ({run path: Run})."""
    token = _BASELINES.set(pairs)
    try:
        yield
    finally:
        _BASELINES.reset(token)


def baseline_for(run):
    """The baseline counterpart of ``run`` set by the report (None outside a report or without one)."""
    pairs = _BASELINES.get()
    return pairs.get(str(run.path)) if pairs else None


def target(stem: Path) -> Path:
    """Where ``save(fig, stem)`` writes: ``stem`` itself, or its redirected place (``<dir>/<run>-<name>``)."""
    d = _REDIRECT.get()
    if d is None:
        return Path(stem)
    stem = Path(stem)
    run_dir = stem.parent.parent.name if stem.parent.name == "plots" else stem.parent.name
    return d / f"{run_dir}-{stem.name}"


def figure(nrows: int = 1, ncols: int = 1, **kw):
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(nrows, ncols, **kw)
    return fig, ax


def plain_number(v: float) -> str:
    """A tick label without exponent: 0.002, 0.5, 6, 20, 3000 (a value of 1e5 or more keeps its exponent)."""
    import numpy as np

    if v == 0 or not np.isfinite(v):
        return "0" if v == 0 else ""
    if abs(v) >= 1e5 or abs(v) < 1e-3:
        return f"{v:.0e}".replace("e+0", "e").replace("e-0", "e-")
    return np.format_float_positional(v, precision=3, unique=True, fractional=False, trim="-")


# a log axis spanning at most this many decades (and within 1e-3..1e5) is labelled with plain numbers
PLAIN_LOG_DECADES = 5.0


def plain_log_ticks(fig) -> None:
    """Every log axis of ``fig`` with matplotlib's default labels, over few decades, labelled as people write
    numbers: '6' and '20', never '6×10^0'; minor ticks labelled 2, 3 and 5 of each decade when the axis spans
    less than a decade, 2 and 5 under two decades, none beyond, so that labels never overlap. Axes with their
    own formatter keep it."""
    import math

    from matplotlib.ticker import FuncFormatter, LogFormatterSciNotation, NullFormatter

    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            if axis.get_scale() != "log" or not isinstance(axis.get_major_formatter(), LogFormatterSciNotation):
                continue
            lo, hi = sorted(axis.get_view_interval())
            if lo <= 0 or not math.isfinite(hi):
                continue
            decades = math.log10(hi / lo)
            if decades > PLAIN_LOG_DECADES or lo < 1e-3 or hi >= 1e5:
                axis.set_minor_formatter(NullFormatter())
                continue
            axis.set_major_formatter(FuncFormatter(lambda v, _: plain_number(v)))
            subs = (2, 3, 5) if decades < 1 else (2, 5) if decades < 2 else ()
            axis.set_minor_formatter(FuncFormatter(lambda v, _, subs=subs: plain_number(v) if _mantissa(v) in subs
                                                   else "") if subs else NullFormatter())


def _mantissa(v: float) -> int:
    """The leading digit of a minor tick of a log axis: 3 for 0.03, 30 and 3000."""
    import math

    return round(v / 10 ** math.floor(math.log10(v) + 1e-9)) if v > 0 else 0


def cell_text_colour(im, v: float) -> str:
    """Black or white, whichever reads better on the colour ``im`` paints ``v`` with (WCAG relative luminance
    of the cell: black on a light cell such as viridis' yellow, white on a dark one)."""
    r, g, b, _ = im.cmap(im.norm(v))

    def lin(c: float) -> float:
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    lum = 0.2126 * lin(r) + 0.7152 * lin(g) + 0.0722 * lin(b)
    return "black" if (lum + 0.05) / 0.05 >= 1.05 / (lum + 0.05) else "white"


def label_cells(ax, im, grid, fmt=lambda v: f"{v:.3g}", fontsize: int = 8) -> None:
    """Write each finite value of ``grid`` in its heat-map cell, in the text colour its cell's colour needs."""
    import numpy as np

    for (i, j), v in np.ndenumerate(np.ma.filled(np.ma.masked_invalid(grid), np.nan)):
        if np.isfinite(v):
            ax.text(j, i, fmt(v), ha="center", va="center", fontsize=fontsize, color=cell_text_colour(im, v))


def legend_overlap(fig) -> int:
    """How many plotted data points (line vertices and segment midpoints, scatter offsets, bar corners) lie
    under a legend inside its axes. Needs a drawn figure."""
    import numpy as np

    renderer = fig.canvas.get_renderer()
    total = 0
    for ax in fig.axes:
        leg = ax.get_legend()
        if leg is None or not leg.get_visible():
            continue
        lb = leg.get_window_extent(renderer)
        ab = ax.get_window_extent(renderer)
        pts = []
        for line in ax.get_lines():
            xy = np.asarray(line.get_xydata(), dtype=float)
            if xy.size:
                d = ax.transData.transform(xy)
                pts.append(d)
                if len(d) > 1:
                    pts.append((d[1:] + d[:-1]) / 2)
        for coll in ax.collections:
            off = coll.get_offsets()
            if len(off) and coll.get_offset_transform() is not None:
                pts.append(coll.get_offset_transform().transform(np.asarray(off, dtype=float)))
        for patch in ax.patches:
            bb = patch.get_window_extent(renderer)
            pts.append(np.array([[bb.x0, bb.y1], [bb.x1, bb.y1], [(bb.x0 + bb.x1) / 2, bb.y1]]))
        if not pts:
            continue
        d = np.concatenate(pts)
        d = d[np.isfinite(d).all(axis=1)]
        inside_ax = (d[:, 0] >= ab.x0) & (d[:, 0] <= ab.x1) & (d[:, 1] >= ab.y0) & (d[:, 1] <= ab.y1)
        under = (d[:, 0] >= lb.x0) & (d[:, 0] <= lb.x1) & (d[:, 1] >= lb.y0) & (d[:, 1] <= lb.y1)
        total += int((inside_ax & under).sum())
    return total


def _place_legends(fig) -> int:
    """Move every legend that covers data outside its axes (right of it); returns what still overlaps."""
    if not any(ax.get_legend() is not None for ax in fig.axes):
        return 0  # nothing to place: no draw (a draw of 20,000 points costs about a second here)
    fig.canvas.draw()
    if legend_overlap(fig) == 0:
        return 0
    renderer = fig.canvas.get_renderer()
    for ax in fig.axes:
        leg = ax.get_legend()
        if leg is None:
            continue
        lb, ab = leg.get_window_extent(renderer), ax.get_window_extent(renderer)
        if lb.x0 >= ab.x1 or lb.y1 <= ab.y0:  # already outside
            continue
        handles, labels = ax.get_legend_handles_labels()
        size = leg.get_texts()[0].get_fontsize() if leg.get_texts() else 8
        ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0,
                  fontsize=size, frameon=False)
    fig.canvas.draw()
    return legend_overlap(fig)


DENSE_POINTS = 5000  # an artist with more points is drawn as an image inside the SVG (its axes and text stay vectors)


def _rasterize_dense(fig) -> None:
    """Lines and collections of more than DENSE_POINTS points drawn as images in a vector file: 20,000 markers
    were 2.4 MB of SVG paths (and seconds to write and to open) for what a 120 dpi image shows."""
    for ax in fig.axes:
        for art in [*ax.get_lines(), *ax.collections]:
            n = len(art.get_xydata()) if hasattr(art, "get_xydata") else len(art.get_offsets())
            if n > DENSE_POINTS:
                art.set_rasterized(True)


def save(fig, stem: Path, formats=("png", "svg")) -> list[Path]:
    """Save ``fig`` as stem.png / stem.svg (atomic); closes the figure. Returns the paths. In a report's
    ``redirect``: the run's own stem.png when it has one and no baseline is overlaid (not drawn again), else the
    PNG only, in the report's directory.

    A legend that covers plotted data is moved outside its axes first; the PNG records in its
    ``hpcvar-legend-overlap`` text chunk how many data points a legend still covers (0 after the move), so
    tests can check every figure of a report."""
    import io

    stored = Path(stem).with_suffix(".png")
    stem = target(stem)
    if _REDIRECT.get() is not None and not _BASELINES.get() and stored.is_file():
        plt.close(fig)  # a report, nothing overlaid: the figure the run stored when it was made, not drawn again
        return [stored]
    only = _FORMATS.get()
    if only is not None:
        formats = tuple(f for f in formats if f in only) or tuple(formats[:1])
    if _NO_FIGURES.get():
        plt.close(fig)
        return [stem.with_suffix(f".{fmt}") for fmt in formats]  # not written
    out = []
    with plt.rc_context(STYLE):
        plain_log_ticks(fig)
        fig.tight_layout()
        overlap = _place_legends(fig)
        for fmt in formats:
            if fmt == "svg":
                _rasterize_dense(fig)
            buf = io.BytesIO()
            meta = {"hpcvar-legend-overlap": str(overlap)} if fmt == "png" else None
            fig.savefig(buf, format=fmt, dpi=120 if fmt == "png" else None, bbox_inches="tight", metadata=meta)
            p = stem.with_suffix(f".{fmt}")
            atomic_write_bytes(p, buf.getvalue())
            out.append(p)
    plt.close(fig)
    return out
