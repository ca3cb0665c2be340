"""Summaries of raw samples: robust, from all samples, with uncertainty.

- Percentiles are taken from every sample (never percentiles of per-rank
  means; see PEERS.md on OSU's omb_get_stats), with numpy's default linear
  interpolation (Hyndman & Fan 1996, definition 7).
- MAD is the raw median absolute deviation (not scaled); ``mad_sigma`` is
  1.4826 * MAD, the consistent estimator of the standard deviation for normal
  data (Rousseeuw & Croux 1993).
- Outliers: modified z-score |0.6745 (x - median) / MAD| > 3.5 (Iglewicz &
  Hoaglin 1993, "How to Detect and Handle Outliers").
- The CI of the median is a percentile bootstrap (Efron & Tibshirani 1993)
  with a fixed seed, so that the same samples give the same interval.
  Above ``BOOTSTRAP_MAX_N`` samples the distribution-free order-statistic
  interval (binomial, Conover 1999 sec. 3.2) is used instead: exact coverage,
  no resampling cost.
"""

from __future__ import annotations

import numpy as np
from scipy import stats as sps

PERCENTILES = (50.0, 90.0, 99.0, 99.9)
MODIFIED_Z_THRESHOLD = 3.5  # Iglewicz & Hoaglin's recommended cut-off
MAD_TO_SIGMA = 1.4826  # 1 / Phi^-1(3/4)
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_MAX_N = 20000
BOOTSTRAP_SEED = 20081115  # fixed: the same samples give the same CI


def _pkey(p: float) -> str:
    return "p" + (f"{p:g}".replace(".", "_") if p != int(p) else str(int(p)))


def mad(x: np.ndarray) -> float:
    x = np.asarray(x, dtype=float)
    return float(np.median(np.abs(x - np.median(x)))) if x.size else float("nan")


def outlier_mask(x: np.ndarray) -> np.ndarray:
    """True where a sample is an outlier by the modified z-score."""
    x = np.asarray(x, dtype=float)
    if x.size == 0:
        return np.zeros(0, dtype=bool)
    med, m = np.median(x), mad(x)
    if m == 0:
        return x != med
    return np.abs(0.6745 * (x - med) / m) > MODIFIED_Z_THRESHOLD


def median_ci(x: np.ndarray, confidence: float = 0.95) -> tuple[float, float]:
    """Confidence interval of the median (bootstrap, or order statistics for large n)."""
    x = np.asarray(x, dtype=float)
    n = x.size
    if n == 0:
        return (float("nan"), float("nan"))
    if n == 1:
        return (float(x[0]), float(x[0]))
    if n > BOOTSTRAP_MAX_N:
        return median_ci_order(x, confidence)
    res = sps.bootstrap((x,), np.median, confidence_level=confidence, n_resamples=BOOTSTRAP_RESAMPLES,
                        method="percentile", vectorized=True, random_state=np.random.default_rng(BOOTSTRAP_SEED))
    return _around(float(np.median(x)), res.confidence_interval)


def _around(point: float, ci) -> tuple[float, float]:
    """A percentile-bootstrap interval widened, if need be, to hold its point estimate: the resampled medians
    are interpolated in another order of operations than the sample's, so an interval whose end is the point
    itself could miss it by one rounding step (a negative error bar), and with heavy ties a percentile
    interval can exclude the estimate outright. NaN ends (degenerate samples) stay NaN."""
    lo, hi = float(ci.low), float(ci.high)
    if np.isnan(lo) or np.isnan(hi):
        return (lo, hi)
    return (min(lo, point), max(hi, point))


def median_ci_order(x: np.ndarray, confidence: float = 0.95) -> tuple[float, float]:
    """The distribution-free confidence interval of the median from order statistics (binomial, Conover 1999
    sec. 3.2): exact coverage for any continuous distribution, no resampling (what ``median_ci`` uses for large
    samples, and ``hpcvar history`` for every run of every metric)."""
    xs = np.sort(np.asarray(x, dtype=float))
    n = xs.size
    if n == 0:
        return (float("nan"), float("nan"))
    alpha = 1 - confidence
    lo = int(sps.binom.ppf(alpha / 2, n, 0.5))
    hi = int(sps.binom.isf(alpha / 2, n, 0.5))
    return (float(xs[max(lo - 1, 0)]), float(xs[min(hi, n - 1)]))


def mean_ci(x: np.ndarray, confidence: float = 0.95) -> tuple[float, float]:
    """Confidence interval of the mean: percentile bootstrap (fixed seed), or Student's t above
    ``BOOTSTRAP_MAX_N`` samples (the central limit theorem holds by then)."""
    x = np.asarray(x, dtype=float)
    n = x.size
    if n == 0:
        return (float("nan"), float("nan"))
    if n == 1 or np.all(x == x[0]):
        return (float(x[0]), float(x[0]))
    if n > BOOTSTRAP_MAX_N:
        half = float(sps.t.ppf(0.5 + confidence / 2, n - 1) * np.std(x, ddof=1) / np.sqrt(n))
        return (float(np.mean(x)) - half, float(np.mean(x)) + half)
    res = sps.bootstrap((x,), np.mean, confidence_level=confidence, n_resamples=BOOTSTRAP_RESAMPLES,
                        method="percentile", vectorized=True, random_state=np.random.default_rng(BOOTSTRAP_SEED))
    return _around(float(np.mean(x)), res.confidence_interval)


def summarize(x, percentiles=PERCENTILES, ci: bool = True) -> dict:
    """All summary statistics of one set of samples, as a flat dict of floats.

    Keys: n, mean, median, min, max, stdev (ddof=1), variance, mad, mad_sigma,
    cv (stdev/mean), p50.. (from ``percentiles``), median_ci_lo/hi, outliers.
    """
    x = np.asarray(x, dtype=float)
    x = x[np.isfinite(x)]
    n = int(x.size)
    out: dict = {"n": n}
    if n == 0:
        nan = float("nan")
        out.update(mean=nan, median=nan, min=nan, max=nan, stdev=nan, variance=nan, mad=nan, mad_sigma=nan,
                   cv=nan, outliers=0, median_ci_lo=nan, median_ci_hi=nan)
        out.update({_pkey(p): nan for p in percentiles})
        return out
    mean = float(np.mean(x))
    stdev = float(np.std(x, ddof=1)) if n > 1 else 0.0
    m = mad(x)
    out.update(mean=mean, median=float(np.median(x)), min=float(np.min(x)), max=float(np.max(x)),
               stdev=stdev, variance=stdev**2, mad=m, mad_sigma=MAD_TO_SIGMA * m,
               cv=stdev / mean if mean else float("nan"), outliers=int(outlier_mask(x).sum()))
    for p, v in zip(percentiles, np.percentile(x, percentiles), strict=True):
        out[_pkey(p)] = float(v)
    if ci:
        out["median_ci_lo"], out["median_ci_hi"] = median_ci(x)
    return out


def jain_index(x) -> float:
    """Jain's fairness index (sum x)^2 / (n sum x^2): 1 when all equal, 1/n when one takes all."""
    x = np.asarray(x, dtype=float)
    if x.size == 0 or not np.any(x):
        return float("nan")
    return float(x.sum() ** 2 / (x.size * np.sum(x * x)))


def variance_components(groups: list) -> dict:
    """Between-run and within-run variance of samples grouped by run (one-way ANOVA terms).

    Returns within_var (pooled variance inside runs), between_var (variance of
    the run means), their ratio, the CV of the run means and the overall CV.
    """
    groups = [np.asarray(g, dtype=float) for g in groups if len(g)]
    if not groups:
        return {"runs": 0}
    means = np.array([g.mean() for g in groups])
    allx = np.concatenate(groups)
    dof = sum(g.size - 1 for g in groups)
    within = float(sum(((g - g.mean()) ** 2).sum() for g in groups) / dof) if dof > 0 else float("nan")
    between = float(np.var(means, ddof=1)) if means.size > 1 else 0.0
    grand = float(allx.mean())
    return {
        "runs": len(groups),
        "within_var": within,
        "between_var": between,
        "between_over_within": between / within if within else float("nan"),
        "cv_between": float(np.std(means, ddof=1) / grand) if means.size > 1 and grand else 0.0,
        "cv_overall": float(np.std(allx, ddof=1) / grand) if allx.size > 1 and grand else 0.0,
    }
