"""Comparing two runs (or two characterizations) metric by metric.

For every metric both runs have, the raw samples are compared with the
two-sided Mann-Whitney U test (scipy), the effect size is Cliff's delta
(= rank-biserial correlation, 2U/(n1 n2) - 1; |d| >= 0.33 is "medium" after
Romano et al. 2006), and p-values are corrected for the number of metrics with
Holm's step-down method. A metric is a *degradation* when all three hold:
  corrected p < alpha (default 0.01),
  the median moved in the bad direction by more than --threshold (default 10%),
  |Cliff's delta| >= --min-effect (default 0.33).
The last two keep thousands of samples from flagging differences too small to matter
(two runs of the same machine differ by a few percent).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hpcvar.errors import UsageError
from hpcvar.metadata import machine_key
from hpcvar.results.schema import SCHEMA_VERSION


@dataclass
class Metric:
    name: str  # unique within a run, e.g. "latency oneway_ns size=8"
    samples: np.ndarray
    higher_is_worse: bool = True
    unit: str = ""
    # a headline metric: what 'hpcvar history' follows by default (compare tests every metric). A kind marks
    # False what is too erratic from run to run to follow alone (the median of a bimodal distribution).
    headline: bool = True
    # the smallest move of the median, in the metric's unit, that can be a change (0: none). A share that is 0
    # on a good night (the CPU time a quota throttled) moves by an infinite relative change to 0.05 %: a move
    # within the floor is never degraded or improved (compare, history) and reads '=' in history
    floor: float = 0.0


def metrics_of(run) -> dict[str, Metric]:
    from hpcvar.results.kinds import kind_of

    if run.info.get("command") == "characterize":
        out: dict[str, Metric] = {}
        seen: dict[str, int] = {}
        for child in run.children():
            step = child.info.get("params", {}).get("step") or child.info.get("command")
            seen[step] = seen.get(step, 0) + 1
            if seen[step] > 1:  # a step with several runs (sharing: one per scheme), in their order
                step = f"{step}#{seen[step]}"
            for name, m in metrics_of(child).items():
                out[f"{step}: {name}"] = Metric(f"{step}: {name}", m.samples, m.higher_is_worse, m.unit, m.headline,
                                                m.floor)
        return out
    kind = kind_of(run.info.get("command"))
    fn = kind.view("metrics") if kind else None
    return {m.name: m for m in fn(run)} if fn else {}


def cliffs_delta_from_u(u: float, n1: int, n2: int) -> float:
    return 2.0 * u / (n1 * n2) - 1.0


def holm(pvalues: list[float]) -> list[float]:
    """Holm's step-down adjusted p-values (monotone, capped at 1)."""
    m = len(pvalues)
    order = np.argsort(pvalues)
    adj = np.empty(m)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        adj[i] = running
    return adj.tolist()


def check_comparable(base, cur, force: bool) -> list[str]:
    """Reasons the two runs should not be compared (empty when fine)."""
    reasons = []
    for r in (base, cur):
        if r.info.get("schema_version") != SCHEMA_VERSION:
            reasons.append(f"run {r.id} has schema version {r.info.get('schema_version')}, not {SCHEMA_VERSION}")
    mb, mc = base.info.get("metadata", {}), cur.info.get("metadata", {})
    if machine_key(mb) != machine_key(mc):
        reasons.append(f"the runs come from different machines ({machine_key(mb)} vs {machine_key(mc)})")
    if base.info.get("command") != cur.info.get("command"):
        reasons.append(f"the runs are of different commands ({base.info.get('command')} vs "
                       f"{cur.info.get('command')})")
    if reasons and not force:
        raise UsageError("; ".join(reasons), "BASELINE CURRENT", "Compare runs of one machine and command, or add "
                         "--force to compare anyway")
    return reasons


def test_samples(a: np.ndarray, b: np.ndarray) -> dict:
    """The comparison of samples ``b`` (current) with ``a`` (baseline): two-sided Mann-Whitney U p-value, Cliff's
    delta (> 0: ``b`` tends to be larger), the medians and the change of the median in percent. The one test
    ``hpcvar compare`` and ``hpcvar history`` (its change points) apply."""
    from scipy.stats import mannwhitneyu

    res = mannwhitneyu(b, a, alternative="two-sided")
    delta = cliffs_delta_from_u(float(res.statistic), b.size, a.size)
    med_a, med_b = float(np.median(a)), float(np.median(b))
    change = (med_b - med_a) / med_a if med_a else float("inf") if med_b else 0.0
    return {"baseline_median": med_a, "current_median": med_b, "change_pct": 100.0 * change,
            "cliffs_delta": delta, "p_value": float(res.pvalue), "n_baseline": int(a.size), "n_current": int(b.size)}


def verdict(row: dict, p_holm: float, higher_is_worse: bool, alpha: float = 0.01, threshold: float = 0.10,
            min_effect: float = 0.33, floor: float = 0.0) -> str:
    """degraded, improved or unchanged: significant after Holm (``p_holm`` < ``alpha``), the median moved by more
    than ``threshold`` (and by more than the metric's ``floor`` in its unit) and |Cliff's delta| >= ``min_effect``,
    in the bad or the good direction."""
    sign = 1.0 if higher_is_worse else -1.0
    moved = abs(row["current_median"] - row["baseline_median"]) > floor
    worse = moved and sign * row["change_pct"] / 100.0 > threshold and sign * row["cliffs_delta"] >= min_effect
    better = moved and -sign * row["change_pct"] / 100.0 > threshold and -sign * row["cliffs_delta"] >= min_effect
    sig = p_holm < alpha
    return "degraded" if sig and worse else "improved" if sig and better else "unchanged"


def compare_runs(base, cur, alpha: float = 0.01, threshold: float = 0.10, min_effect: float = 0.33,
                 force: bool = False) -> dict:
    forced = check_comparable(base, cur, force)
    mb, mc = metrics_of(base), metrics_of(cur)
    names = [n for n in mb if n in mc and mb[n].samples.size > 1 and mc[n].samples.size > 1]
    if not names:
        raise UsageError("the two runs have no metric in common", "BASELINE CURRENT",
                         "Compare two runs of the same benchmark or two characterizations")
    rows: list[dict] = []
    for n in names:
        rows.append({"metric": n, "unit": mb[n].unit, **test_samples(mb[n].samples, mc[n].samples),
                     "higher_is_worse": mb[n].higher_is_worse, "floor": mb[n].floor})
    for row, padj in zip(rows, holm([r["p_value"] for r in rows]), strict=True):
        row["p_holm"] = padj
        row["verdict"] = verdict(row, padj, row["higher_is_worse"], alpha, threshold, min_effect, row["floor"])
    return {"baseline": str(base.path), "current": str(cur.path), "alpha": alpha, "threshold_pct": 100 * threshold,
            "min_effect": min_effect, "forced_despite": forced, "metrics": rows,
            "degraded": [r["metric"] for r in rows if r["verdict"] == "degraded"],
            "improved": [r["metric"] for r in rows if r["verdict"] == "improved"]}
