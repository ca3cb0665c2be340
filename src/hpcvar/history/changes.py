"""Change points of a history, confirmed, with HPX-style symbols.

1. Candidates: PELT (ruptures, L2 cost, segments of at least ``MIN_SEGMENT`` runs) on each series' per-run
   medians but the last run's (which 3. judges: a change its run starts shows as a change point the next
   nights), in logarithm when every median is positive (a change is relative, as compare's threshold is),
   scaled by a robust spread of the series (1.4826 MAD of the successive differences / sqrt 2, unaffected by a
   step), with the penalty ``PENALTY_PER_LOG_N`` x ln(n) (BIC-like).
2. Confirmation: for each candidate, the pooled raw samples of the segment after it against those of the segment
   before it, with hpcvar compare's test and rule (two-sided Mann-Whitney U; Holm's correction over every test of
   the group, the last-run tests included; a median moved by more than the threshold and |Cliff's delta| at
   least min-effect), and the change must stand out of the run-to-run variation: its 95% bootstrap CI (4.,
   which resamples the runs) must not hold 0. Pooled samples alone would call any two nights of a machine whose
   runs differ (they do: docs/watch.md) different. Unconfirmed candidates are dropped, their neighbours merged
   and the rest tested again until every one left is confirmed.
3. The last run: tested the same way against the other runs since the last change (at least ``MIN_SEGMENT`` of
   them: with one, the run-to-run variation is unknown; two runs are hpcvar compare's case); confirmed, it starts
   a change (the command's exit code 3), which the next runs will show as a change point.
4. Symbols (HPX's performance CI, tools/perftests_ci/perftest/plot.py, as docs/watch.md reads it): a 95%
   bootstrap CI of the relative change of the level, (after / before) - 1, where a segment's level is the median
   of its runs' medians; each replicate resamples the runs of each segment (between-run variation) and draws
   each run's median from its own bootstrap distribution (within-run variation). Oriented so that positive is
   worse (slower, less bandwidth), it is classified as HPX does: ``??`` wider than 10%; ``=`` within +-1%;
   ``(=)`` within +-2%; ``?`` containing 0 within +-5%; then better ``(+) + ++ +++`` or worse ``(-) - -- ---``
   by how far the CI reaches (up to 1%, 5%, 10%, beyond). One reading of ours: HPX takes the better side
   whenever the CI's lower bound is at most 0 (so [-3%, +6%] reads "+"); here the side is that of the CI's
   centre.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from hpcvar.compare import holm, test_samples, verdict
from hpcvar.history.series import Group, Series

MIN_SEGMENT = 2  # runs: a lone run is never a segment (one disturbed night is not a change)
PENALTY_PER_LOG_N = 2.0  # PELT penalty = 2 ln(n) in units of the series' robust variance (BIC for a mean shift)
MAD_TO_SIGMA = 1.4826
BOOTSTRAP_REPLICATES = 1000  # HPX's compare_medians draws 1000
BOOTSTRAP_SEED = 20240917  # fixed: the same runs give the same symbols
CONFIDENCE = 0.95


@dataclass
class Change:
    metric: str
    at: int  # position of the first run after the change (0-based) in the group's series
    run: str  # that run's id
    started_utc: str
    before: tuple[int, int]  # [start, end) of the runs before
    after: tuple[int, int]  # [start, end) of the runs after
    test: dict  # hpcvar.compare.test_samples of the pooled samples (after against before)
    p_holm: float = 1.0
    verdict: str = "unchanged"  # degraded | improved | unchanged
    ratio_lo: float = math.nan  # 95% bootstrap CI of (level after / level before) - 1
    ratio_hi: float = math.nan
    diff_lo: float = math.nan  # 95% bootstrap CI of level after - level before, in the metric's unit
    diff_hi: float = math.nan
    symbol: str = ""
    latest: bool = False  # the last run against the runs since the last change
    within_runs: bool = False  # compare's test said changed, but the CI of the change holds 0: run-to-run variation

    @property
    def confirmed(self) -> bool:
        return self.verdict != "unchanged"

    def to_json(self) -> dict:
        return {"metric": self.metric, "at": self.at + 1, "run": self.run, "started_utc": self.started_utc,
                "runs_before": [self.before[0] + 1, self.before[1]], "runs_after": [self.after[0] + 1, self.after[1]],
                **self.test, "p_holm": self.p_holm, "verdict": self.verdict, "symbol": self.symbol,
                "change_ci_pct": [100 * self.ratio_lo, 100 * self.ratio_hi], "change_ci": [self.diff_lo, self.diff_hi],
                "latest": self.latest,
                "within_run_to_run_variation": self.within_runs}


def candidates(values: np.ndarray) -> list[int]:
    """Positions where PELT places a change in the per-run medians (each the first run of a new segment)."""
    import ruptures as rpt

    y = np.asarray(values, dtype=float)
    n = y.size
    if n < 2 * MIN_SEGMENT:
        return []
    if np.all(y > 0):
        y = np.log(y)
    d = np.diff(y)
    scale = MAD_TO_SIGMA * float(np.median(np.abs(d - np.median(d)))) / math.sqrt(2.0)
    floor = 1e-3 * max(float(np.median(np.abs(y))), 1e-12)  # a series flat to the last digit: no division by 0
    z = (y - float(np.median(y))) / max(scale, floor)
    bkps = rpt.Pelt(model="l2", min_size=MIN_SEGMENT, jump=1).fit(z.reshape(-1, 1)).predict(
        pen=PENALTY_PER_LOG_N * math.log(n))
    return [int(b) for b in bkps[:-1]]


def _pooled(s: Series, span: tuple[int, int]) -> np.ndarray:
    return np.concatenate([p.samples for p in s.points[span[0]:span[1]]])


def _spans(points: int, cuts: list[int]) -> list[tuple[int, int]]:
    edges = [0, *cuts, points]
    return list(zip(edges[:-1], edges[1:], strict=True))


def _tests(group: Group, cuts: dict[str, list[int]]) -> list[Change]:
    """Every current candidate of every series, and every series' last run, tested (not yet judged)."""
    out = []
    for s in group.series:
        spans = _spans(len(s.points), cuts[s.metric])
        for before, after in zip(spans[:-1], spans[1:], strict=True):
            out.append(_change(s, before, after))
        last = spans[-1]
        # the last run against the runs since the last change: at least MIN_SEGMENT of them, or their run-to-run
        # variation is unknown (two runs are hpcvar compare's case)
        if last[1] - last[0] >= MIN_SEGMENT + 1:
            out.append(_change(s, (last[0], last[1] - 1), (last[1] - 1, last[1]), latest=True))
    return out


def _change(s: Series, before: tuple[int, int], after: tuple[int, int], latest: bool = False) -> Change:
    p = s.points[after[0]]
    return Change(s.metric, after[0], p.run, p.started_utc, before, after,
                  test_samples(_pooled(s, before), _pooled(s, after)), latest=latest)


def detect(group: Group, alpha: float = 0.01, threshold: float = 0.10, min_effect: float = 0.33) -> None:
    """Fill each series' confirmed ``changes``, its ``latest`` test and its ``segments`` (see the module doc)."""
    # the last run is the latest question (3. in the module doc), never part of a candidate: with it, PELT put a
    # first noisy run's change two runs early (min segments), and the last run went untested
    cuts = {s.metric: candidates(np.array([p.value for p in s.points[:-1]])) for s in group.series}
    by_name = {s.metric: s for s in group.series}
    boot = {s.metric: _Bootstrap(s) for s in group.series}
    while True:
        tests = _tests(group, cuts)
        for t, padj in zip(tests, holm([t.test["p_value"] for t in tests]) if tests else [], strict=True):
            s = by_name[t.metric]
            t.p_holm = padj
            t.ratio_lo, t.ratio_hi, t.diff_lo, t.diff_hi = boot[t.metric].change_ci(t.before, t.after)
            # a move within the metric's floor (its unit) is no change, however large relative to a level of 0
            within_floor = s.floor > 0 and -s.floor <= t.diff_lo and t.diff_hi <= s.floor
            t.symbol = "=" if within_floor else symbol(t.ratio_lo, t.ratio_hi, s.higher_is_worse)
            t.verdict = verdict(t.test, padj, s.higher_is_worse, alpha, threshold, min_effect, s.floor)
            if t.verdict != "unchanged" and t.ratio_lo <= 0 <= t.ratio_hi:
                t.verdict = "unchanged"  # within the run-to-run variation: not a change of the machine
                t.within_runs = True
        dropped = {(t.metric, t.at) for t in tests if not t.latest and not t.confirmed}
        if not dropped:
            break
        cuts = {m: [c for c in cs if (m, c) not in dropped] for m, cs in cuts.items()}
    for s in group.series:
        s.segments = _spans(len(s.points), cuts[s.metric])
        s.changes = [t for t in tests if t.metric == s.metric and not t.latest]
        s.latest = next((t for t in tests if t.metric == s.metric and t.latest), None)


class _Bootstrap:
    """The bootstrap of one series: each run's median replicates drawn once (so every test of the series sees
    the same), segments' levels from them (runs resampled), seeded by the metric's name."""

    def __init__(self, s: Series):
        import zlib

        self.rng = np.random.default_rng([BOOTSTRAP_SEED, zlib.crc32(s.metric.encode())])
        self.meds = np.stack([_median_replicates(p.samples, self.rng, BOOTSTRAP_REPLICATES) for p in s.points])

    def level(self, span: tuple[int, int]) -> np.ndarray:
        runs = self.meds[span[0]:span[1]]  # runs x B
        pick = self.rng.integers(0, len(runs), size=(BOOTSTRAP_REPLICATES, len(runs)))  # the runs of each replicate
        return np.median(runs[pick, np.arange(BOOTSTRAP_REPLICATES)[:, None]], axis=1)

    def change_ci(self, before: tuple[int, int], after: tuple[int, int]) -> tuple[float, float, float, float]:
        """95% bootstrap CIs of (level after / level before) - 1 and of level after - level before, from the same
        replicates (the module doc says how they are drawn)."""
        a, b = self.level(before), self.level(after)
        q = (1 - CONFIDENCE) / 2
        dlo, dhi = np.quantile(b - a, [q, 1 - q])
        with np.errstate(divide="ignore", invalid="ignore"):
            rel = np.where(a != 0, (b - a) / np.abs(a), np.where(b == a, 0.0, np.sign(b - a) * np.inf))
        # from a level of 0 (a throttled share before a quota) the change is infinite: interpolating between two
        # infinite replicates gives NaN (inf - inf), so an order statistic is taken there
        lo, hi = np.quantile(rel, [q, 1 - q], method="linear" if np.isfinite(rel).all() else "inverted_cdf")
        return float(lo), float(hi), float(dlo), float(dhi)


def _median_replicates(x: np.ndarray, rng: np.random.Generator, b: int) -> np.ndarray:
    """``b`` draws of the bootstrap distribution of the median of ``x``, exactly and without resampling: the
    median of a resample is the order statistic x_(j) with P(median <= x_(j)) = P(Binomial(n, j/n) >= m),
    m = n // 2 + 1 (Efron & Tibshirani 1993, sec. 2.7)."""
    from scipy import stats as sps

    xs = np.sort(x)
    n = xs.size
    if n == 1:
        return np.full(b, xs[0])
    half = n // 2
    width = int(8 * math.sqrt(n)) + 2  # beyond 8 standard deviations of the binomial the CDF is 0 or 1
    j = np.arange(max(1, half - width), min(n, half + width) + 1)
    cdf = sps.binom.sf(half, n, j / n)  # P(Binomial(n, j/n) >= half + 1)
    idx = np.searchsorted(cdf, rng.random(b), side="left")
    return xs[j[np.minimum(idx, j.size - 1)] - 1]


def symbol(lo: float, hi: float, higher_is_worse: bool) -> str:
    """HPX's classification of the CI [lo, hi] of a relative change; positive is worse (oriented first)."""
    if not higher_is_worse:
        lo, hi = -hi, -lo
    if not (math.isfinite(lo) or math.isfinite(hi)):
        return "---" if lo > 0 else "+++" if hi < 0 else "??"
    if hi - lo > 0.10:
        return "??"
    if -0.01 <= lo <= 0 <= hi <= 0.01:
        return "="
    if -0.02 <= lo <= hi <= 0.02:
        return "(=)"
    if -0.05 <= lo <= 0 <= hi <= 0.05:
        return "?"
    if lo + hi < 0:  # better (the CI's centre below 0): by how far it reaches below 0
        return "(+)" if lo >= -0.01 else "+" if lo >= -0.05 else "++" if lo >= -0.10 else "+++"
    return "(-)" if hi <= 0.01 else "-" if hi <= 0.05 else "--" if hi <= 0.10 else "---"


SYMBOLS = [
    ("=", "no change: the 95% CI of the change lies within +-1%"),
    ("(=)", "probably no change: within +-2%"),
    ("?", "probably no change, but uncertain: the CI holds 0 within +-5%"),
    ("??", "cannot tell: the CI is wider than 10%"),
    ("(+) + ++ +++", "better: the CI reaches up to 1%, 5%, 10%, beyond 10% below no change"),
    ("(-) - -- ---", "worse: the CI reaches up to 1%, 5%, 10%, beyond 10% above no change"),
]
