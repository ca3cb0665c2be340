"""Plot helpers shared by every figure: one style, PNG + SVG, written atomically.

Use ``fig, ax = figure()`` then ``save(fig, run.plots_dir() / "name")``: writes
name.png (for the HTML report and the terminal user) and name.svg.
"""

from __future__ import annotations

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


def figure(nrows: int = 1, ncols: int = 1, **kw):
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(nrows, ncols, **kw)
    return fig, ax


def save(fig, stem: Path, formats=("png", "svg")) -> list[Path]:
    """Save ``fig`` as stem.png / stem.svg (atomic); closes the figure. Returns the paths."""
    import io

    stem = Path(stem)
    out = []
    with plt.rc_context(STYLE):
        fig.tight_layout()
        for fmt in formats:
            buf = io.BytesIO()
            fig.savefig(buf, format=fmt, dpi=120 if fmt == "png" else None)
            p = stem.with_suffix(f".{fmt}")
            atomic_write_bytes(p, buf.getvalue())
            out.append(p)
    plt.close(fig)
    return out
