"""Bandwidth sharing: penalties of concurrent communications (native/bench/sharing.c).

Vienne et al. (Cluster 2008) section IV-B: a reference transfer alone gives T_ref, then every
communication of a scheme starts at once (blocking MPI_Send timed at the source, receivers on
MPI_ANY_SOURCE); the penalty of communication i is P_i = T_i / T_ref. Both phases run in every
repetition (reference first), after unmeasured warm-up repetitions.

Placement (docs/models.md): each communication has its own sender rank on its source node and its
own receiver rank on its destination node. With one host (local runs) every node is that host;
with several hosts, scheme node j (in the scheme's node order) runs on host j, hosts ordered by
their lowest rank. The native program records the placement in the raw header.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np
import pandas as pd

from hpcvar.bench.runner import BenchContext, Benchmark, Params, run_benchmark
from hpcvar.errors import ResultsError, UsageError
from hpcvar.models.scheme import Comm, Scheme
from hpcvar.results import RawFile, Run
from hpcvar.stats import summarize

MAX_SIZE = (1 << 31) - 1  # MPI count limit of one MPI_Send of bytes


def ends_per_node(scheme: Scheme) -> dict[str, int]:
    """How many ranks each node needs: one per communication end."""
    c: Counter[str] = Counter()
    for comm in scheme.comms:
        c[comm.src] += 1
        c[comm.dst] += 1
    return {n: c[n] for n in scheme.nodes}


def default_np(scheme: Scheme, launcher_name: str) -> tuple[int, int | None]:
    """(np, ranks per node): every end on one host locally; one host per node elsewhere."""
    ends = ends_per_node(scheme)
    if launcher_name == "local":
        return sum(ends.values()), None
    per = max(ends.values())
    return per * len(scheme.nodes), per


@dataclass(frozen=True)
class SharingParams(Params):
    """``hpcvar bench sharing``'s parameters (run.json ``params``: the scheme as ``Scheme.to_json()``)."""

    scheme: Scheme
    size: int  # bytes per communication without a size of its own in the scheme
    reps: int  # measured repetitions
    warmup: int  # unmeasured repetitions

    @classmethod
    def _decode(cls, doc: dict, where: str) -> dict:
        sch = doc["scheme"]
        try:
            comms = [Comm(c["name"], c["src"], c["dst"], c["size_bytes"]) for c in sch["communications"]]
            scheme = Scheme(comms, list(sch["nodes"]), where)
        except (TypeError, KeyError) as e:
            raise ResultsError(f"the stored scheme is not a scheme's JSON ({type(e).__name__}: {e})", where,
                               "Start a new run instead of resuming this one") from None
        return {**doc, "scheme": scheme}


class Sharing(Benchmark[SharingParams]):
    name = "sharing"
    program = "hv_sharing"

    def point_fields(self) -> list[str]:
        return ["size", "reps", "ncomms"]

    def _sizes(self, params: SharingParams) -> list[int]:
        return [c.size_bytes or params.size for c in params.scheme.comms]

    def points(self, params: SharingParams) -> list[dict]:
        return [{"size": self._sizes(params)[0], "reps": params.reps, "ncomms": len(params.scheme.comms)}]

    def validate(self, params: SharingParams, ctx: BenchContext) -> None:
        super().validate(params, ctx)
        for s in self._sizes(params):
            if s < 1 or s > MAX_SIZE:
                raise UsageError(f"message size {s} is outside [1, {MAX_SIZE}] bytes", "--size",
                                 "Give a size up to 2GiB - 1 (the paper uses 20MiB)")
        if params.reps < 1:
            raise UsageError("--reps must be at least 1", "--reps", "Use --reps 10")
        nends = 2 * len(params.scheme.comms)
        if ctx.launcher.name == "local" and ctx.np < nends:
            raise UsageError(f"the scheme has {nends} communication ends but only {ctx.np} ranks", "--np",
                             f"Use --np {nends} (one rank per communication end) or leave --np out")

    def argv(self, params: SharingParams, points: list[dict]) -> list[str]:
        sch = params.scheme
        index = sch.node_index()
        comms = ",".join(f"{index[c.src]},{index[c.dst]}" for c in sch.comms)
        return ["--comms", comms, "--sizes", ",".join(str(s) for s in self._sizes(params)),
                "--reps", str(params.reps), "--warmup", str(params.warmup)]

    def estimate_s(self, params: SharingParams, points: list[dict]) -> float:
        # at 10 MB/s (a slow shaped link, shared by every communication) per transfer
        total = sum(self._sizes(params)) + self._sizes(params)[0]
        return 3.0 + (params.reps + params.warmup) * total / 10e6

    def tables(self, raws: list[RawFile], params: SharingParams) -> dict[str, pd.DataFrame]:
        comms = params.scheme.to_json()["communications"]
        sizes = self._sizes(params)
        frames = []
        for raw in raws:
            for p in raw.points:
                frames.append(pd.DataFrame({"rep": raw.column(p, "rep").astype(np.int64),
                                            "comm_index": raw.column(p, "comm").astype(np.int64),
                                            "t_ns": raw.column(p, "t_ns")}))
        cols = list(_SAMPLE_COLS)
        if not frames:
            return {"sharing.samples": pd.DataFrame({c: [] for c in cols}),
                    "sharing.summary": pd.DataFrame({c: [] for c in _SUMMARY_COLS})}
        df = pd.concat(frames, ignore_index=True)
        ref = df[df.comm_index < 0].set_index("rep")["t_ns"]
        df = df[df.comm_index >= 0].copy()
        df["t_ref_ns"] = df["rep"].map(ref).to_numpy(dtype=float)
        df["comm"] = [comms[k]["name"] for k in df.comm_index]
        df["src"] = [comms[k]["src"] for k in df.comm_index]
        df["dst"] = [comms[k]["dst"] for k in df.comm_index]
        df["size_bytes"] = [sizes[k] for k in df.comm_index]
        # T_ref is for communication 0's size; other sizes scale it linearly (docs/models.md)
        scale = df["size_bytes"].to_numpy(dtype=float) / sizes[0]
        df["penalty"] = df["t_ns"] / (df["t_ref_ns"] * scale)
        samples = df.sort_values(["rep", "comm_index"])[cols].reset_index(drop=True)
        t_ref_med = float(np.median(ref.to_numpy()))
        rows = []
        for k, grp in samples.groupby("comm_index", sort=True):
            pen = summarize(grp["penalty"].to_numpy())
            t = summarize(grp["t_ns"].to_numpy(), ci=False)
            rows.append({
                "comm_index": int(k), "comm": comms[k]["name"], "src": comms[k]["src"], "dst": comms[k]["dst"],
                "size_bytes": sizes[k], "n": t["n"], "t_median_ns": t["median"], "t_min_ns": t["min"],
                "t_max_ns": t["max"], "t_ref_median_ns": t_ref_med,
                "penalty": t["median"] / (t_ref_med * sizes[k] / sizes[0]),
                "penalty_rep_median": pen["median"], "penalty_min": pen["min"], "penalty_max": pen["max"],
                "penalty_mad": pen["mad"], "penalty_ci_lo": pen["median_ci_lo"], "penalty_ci_hi": pen["median_ci_hi"],
                "penalty_cv": pen["cv"],
            })
        return {"sharing.samples": samples, "sharing.summary": pd.DataFrame(rows)}

    def result(self, tables: dict[str, pd.DataFrame], params: SharingParams) -> dict:
        summ = tables["sharing.summary"]
        comms = []
        for r in summ.to_dict("records"):
            comms.append({"name": r["comm"], "src": r["src"], "dst": r["dst"], "size_bytes": r["size_bytes"],
                          "penalty": r["penalty"], "penalty_ci": [r["penalty_ci_lo"], r["penalty_ci_hi"]],
                          "penalty_min": r["penalty_min"], "penalty_max": r["penalty_max"],
                          "penalty_mad": r["penalty_mad"], "n": r["n"], "t_ns": r["t_median_ns"],
                          "t_ref_ns": r["t_ref_median_ns"]})
        t_ref = float(summ["t_ref_median_ns"].iloc[0]) if len(summ) else float("nan")
        return {"benchmark": "sharing", "model": "measured", "scheme": params.scheme.to_json(), "size": params.size,
                "reps": params.reps, "t_ref_ns": t_ref, "communications": comms}


_SAMPLE_COLS = ("rep", "comm_index", "comm", "src", "dst", "size_bytes", "t_ns", "t_ref_ns", "penalty")
_SUMMARY_COLS = ("comm_index", "comm", "src", "dst", "size_bytes", "n", "t_median_ns", "t_min_ns", "t_max_ns",
                 "t_ref_median_ns", "penalty", "penalty_rep_median", "penalty_min", "penalty_max", "penalty_mad",
                 "penalty_ci_lo", "penalty_ci_hi", "penalty_cv")


def job(params: SharingParams, ctx: BenchContext) -> Run:
    """``hpcvar bench sharing``. ``ctx.np`` / ``ctx.ranks_per_node`` None: one rank per communication end
    (locally), one node per scheme node (multi-node launchers)."""
    np_, per = default_np(params.scheme, ctx.launcher.name)
    if ctx.np is None:
        ctx.np = np_
    if ctx.ranks_per_node is None and per is not None:
        ctx.ranks_per_node = per
    return run_benchmark(Sharing(), params, ctx)[0]
