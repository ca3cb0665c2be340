"""Ping-pong latency and bandwidth between ranks 0 and 1 (native/bench/latency.c).

One-way latency = round trip / 2; bandwidth = size / one-way median.
Every iteration's round trip is kept; the summary is robust (hpcvar.stats).
This is also the "latency micro-experiment" of the jitter simulator (same-node
vs cross-node message cost).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from hpcvar.bench.runner import MAX_PINGPONG_SIZE, BenchContext, Benchmark, Params, check_sizes_and_iters
from hpcvar.results import RawFile
from hpcvar.stats import summarize

MAX_SIZE = MAX_PINGPONG_SIZE


@dataclass(frozen=True)
class LatencyParams(Params):
    """``hpcvar bench latency``'s parameters (run.json ``params``)."""

    sizes: tuple[int, ...]  # message sizes in bytes, one point each
    iters: int  # maximum measured round trips per size
    min_iters: int  # minimum measured round trips per size
    warmup: int  # unmeasured round trips per size
    time_per_size_s: float  # time budget per size


class Latency(Benchmark[LatencyParams]):
    name = "latency"
    program = "hv_latency"

    def point_fields(self) -> list[str]:
        return ["size"]

    def points(self, params: LatencyParams) -> list[dict]:
        return [{"size": s} for s in params.sizes]

    def validate(self, params: LatencyParams, ctx: BenchContext) -> None:
        super().validate(params, ctx)
        check_sizes_and_iters(params.sizes, params.iters, params.min_iters, MAX_SIZE)

    def argv(self, params: LatencyParams, points: list[dict]) -> list[str]:
        return ["--sizes", ",".join(str(p["size"]) for p in points), "--iters", str(params.iters),
                "--min-iters", str(params.min_iters), "--warmup", str(params.warmup),
                "--time-per-size", repr(float(params.time_per_size_s))]

    def estimate_s(self, params: LatencyParams, points: list[dict]) -> float:
        # warm-up plus the time budget per size, plus MPI start-up
        return 3.0 + len(points) * (params.time_per_size_s * 1.5 + 0.5)

    def tables(self, raws: list[RawFile], params: LatencyParams) -> dict[str, pd.DataFrame]:
        frames = []
        for raw in raws:
            for p in raw.points:
                rtt = raw.column(p, "rtt_ns")
                frames.append(pd.DataFrame({"size_bytes": np.full(rtt.size, int(p.params["size"]), dtype=np.int64),
                                            "iter": raw.column(p, "iter").astype(np.int64),
                                            "rtt_ns": rtt, "oneway_ns": rtt / 2.0}))
        samples = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(
            {"size_bytes": [], "iter": [], "rtt_ns": [], "oneway_ns": []})
        rows = []
        for size, grp in samples.groupby("size_bytes", sort=True):
            s = summarize(grp["oneway_ns"].to_numpy())
            rows.append({
                "size_bytes": int(size), "n": s["n"], "median_ns": s["median"], "mean_ns": s["mean"],
                "min_ns": s["min"], "max_ns": s["max"], "p90_ns": s["p90"], "p99_ns": s["p99"],
                "p99_9_ns": s["p99_9"], "mad_ns": s["mad"], "cv": s["cv"],
                "median_ci_lo_ns": s["median_ci_lo"], "median_ci_hi_ns": s["median_ci_hi"],
                "outliers": s["outliers"],
                "bw_bytes_per_s": size / (s["median"] * 1e-9) if size and s["median"] > 0 else 0.0,
            })
        return {"latency.samples": samples, "latency.summary": pd.DataFrame(rows)}

    def result(self, tables: dict[str, pd.DataFrame], params: LatencyParams) -> dict:
        summ = tables["latency.summary"]
        sizes = []
        for r in summ.to_dict("records"):
            sizes.append({"size": r["size_bytes"], "n": r["n"], "median_ns": r["median_ns"], "p99_ns": r["p99_ns"],
                          "p99_9_ns": r["p99_9_ns"], "mean_ns": r["mean_ns"], "min_ns": r["min_ns"],
                          "max_ns": r["max_ns"], "median_ci_ns": [r["median_ci_lo_ns"], r["median_ci_hi_ns"]],
                          "outliers": r["outliers"], "bw_bytes_per_s": r["bw_bytes_per_s"]})
        return {"benchmark": "latency", "sizes": sizes}
