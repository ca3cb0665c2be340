"""Latency under long MPI queues (native/bench/queues.c; Underwood & Brightwell, Figures 1 and 2).

Two benchmarks share one native program (``hv_queues --mode posted|unexpected``):

- ``PostedQueue``: ping-pong latency when each rank has ``length`` extra
  receives posted, ``traversed`` percent of them in front of the receive that
  matches (``entries`` = round(length * traversed / 100), half up).
- ``UnexpectedQueue``: ping-pong latency when each rank has ``length``
  unexpected messages waiting and the latency receive is posted inside the
  timer.

One-way latency = round trip / 2. Every iteration is one sample.

Per-entry cost (``fit_slope``): ordinary least squares of a per-point statistic
(``--fit-stat``: median by default, or p10 / min on a busy host) of the one-way
latency against the number of entries (traversed entries for
``posted``, unexpected-queue length for ``unexpected``), per message size.
Per-point medians, not every sample: samples inside one point are not
independent (they share the scheduler state and the queue's memory layout),
so a fit on every sample would claim thousands of degrees of freedom it does
not have; the median also ignores the descheduling outliers of a busy host.
For ``posted`` the untraversed entries (length - entries) enter as a second
regressor when the sweep varies them independently (the paper's "simply having
a long queue" effect), so that the per-entry slope is not confused with it.
The CI is the t interval slope +- t(0.975, n - p) * se with se from the OLS
covariance s^2 (X'X)^-1 (n points, p parameters); it is absent (null) when
n <= p. The baseline is the same statistic over the pooled length-0 samples of
the fitted size.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import pandas as pd
from scipy import stats as sps

from hpcvar import metadata
from hpcvar.bench.runner import (
    MAX_PINGPONG_SIZE,
    BenchContext,
    Benchmark,
    Params,
    check_sizes_and_iters,
    run_benchmark,
)
from hpcvar.errors import UsageError
from hpcvar.kinds.queues import MAX_POSTED_LENGTH, MAX_UNEXPECTED_LENGTH
from hpcvar.results import RawFile, Run
from hpcvar.results.kinds import draw_plots
from hpcvar.stats import summarize
from hpcvar.units import format_size

MAX_SIZE = MAX_PINGPONG_SIZE  # larger payloads are not a queue question
# What an MPI keeps per posted receive or unexpected message besides the user's
# buffer (request object, matching entry): a generous 1 KiB for the memory estimate.
MPI_BYTES_PER_ENTRY = 1024
MEMORY_FRACTION = 0.5  # refuse when the estimate is above this share of MemAvailable
CONFIDENCE = 0.95
# The per-point statistic the slope is fitted on (--fit-stat). Queue costs add a
# deterministic CPU time to every sample; scheduler and interrupt noise only adds
# positive delays. The median is robust while fewer than half the samples are hit;
# on a host busier than its cores (ranks descheduled in most round trips) a low
# quantile or the minimum still estimates the undisturbed cost.
FIT_STATS = {"median": lambda x: float(np.median(x)), "p10": lambda x: float(np.percentile(x, 10)),
             "min": lambda x: float(np.min(x))}
SUMMARY_PERCENTILES = (10.0, 50.0, 90.0, 99.0, 99.9)


@dataclass(frozen=True)
class PostedParams(Params):
    """``hpcvar bench queues posted``'s parameters (run.json ``params``)."""

    lengths: tuple[int, ...]  # posted-queue lengths (extra receives per rank)
    traversed: tuple[int, ...]  # percent of the queue in front of the matching receive
    sizes: tuple[int, ...]  # message sizes in bytes
    any_source: bool  # every receive with MPI_ANY_SOURCE
    iters: int
    min_iters: int
    warmup: int
    time_per_point_s: float
    pin: bool
    fit_stat: str  # a key of FIT_STATS


@dataclass(frozen=True)
class UnexpectedParams(Params):
    """``hpcvar bench queues unexpected``'s parameters (run.json ``params``)."""

    lengths: tuple[int, ...]  # unexpected-queue lengths (messages waiting per rank)
    sizes: tuple[int, ...]  # sizes in bytes of the timed ping-pong
    iters: int
    min_iters: int
    warmup: int
    time_per_point_s: float
    pin: bool
    fit_stat: str  # a key of FIT_STATS


QP = TypeVar("QP", bound=PostedParams | UnexpectedParams)


def traversed_entries(length: int, pct: int) -> int:
    """round(length * pct / 100), half up, in integers (as native/bench/queues.c)."""
    return (length * pct + 50) // 100


def fit_slope(y, x, x2=None, confidence: float = CONFIDENCE) -> dict:
    """OLS of y on [1, x (, x2)]: slope of x with its t confidence interval.

    ``x2`` (optional second regressor) is used only when it is not collinear
    with [1, x]. Returns slope, slope_ci (lo, hi) or (nan, nan), intercept,
    slope2 and slope2_ci (nan when x2 was not used), n, dof, r2.
    """
    y = np.asarray(y, dtype=float)
    cols = [np.ones_like(y), np.asarray(x, dtype=float)]
    nan = float("nan")
    out = {"slope": nan, "slope_ci": (nan, nan), "intercept": nan, "slope2": nan, "slope2_ci": (nan, nan),
           "n": int(y.size), "dof": 0, "r2": nan}
    if x2 is not None:
        with_x2 = np.column_stack(cols + [np.asarray(x2, dtype=float)])
        if np.linalg.matrix_rank(with_x2) == 3:
            cols.append(np.asarray(x2, dtype=float))
    X = np.column_stack(cols)
    n, p = X.shape
    if n < 2 or np.linalg.matrix_rank(X) < p:
        return out  # x does not vary: no slope
    beta, *_ = np.linalg.lstsq(X, y, rcond=None)
    resid = y - X @ beta
    dof = n - p
    out.update(slope=float(beta[1]), intercept=float(beta[0]), dof=dof)
    ss_tot = float(np.sum((y - y.mean()) ** 2))
    out["r2"] = 1.0 - float(resid @ resid) / ss_tot if ss_tot > 0 else nan
    if p == 3:
        out["slope2"] = float(beta[2])
    if dof > 0:
        s2 = float(resid @ resid) / dof
        cov = s2 * np.linalg.inv(X.T @ X)
        t = float(sps.t.ppf(0.5 + confidence / 2, dof))
        se = np.sqrt(np.maximum(np.diag(cov), 0.0))
        out["slope_ci"] = (float(beta[1] - t * se[1]), float(beta[1] + t * se[1]))
        if p == 3:
            out["slope2_ci"] = (float(beta[2] - t * se[2]), float(beta[2] + t * se[2]))
    return out


def _none(v):
    """NaN -> None for JSON."""
    return None if v is None or (isinstance(v, float) and not np.isfinite(v)) else v


def _summary_row(x: np.ndarray) -> dict:
    s = summarize(x, percentiles=SUMMARY_PERCENTILES)
    return {"n": s["n"], "median_ns": s["median"], "mean_ns": s["mean"], "min_ns": s["min"], "max_ns": s["max"],
            "p10_ns": s["p10"], "p90_ns": s["p90"], "p99_ns": s["p99"], "mad_ns": s["mad"],
            "median_ci_lo_ns": s["median_ci_lo"],
            "median_ci_hi_ns": s["median_ci_hi"], "outliers": s["outliers"]}


class _QueuesBase(Benchmark[QP]):
    program = "hv_queues"
    mode = ""
    max_length = 0
    length_what = ""

    def validate(self, params: QP, ctx: BenchContext) -> None:
        super().validate(params, ctx)
        if not params.lengths:
            raise UsageError("no queue length given", "--lengths", "Give lengths such as 0,100,1000")
        for n in params.lengths:
            if n < 0 or n > self.max_length:
                raise UsageError(f"{self.length_what} {n} is outside [0, {self.max_length}]", "--lengths",
                                 f"Give lengths from 0 to {self.max_length}" + self.length_limit_reason())
        check_sizes_and_iters(params.sizes, params.iters, params.min_iters, MAX_SIZE)
        if params.fit_stat not in FIT_STATS:
            raise UsageError(f"unknown fit statistic '{params.fit_stat}'", "--fit-stat",
                             f"Use one of {', '.join(FIT_STATS)}")
        self.check_memory(params, ctx)

    def length_limit_reason(self) -> str:
        return ""

    def bytes_per_rank(self, params: QP) -> int:
        """Estimated memory of one rank for the largest point (buffers + MPI entries)."""
        raise NotImplementedError

    def check_memory(self, params: QP, ctx: BenchContext) -> None:
        if getattr(ctx.launcher, "name", "local") not in ("local", "testbed"):
            return  # ranks run on other hosts: this host's memory says nothing
        avail = metadata.mem_available_bytes()
        if avail is None:
            return
        ranks_here = min(ctx.np, ctx.ranks_per_node or ctx.np)
        need = self.bytes_per_rank(params) * ranks_here
        if need > MEMORY_FRACTION * avail:
            raise UsageError(
                f"the largest point needs about {format_size(need)} ({ranks_here} ranks x "
                f"{format_size(self.bytes_per_rank(params))}), above {MEMORY_FRACTION:.0%} of the "
                f"{format_size(avail)} available on this host", self.memory_flag,
                "Use fewer or shorter --lengths or smaller --sizes")

    memory_flag = "--lengths"

    def argv(self, params: QP, points: list[dict]) -> list[str]:
        args = ["--mode", self.mode, "--lengths", ",".join(str(p["length"]) for p in points),
                "--sizes", ",".join(str(p["size"]) for p in points)]
        if isinstance(params, PostedParams):
            args += ["--traversed", ",".join(str(p["traversed"]) for p in points)]
            if params.any_source:
                args.append("--any-source")
        if params.pin:
            args.append("--pin")
        return args + ["--iters", str(params.iters), "--min-iters", str(params.min_iters),
                       "--warmup", str(params.warmup),
                       "--time-per-point", repr(float(params.time_per_point_s))]

    def estimate_s(self, params: QP, points: list[dict]) -> float:
        # warm-up iterations (each posts/sends and clears the queue: ~1 us per entry
        # and side, generously), the time budget per point, plus MPI start-up
        per_warm = sum(params.warmup * (2e-6 * p["length"] + 1e-5) for p in points)
        per_min = sum(params.min_iters * (2e-6 * p["length"] + 1e-5) for p in points)
        return 3.0 + per_warm + per_min + len(points) * (params.time_per_point_s * 1.5 + 0.2)


class PostedQueue(_QueuesBase[PostedParams]):
    """Figure 1: posted-receive queue length x percent traversed x size."""

    name = "queues posted"
    mode = "posted"
    max_length = MAX_POSTED_LENGTH
    length_what = "posted-queue length"

    def point_fields(self) -> list[str]:
        return ["length", "traversed", "size"]

    def points(self, params: PostedParams) -> list[dict]:
        return [{"length": n, "traversed": p, "size": s}
                for n, p, s in itertools.product(params.lengths, params.traversed, params.sizes)]

    def length_limit_reason(self) -> str:
        return " (the issue's range; each entry is a posted receive with its own buffer)"

    def validate(self, params: PostedParams, ctx: BenchContext) -> None:
        if not params.traversed:
            raise UsageError("no traversed percentage given", "--traversed", "Give percentages such as 0,50,100")
        for p in params.traversed:
            if p < 0 or p > 100:
                raise UsageError(f"traversed percentage {p} is outside [0, 100]", "--traversed",
                                 "Give percentages of the posted queue from 0 to 100")
        super().validate(params, ctx)

    def bytes_per_rank(self, params: PostedParams) -> int:
        # distinct S-byte buffer per posted receive, ping/pong buffers, MPI entries
        lmax = max(params.lengths)
        smax = max(params.sizes)
        xbuf = max(n * s for n in params.lengths for s in params.sizes)
        return xbuf + 2 * smax + 2 * lmax * MPI_BYTES_PER_ENTRY

    def tables(self, raws: list[RawFile], params: PostedParams) -> dict[str, pd.DataFrame]:
        frames = []
        for raw in raws:
            for p in raw.points:
                rtt = raw.column(p, "rtt_ns")
                n = rtt.size

                def full(key, n=n, p=p):
                    return np.full(n, int(p.params[key]), dtype=np.int64)

                frames.append(pd.DataFrame({
                    "length": full("length"), "traversed_pct": full("traversed"), "entries": full("entries"),
                    "size_bytes": full("size"), "any_source": full("any_source").astype(bool),
                    "iter": raw.column(p, "iter").astype(np.int64), "rtt_ns": rtt, "oneway_ns": rtt / 2.0}))
        cols = ["length", "traversed_pct", "entries", "size_bytes", "any_source", "iter", "rtt_ns", "oneway_ns"]
        samples = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame({c: [] for c in cols})
        rows = []
        for (length, pct, entries, size), grp in samples.groupby(
                ["length", "traversed_pct", "entries", "size_bytes"], sort=True):
            rows.append({"length": int(length), "traversed_pct": int(pct), "entries": int(entries),
                         "untraversed": int(length - entries), "size_bytes": int(size),
                         **_summary_row(grp["oneway_ns"].to_numpy())})
        summary = pd.DataFrame(rows) if rows else pd.DataFrame(
            {c: [] for c in ["length", "traversed_pct", "entries", "untraversed", "size_bytes",
                             *_summary_row(np.array([])).keys()]})
        return {"queues_posted.samples": samples, "queues_posted.summary": summary,
                "queues_posted.fit": self._fits(samples, summary, params.fit_stat)}

    @staticmethod
    def _fits(samples: pd.DataFrame, summary: pd.DataFrame, stat: str) -> pd.DataFrame:
        rows = []
        for size, grp in summary.groupby("size_bytes", sort=True):
            f = fit_slope(grp[_STAT_COLUMN[stat]], grp["entries"], grp["untraversed"])
            base = samples[(samples["size_bytes"] == size) & (samples["length"] == 0)]["oneway_ns"].to_numpy()
            rows.append({"size_bytes": int(size), "fit_stat": stat, "points": f["n"], "dof": f["dof"],
                         "slope_ns_per_entry": f["slope"], "slope_ci_lo": f["slope_ci"][0],
                         "slope_ci_hi": f["slope_ci"][1], "untraversed_slope_ns_per_entry": f["slope2"],
                         "untraversed_slope_ci_lo": f["slope2_ci"][0], "untraversed_slope_ci_hi": f["slope2_ci"][1],
                         "intercept_ns": f["intercept"], "r2": f["r2"],
                         "baseline_ns": FIT_STATS[stat](base) if base.size else float("nan")})
        return pd.DataFrame(rows, columns=list(_FIT_COLUMNS_POSTED))

    def result(self, tables: dict[str, pd.DataFrame], params: PostedParams) -> dict:
        summ, fits = tables["queues_posted.summary"], tables["queues_posted.fit"]
        points = [{"length": r["length"], "traversed_pct": r["traversed_pct"], "size": r["size_bytes"],
                   "entries": r["entries"], "n": r["n"], "median_ns": r["median_ns"], "p99_ns": r["p99_ns"],
                   "min_ns": r["min_ns"], "p10_ns": r["p10_ns"],
                   "median_ci_ns": [r["median_ci_lo_ns"], r["median_ci_hi_ns"]]} for r in summ.to_dict("records")]
        out = {"benchmark": "queues posted", "any_source": bool(params.any_source), "points": points}
        out.update(_headline(fits))
        out["untraversed_slope_ns_per_entry"] = _none(fits.iloc[0]["untraversed_slope_ns_per_entry"]) \
            if len(fits) else None
        out["untraversed_slope_ci"] = [_none(fits.iloc[0]["untraversed_slope_ci_lo"]),
                                       _none(fits.iloc[0]["untraversed_slope_ci_hi"])] if len(fits) else [None, None]
        out["fits"] = _fit_records(fits)
        return out


class UnexpectedQueue(_QueuesBase[UnexpectedParams]):
    """Figure 2: unexpected-queue length x size."""

    name = "queues unexpected"
    mode = "unexpected"
    max_length = MAX_UNEXPECTED_LENGTH
    length_what = "unexpected-queue length"

    def point_fields(self) -> list[str]:
        return ["length", "size"]

    def points(self, params: UnexpectedParams) -> list[dict]:
        return [{"length": n, "size": s} for n, s in itertools.product(params.lengths, params.sizes)]

    def length_limit_reason(self) -> str:
        return (" (each unexpected message holds a request and an eager buffer slot of the receiving MPI "
                "until it is received; MPIs' eager pools and flow-control credits are finite)")

    def bytes_per_rank(self, params: UnexpectedParams) -> int:
        # zero-byte unexpected messages: a send request here, a request + slot at the peer
        return 2 * max(params.sizes) + 2 * max(params.lengths) * MPI_BYTES_PER_ENTRY

    def tables(self, raws: list[RawFile], params: UnexpectedParams) -> dict[str, pd.DataFrame]:
        frames = []
        for raw in raws:
            for p in raw.points:
                rtt = raw.column(p, "rtt_ns")
                frames.append(pd.DataFrame({
                    "length": np.full(rtt.size, int(p.params["length"]), dtype=np.int64),
                    "size_bytes": np.full(rtt.size, int(p.params["size"]), dtype=np.int64),
                    "iter": raw.column(p, "iter").astype(np.int64), "rtt_ns": rtt, "oneway_ns": rtt / 2.0}))
        cols = ["length", "size_bytes", "iter", "rtt_ns", "oneway_ns"]
        samples = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame({c: [] for c in cols})
        rows = []
        for (length, size), grp in samples.groupby(["length", "size_bytes"], sort=True):
            rows.append({"length": int(length), "size_bytes": int(size), **_summary_row(grp["oneway_ns"].to_numpy())})
        summary = pd.DataFrame(rows) if rows else pd.DataFrame(
            {c: [] for c in ["length", "size_bytes", *_summary_row(np.array([])).keys()]})
        fit_rows = []
        stat = params.fit_stat
        for size, grp in summary.groupby("size_bytes", sort=True):
            f = fit_slope(grp[_STAT_COLUMN[stat]], grp["length"])
            base = samples[(samples["size_bytes"] == size) & (samples["length"] == 0)]["oneway_ns"].to_numpy()
            fit_rows.append({"size_bytes": int(size), "fit_stat": stat, "points": f["n"], "dof": f["dof"],
                             "slope_ns_per_entry": f["slope"], "slope_ci_lo": f["slope_ci"][0],
                             "slope_ci_hi": f["slope_ci"][1], "intercept_ns": f["intercept"], "r2": f["r2"],
                             "baseline_ns": FIT_STATS[stat](base) if base.size else float("nan")})
        fits = pd.DataFrame(fit_rows, columns=list(_FIT_COLUMNS_UNEXPECTED))
        return {"queues_unexpected.samples": samples, "queues_unexpected.summary": summary,
                "queues_unexpected.fit": fits}

    def result(self, tables: dict[str, pd.DataFrame], params: UnexpectedParams) -> dict:
        summ, fits = tables["queues_unexpected.summary"], tables["queues_unexpected.fit"]
        points = [{"length": r["length"], "size": r["size_bytes"], "n": r["n"], "median_ns": r["median_ns"],
                   "p99_ns": r["p99_ns"], "min_ns": r["min_ns"], "p10_ns": r["p10_ns"],
                   "median_ci_ns": [r["median_ci_lo_ns"], r["median_ci_hi_ns"]]}
                  for r in summ.to_dict("records")]
        out = {"benchmark": "queues unexpected", "points": points}
        out.update(_headline(fits))
        out["fits"] = _fit_records(fits)
        return out


_STAT_COLUMN = {"median": "median_ns", "p10": "p10_ns", "min": "min_ns"}
_FIT_COLUMNS_UNEXPECTED = ("size_bytes", "fit_stat", "points", "dof", "slope_ns_per_entry", "slope_ci_lo",
                           "slope_ci_hi", "intercept_ns", "r2", "baseline_ns")
_FIT_COLUMNS_POSTED = _FIT_COLUMNS_UNEXPECTED + ("untraversed_slope_ns_per_entry", "untraversed_slope_ci_lo",
                                                 "untraversed_slope_ci_hi")


def _headline(fits: pd.DataFrame) -> dict:
    """The issue's top-level keys, from the fit of the smallest message size."""
    if fits.empty:
        return {"slope_ns_per_entry": None, "slope_ci": [None, None], "baseline_ns": None, "fit_size": None,
                "fit_stat": None}
    f = fits.iloc[0]  # sorted by size: the smallest, where the queue cost is least hidden
    return {"slope_ns_per_entry": _none(float(f["slope_ns_per_entry"])),
            "slope_ci": [_none(float(f["slope_ci_lo"])), _none(float(f["slope_ci_hi"]))],
            "baseline_ns": _none(float(f["baseline_ns"])), "fit_size": int(f["size_bytes"]),
            "fit_stat": f["fit_stat"]}


def _fit_records(fits: pd.DataFrame) -> list[dict]:
    return [{k: (_none(float(v)) if isinstance(v, float) else v) for k, v in r.items()}
            for r in fits.to_dict("records")]


def posted(params: PostedParams, ctx: BenchContext) -> Run:
    """``hpcvar bench queues posted``: run (or resume) the sweep, store its figures; the result in the run."""
    return run_benchmark(PostedQueue(), params, ctx, after=_plots)[0]


def unexpected(params: UnexpectedParams, ctx: BenchContext) -> Run:
    """``hpcvar bench queues unexpected``: run (or resume) the sweep, store its figures; the result in the run."""
    return run_benchmark(UnexpectedQueue(), params, ctx, after=_plots)[0]


def _plots(run: Run, result: dict) -> None:
    result["plots"] = draw_plots(run)
