"""Robust statistics used by every benchmark summary (see summary.py)."""

from hpcvar.stats.summary import (
    PERCENTILES,
    jain_index,
    mad,
    mean_ci,
    median_ci,
    median_ci_order,
    outlier_mask,
    summarize,
    variance_components,
)

__all__ = ["PERCENTILES", "jain_index", "mad", "mean_ci", "median_ci", "median_ci_order", "outlier_mask",
           "summarize", "variance_components"]
