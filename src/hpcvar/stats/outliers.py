"""Which of a set of nodes (or links) stands out: robust z-scores with a stated threshold, and a confidence rule.

The rule (docs/screen.md, "The outlier rule"), for one metric over n >= 3 items (nodes or links), each with a
value x_i and its own 95% confidence interval [lo_i, hi_i]:

1. Modified z-score (Iglewicz & Hoaglin 1993, "How to Detect and Handle Outliers"):
   z_i = 0.6745 (x_i - median) / MAD', a candidate when |z_i| > 3.5 on the metric's bad side (a slow link, a
   noisy node; a faster node is not a fault). MAD' = max(MAD, floor x |median|, abs_floor): with few items the
   MAD can be tiny (four identical links), and a difference of 1% would then score like a broken link; the floor
   is the smallest spread the metric is assumed to have, so the smallest deviation that can be an outlier is
   3.5 / 0.6745 x floor = 5.19 x floor of the median (each metric states its floors).
2. Never an outlier when its own CI overlaps the rest: the rest are the items that are no candidates; their
   interval is the 95% CI of the median of their values, widened to the median of their own CIs (the
   precision of a typical item). A candidate whose CI overlaps that interval cannot be told from the rest at
   the precision measured, and is not flagged.

Median and MAD over all items resist up to half of them being bad; below 3 items there is no rest to compare
with, and nothing is flagged (expectations still judge each item; hpcvar.expect).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hpcvar.stats.summary import MODIFIED_Z_THRESHOLD, mad, median_ci

Z_SCALE = 0.6745  # Phi^-1(3/4): makes MAD comparable to a standard deviation for normal data
MIN_ITEMS = 3


@dataclass(frozen=True)
class Flag:
    """The verdict on one item: its z-score, whether it is a candidate and whether it is flagged."""

    z: float
    candidate: bool  # |z| above the threshold on the bad side
    outlier: bool  # a candidate whose CI does not overlap the rest's interval
    rest_median: float  # median of the other items' values (the reference it is shown beside)
    rest_lo: float  # the rest's interval (see the module docstring)
    rest_hi: float


def modified_z(x: np.ndarray, floor: float = 0.0, abs_floor: float = 0.0) -> np.ndarray:
    """0.6745 (x - median) / max(MAD, floor |median|, abs_floor); zeros when every spread is 0."""
    x = np.asarray(x, dtype=float)
    med = float(np.median(x))
    spread = max(mad(x), floor * abs(med), abs_floor)
    if spread <= 0:
        return np.zeros_like(x)
    return Z_SCALE * (x - med) / spread


def rest_interval(values: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> tuple[float, float]:
    """The rest's 95% interval: the CI of the median of their values, widened to their median CI bounds."""
    values, lo, hi = (np.asarray(a, dtype=float) for a in (values, lo, hi))
    clo, chi = median_ci(values)
    return min(clo, float(np.nanmedian(lo))), max(chi, float(np.nanmedian(hi)))


def flag(values, lo, hi, higher_is_worse: bool, floor: float = 0.0, abs_floor: float = 0.0,
         threshold: float = MODIFIED_Z_THRESHOLD) -> list[Flag]:
    """The rule above for every item; items with a NaN value are never flagged (and are left out of the rest)."""
    values, lo, hi = (np.asarray(a, dtype=float) for a in (values, lo, hi))
    n = values.size
    ok = np.isfinite(values)
    out = [Flag(float("nan"), False, False, float("nan"), float("nan"), float("nan")) for _ in range(n)]
    if ok.sum() < MIN_ITEMS:
        return out
    z = np.full(n, np.nan)
    z[ok] = modified_z(values[ok], floor, abs_floor)
    sign = 1.0 if higher_is_worse else -1.0
    cand = ok & (sign * z > threshold)
    rest = ok & ~cand
    if not rest.any():
        return out
    rlo, rhi = rest_interval(values[rest], lo[rest], hi[rest])
    for i in range(n):
        others = rest & (np.arange(n) != i)
        rmed = float(np.median(values[others])) if others.any() else float("nan")
        overlaps = bool(lo[i] <= rhi and hi[i] >= rlo) if np.isfinite(lo[i]) and np.isfinite(hi[i]) else True
        out[i] = Flag(float(z[i]), bool(cand[i]), bool(cand[i]) and not overlaps, rmed, rlo, rhi)
    return out
