"""Ping-pong latency and bandwidth between ranks 0 and 1 (native/bench/latency.c).

One-way latency = round trip / 2; bandwidth = size / one-way median.
Every iteration's round trip is kept; the summary is robust (hpcvar.stats).
From 64 KiB up, each round trip also keeps how long rank 0's MPI_Send took (``send_ns``; NaN below, where the
extra clock read would weigh on the round trip): a send that returns before its
message has arrived leaves ``buffered_bytes = size x (1 - send / one-way)`` to the transport (a TCP
socket's send buffer, for instance), which ``hpcvar sim app --send-buffer`` takes (docs/replay.md).
This is also the "latency micro-experiment" of the jitter simulator (same-node
vs cross-node message cost).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from hpcvar.bench.runner import (
    MAX_PINGPONG_SIZE,
    BenchContext,
    Benchmark,
    Params,
    check_sizes_and_iters,
    run_benchmark,
)
from hpcvar.results import RawFile, Run
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


def buffered_bytes(size: int, send_ns: float, oneway_ns: float) -> float:
    """Bytes of a ``size``-byte message not yet delivered when its MPI_Send returned: the transfer takes the
    one-way time, the send returned ``oneway - send`` before its end, and at the transfer's rate
    (size / oneway) that is ``size x (1 - send / oneway)`` bytes; within [0, size]. NaN without a send time."""
    if not (oneway_ns > 0) or np.isnan(send_ns):
        return float("nan")
    return float(min(max(size * (1.0 - send_ns / oneway_ns), 0.0), float(size)))


def _num(v) -> float | None:
    """A JSON number, or null for NaN (runs recorded before the send time was kept)."""
    return None if v is None or v != v else float(v)


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
                send = raw.column(p, "send_ns") if "send_ns" in raw.columns else np.full(rtt.size, np.nan)
                frames.append(pd.DataFrame({"size_bytes": np.full(rtt.size, int(p.params["size"]), dtype=np.int64),
                                            "iter": raw.column(p, "iter").astype(np.int64),
                                            "rtt_ns": rtt, "oneway_ns": rtt / 2.0, "send_ns": send}))
        samples = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(
            {"size_bytes": [], "iter": [], "rtt_ns": [], "oneway_ns": [], "send_ns": []})
        rows = []
        for size, grp in samples.groupby("size_bytes", sort=True):
            s = summarize(grp["oneway_ns"].to_numpy())
            send = grp["send_ns"].to_numpy()
            send_med = float(np.median(send)) if send.size and not np.isnan(send).any() else float("nan")
            rows.append({
                "size_bytes": int(size), "n": s["n"], "median_ns": s["median"], "mean_ns": s["mean"],
                "min_ns": s["min"], "max_ns": s["max"], "p90_ns": s["p90"], "p99_ns": s["p99"],
                "p99_9_ns": s["p99_9"], "mad_ns": s["mad"], "cv": s["cv"],
                "median_ci_lo_ns": s["median_ci_lo"], "median_ci_hi_ns": s["median_ci_hi"],
                "outliers": s["outliers"],
                "bw_bytes_per_s": size / (s["median"] * 1e-9) if size and s["median"] > 0 else 0.0,
                "send_median_ns": send_med, "buffered_bytes": buffered_bytes(int(size), send_med, s["median"]),
            })
        return {"latency.samples": samples, "latency.summary": pd.DataFrame(rows)}

    def result(self, tables: dict[str, pd.DataFrame], params: LatencyParams) -> dict:
        summ = tables["latency.summary"]
        sizes = []
        for r in summ.to_dict("records"):
            sizes.append({"size": r["size_bytes"], "n": r["n"], "median_ns": r["median_ns"], "p99_ns": r["p99_ns"],
                          "p99_9_ns": r["p99_9_ns"], "mean_ns": r["mean_ns"], "min_ns": r["min_ns"],
                          "max_ns": r["max_ns"], "median_ci_ns": [r["median_ci_lo_ns"], r["median_ci_hi_ns"]],
                          "outliers": r["outliers"], "bw_bytes_per_s": r["bw_bytes_per_s"],
                          "send_median_ns": _num(r.get("send_median_ns")),
                          "buffered_bytes": _num(r.get("buffered_bytes"))})
        return {"benchmark": "latency", "sizes": sizes}


def job(params: LatencyParams, ctx: BenchContext) -> Run:
    """``hpcvar bench latency``: run (or resume, ``ctx.resume``) the ping-pong sweep; the samples, the summary
    and the result (``run.info["result"]``) are in the returned run."""
    return run_benchmark(Latency(), params, ctx)[0]
