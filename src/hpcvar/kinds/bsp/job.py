"""Bulk-synchronous workload under OS jitter (native/bench/bsp.c; docs/jitter-sim.md).

Per phase every rank does a fixed amount of CPU work (a calibrated number of
iterations worth --quantum of undisturbed time: a detour stretches it), then a
barrier (MPI_Barrier, or the simulator's k-ary tree of messages). The native
program records per rank and phase the compute start, compute end and barrier
exit on one clock; this module turns them into:

- ``bsp.phases``: one row per repetition x rank x phase (compute time, wait);
- ``bsp.reps``: one row per repetition: T = last barrier exit - first start,
  the slowdown against pure compute T / (N*W) - 1 and, with ``--baseline RUN``
  (a run of the same workload without injected noise), the measured slowdown
  (T/N) / (T0/N0) - 1 with T0/N0 the baseline's mean time per phase.

This is the measured side of the simulator's validation: `hpcvar sim jitter`
predicts the slowdown from a jitter trace; `hpcvar bench bsp` measures it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

import numpy as np
import pandas as pd

from hpcvar.bench.runner import BenchContext, Benchmark, Params, run_benchmark
from hpcvar.bench.wait import resolve_wait, wait_us
from hpcvar.errors import ResultsError, UsageError
from hpcvar.results import RawFile, Run, resolve_run
from hpcvar.results.kinds import draw_plots

BARRIERS = ("mpi", "tree")
MAX_QUANTUM_S = 10.0  # one phase's work; longer belongs to a different experiment
MAX_ROWS = 50_000_000  # phases x ranks gathered at rank 0 per repetition (64 bytes each)
CALIBRATION_S = 2.0  # timer calibration (250 ms) plus the work calibration, generous on a loaded machine

PHASE_COLS = ("rep", "rank", "phase", "cpu", "start_ns", "compute_end_ns", "end_ns", "compute_ns", "wait_ns",
              "phase_ns", "work_iters", "calib_quantum_ns")
REP_COLS = ("rep", "ranks", "phases", "quantum_ns", "barrier", "arity", "work_iters", "calib_quantum_ns",
            "total_ns", "per_phase_ns", "pure_compute_ns", "slowdown_vs_compute", "phase_p50_ns",
            "phase_p99_ns", "phase_max_ns", "compute_mean_ns", "compute_max_ns", "slowest_compute_mean_ns",
            "wait_mean_ns", "cpu_changes", "common_clock", "baseline_per_phase_ns", "slowdown", "excess_per_phase_ns")


@dataclass(frozen=True)
class Baseline:
    """What a baseline run (``--baseline RUN``) contributes, kept in the new run's parameters."""

    run: str  # its directory
    id: str
    params: dict  # its run.json params, as stored
    np: int  # its ranks
    per_phase_ns: float  # its mean time per phase T0/N0
    work_iters: int  # its calibrated work per phase


@dataclass(frozen=True)
class BspParams(Params):
    """``hpcvar bench bsp``'s parameters (run.json ``params``)."""

    quantum_s: float  # work quantum W per phase
    phases: int  # measured phases N per repetition
    warmup: int  # unmeasured phases per repetition
    repeat: int
    barrier: str  # of BARRIERS
    arity: int  # k of the tree barrier
    work_iters: int | None  # loop iterations per phase; None: calibrated at start
    pin: bool
    rt_prio: int  # SCHED_FIFO priority; 0: normal scheduler
    baseline: Baseline | None
    wait: str = "spin"  # how the barrier waits (hpcvar.bench.wait): spin, yield or sleep:N (us)

    def to_json(self) -> dict:
        """As stored; ``wait`` left out when it is ``spin``, as runs made before ``--wait`` stored it."""
        doc = super().to_json()
        if doc.get("wait") == "spin":
            del doc["wait"]
        return doc

    @classmethod
    def from_json(cls, doc, where: str = "run.json") -> BspParams:
        """The stored parameters; a run without ``wait`` (spin, and every run made before ``--wait``) too."""
        if isinstance(doc, dict) and "wait" not in doc:
            doc = {**doc, "wait": "spin"}
        return super().from_json(doc, where)

    @classmethod
    def _decode(cls, doc: dict, where: str) -> dict:
        base = doc["baseline"]
        if base is None:
            return doc
        keys = [f.name for f in fields(Baseline)]
        if not isinstance(base, dict) or sorted(base) != sorted(keys):
            raise ResultsError(f"the stored baseline is not an object with the keys {', '.join(keys)}", where,
                               "Start a new run instead of resuming this one")
        return {**doc, "baseline": Baseline(**base)}


def load_baseline(ref: str, runs_dir=None) -> Baseline:
    """What a baseline run contributes: its run path, parameters, time per phase and work iterations."""
    run = Run.open(resolve_run(ref, runs_dir))
    if run.info.get("command") != "bench bsp":
        raise UsageError(f"run {run.id} is a '{run.info.get('command')}' run, not 'bench bsp'", "--baseline",
                         "Give a 'hpcvar bench bsp' run made without injected noise")
    if run.info.get("status") != "complete" or not run.has_table("bsp.reps"):
        raise UsageError(f"run {run.id} is not complete", "--baseline", "Give a complete 'hpcvar bench bsp' run")
    reps = run.read_table("bsp.reps")
    if reps.empty:
        raise UsageError(f"run {run.id} has no measured repetition", "--baseline", "Give a complete run")
    return Baseline(run=str(run.path), id=run.id, params=run.info.get("params", {}),
                    np=int(reps["ranks"].iloc[0]),
                    per_phase_ns=float(reps["per_phase_ns"].mean()),
                    work_iters=int(round(float(reps["work_iters"].median()))))


class Bsp(Benchmark[BspParams]):
    name = "bsp"
    program = "hv_bsp"
    min_np = 1
    any_source = True  # --barrier tree: a parent receives from its children with MPI_ANY_SOURCE

    def point_fields(self) -> list[str]:
        return ["rep"]

    def points(self, params: BspParams) -> list[dict]:
        return [{"rep": r} for r in range(params.repeat)]

    def validate(self, params: BspParams, ctx: BenchContext) -> None:
        super().validate(params, ctx)
        _check_workload(params, ctx)
        if params.baseline:
            _check_baseline(params, ctx)

    def argv(self, params: BspParams, points: list[dict]) -> list[str]:
        iters = params.work_iters or 0
        return ["--quantum-ns", repr(params.quantum_s * 1e9), "--phases", str(params.phases),
                "--warmup", str(params.warmup), "--reps", str(len(points)),
                "--first-rep", str(points[0]["rep"]), "--barrier", params.barrier,
                "--arity", str(params.arity), "--work-iters", str(iters),
                "--rt-prio", str(params.rt_prio), "--wait-us", str(wait_us(params.wait))] + \
            (["--pin"] if params.pin else [])

    def launches(self, params: BspParams, pending: list[dict]) -> list[list[dict]]:
        """One launch per run of consecutive repetitions (the native program numbers from --first-rep)."""
        out: list[list[dict]] = []
        for p in sorted(pending, key=lambda p: p["rep"]):
            if out and out[-1][-1]["rep"] + 1 == p["rep"]:
                out[-1].append(p)
            else:
                out.append([p])
        return out

    def estimate_s(self, params: BspParams, points: list[dict]) -> float:
        # a loaded machine may stretch the phases: count 3x the work
        return 5.0 + CALIBRATION_S + 3.0 * len(points) * (params.phases + params.warmup) * params.quantum_s

    def tables(self, raws: list[RawFile], params: BspParams) -> dict[str, pd.DataFrame]:
        frames, rows = [], []
        for raw in raws:
            for p in raw.points:
                rep = int(p.params["rep"])
                df = _phase_table(raw, p, rep)
                frames.append(df)
                rows.append(_rep_row(df, p, rep, params))
        rows.sort(key=lambda r: r["rep"])
        phases = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame({c: [] for c in PHASE_COLS})
        return {"bsp.phases": phases, "bsp.reps": pd.DataFrame(rows, columns=list(REP_COLS))}

    def result(self, tables: dict[str, pd.DataFrame], params: BspParams) -> dict:
        return summary(tables["bsp.reps"], params)

    def warnings(self, tables: dict[str, pd.DataFrame], params: BspParams, within: str | None = None) -> list[str]:
        reps = tables["bsp.reps"]
        out = []
        if not reps.empty and (reps["cpu_changes"] > 0).any():
            out.append("ranks changed CPU during the phases: a rank's jitter is not one CPU's; use --pin (default) "
                       "with at most as many ranks as CPUs")
        fast = speed_drift(tables["bsp.phases"], params)
        if fast:
            out.append(fast)
        return out


# A phase's work is at least the quantum on the CPU it was calibrated on (a detour only stretches it); one that
# is shorter by more than this share ran on a faster CPU than the calibration saw.
SPEED_DRIFT = 0.02


def speed_drift(phases: pd.DataFrame, params: BspParams) -> str:
    """Why the phases cannot resolve small slowdowns ('' when they can): some phase's work took less than the
    quantum by more than SPEED_DRIFT, so the CPU's speed changed after the calibration (frequency scaling, an SMT
    sibling's load, a hypervisor that took less than during the calibration). A fresh-clone CI run on this
    project's VM had its fastest phases 2.6-4.5 % short in three attempts; by hand the same VM gave 921-1,019 us
    for 1 ms from one run to the next."""
    if phases.empty or params.work_iters:  # --work-iters or --baseline's count: calibrated by another run
        return ""
    w = params.quantum_s * 1e9
    fastest = float(phases["compute_ns"].min())
    if fastest >= w * (1 - SPEED_DRIFT):
        return ""
    return (f"the CPU ran up to {100 * (1 - fastest / w):.1f}% faster than at the calibration (fastest phase's work "
            f"{fastest / 1e3:.1f} us for a {w / 1e3:g} us quantum): its speed changes (frequency scaling, an SMT "
            "sibling's load, the hypervisor), so slowdowns of that order are not measurable here; fix the CPU "
            "frequency (performance governor) or measure on an idle node")


def job(params: BspParams, ctx: BenchContext) -> Run:
    """``hpcvar bench bsp``: ``params.work_iters`` and ``params.baseline`` as the command line sets them
    (``load_baseline``); the figure is stored with the run."""
    def plots(run: Run, result: dict) -> None:
        result["plots"] = draw_plots(run)

    import dataclasses

    params = dataclasses.replace(params, wait=resolve_wait(params.wait, ctx.np, ctx.launcher.slots()))
    return run_benchmark(Bsp(), params, ctx, after=plots)[0]




def _check_workload(params: BspParams, ctx: BenchContext) -> None:
    q = params.quantum_s
    if not (q > 0 and math.isfinite(q)):
        raise UsageError(f"--quantum {q} s is not positive", "--quantum", "Give a work quantum such as 1ms")
    if q > MAX_QUANTUM_S:
        raise UsageError(f"--quantum {q} s is above {MAX_QUANTUM_S:g} s", "--quantum",
                         "Give a quantum of at most 10s (e.g. 1ms, as the simulator's default)")
    for flag, value, lo, todo in (("--phases", params.phases, 1, "Give 1 or more, e.g. 1000"),
                                  ("--warmup", params.warmup, 0, "Give 0 or more"),
                                  ("--repeat", params.repeat, 1, "Give 1 or more"),
                                  ("--arity", params.arity, 1, "Give 1 or more (2: binary tree)")):
        if value < lo:
            raise UsageError(f"{flag} {value} is {'negative' if lo == 0 else 'below 1'}", flag, todo)
    if params.barrier not in BARRIERS:
        raise UsageError(f"'{params.barrier}' is not a barrier", "--barrier", "Give mpi or tree")
    if not 0 <= params.rt_prio <= 99:
        raise UsageError(f"--rt-prio {params.rt_prio} is outside 0..99", "--rt-prio",
                         "Give 0 (normal scheduler) or a SCHED_FIFO priority 1..99 below the injector's (50)")
    if params.work_iters is not None and params.work_iters < 1:
        raise UsageError(f"--work-iters {params.work_iters} is below 1", "--work-iters",
                         "Give 1 or more, or leave it out to calibrate")
    if params.phases * ctx.np > MAX_ROWS:
        raise UsageError(f"{params.phases} phases x {ctx.np} ranks = {params.phases * ctx.np} rows per "
                         f"repetition, above {MAX_ROWS}", "--phases", "Use fewer phases and more --repeat")


def _check_baseline(params: BspParams, ctx: BenchContext) -> None:
    """A baseline of the same workload: quantum, barrier, ranks."""
    base = params.baseline
    assert base is not None
    q, bp = params.quantum_s, base.params
    if not math.isclose(bp.get("quantum_s", float("nan")), q, rel_tol=1e-9):
        raise UsageError(f"the baseline run {base.id} used --quantum {bp.get('quantum_s')} s, not {q} s",
                         "--baseline", "Give a baseline of the same workload (same --quantum)")
    if (bp.get("barrier"), bp.get("arity") if bp.get("barrier") == "tree" else None) != (
            params.barrier, params.arity if params.barrier == "tree" else None):
        raise UsageError(f"the baseline run {base.id} used another barrier", "--baseline",
                         "Give a baseline with the same --barrier and --arity")
    if base.np != ctx.np:
        raise UsageError(f"the baseline run {base.id} has {base.np} ranks, not {ctx.np}", "--baseline",
                         "Give a baseline with the same --np")


def _phase_table(raw: RawFile, p, rep: int) -> pd.DataFrame:
    col = {c: raw.column(p, c) for c in raw.columns}
    start, cend, end = col["start_ns"], col["compute_end_ns"], col["end_ns"]
    return pd.DataFrame({
        "rep": np.full(start.size, rep, dtype=np.int64), "rank": col["rank"].astype(np.int64),
        "phase": col["phase"].astype(np.int64), "cpu": col["cpu"].astype(np.int64), "start_ns": start,
        "compute_end_ns": cend, "end_ns": end, "compute_ns": cend - start, "wait_ns": end - cend,
        "phase_ns": end - start, "work_iters": col["work_iters"].astype(np.int64),
        "calib_quantum_ns": col["calib_quantum_ns"]}).sort_values(["rank", "phase"], ignore_index=True)


def global_phases(df: pd.DataFrame) -> np.ndarray:
    """Durations of the phases of one repetition: E_p - E_{p-1}, E_p the last barrier exit of phase p
    and E_{-1} the first start of phase 0 (they sum to T)."""
    ends = df.groupby("phase")["end_ns"].max().sort_index().to_numpy()
    t0 = float(df.loc[df["phase"] == 0, "start_ns"].min())
    return np.diff(np.concatenate([[t0], ends]))


def _rep_row(df: pd.DataFrame, p, rep: int, params: BspParams) -> dict:
    n = int(p.params["phases"])
    w = float(p.params["quantum_ns"])
    d = global_phases(df)
    total = float(d.sum())
    slowest = df.groupby("phase")["compute_ns"].max()
    cpu_changes = int(sum(int((np.diff(g["cpu"].to_numpy()) != 0).sum()) for _, g in df.groupby("rank")))
    base = params.baseline
    bpp = base.per_phase_ns if base else float("nan")
    per_phase = total / n
    return {
        "rep": rep, "ranks": int(df["rank"].nunique()), "phases": n, "quantum_ns": w,
        "barrier": p.params["barrier"], "arity": int(p.params["arity"]),
        "work_iters": int(df["work_iters"].median()), "calib_quantum_ns": float(df["calib_quantum_ns"].median()),
        "total_ns": total, "per_phase_ns": per_phase, "pure_compute_ns": n * w,
        "slowdown_vs_compute": total / (n * w) - 1.0,
        "phase_p50_ns": float(np.percentile(d, 50)), "phase_p99_ns": float(np.percentile(d, 99)),
        "phase_max_ns": float(d.max()), "compute_mean_ns": float(df["compute_ns"].mean()),
        "compute_max_ns": float(df["compute_ns"].max()), "slowest_compute_mean_ns": float(slowest.mean()),
        "wait_mean_ns": float(df["wait_ns"].mean()), "cpu_changes": cpu_changes,
        "common_clock": int(p.params.get("common_clock", 1)),
        "baseline_per_phase_ns": bpp, "slowdown": per_phase / bpp - 1.0 if base else float("nan"),
        "excess_per_phase_ns": per_phase - bpp if base else float("nan"),
    }


def summary(reps: pd.DataFrame, params: BspParams) -> dict:
    """The JSON result: per repetition and the mean with a 95% Student-t interval over repetitions."""
    from hpcvar.sim.jitter import mean_ci

    out = {"benchmark": "bsp", "quantum_ns": params.quantum_s * 1e9, "phases": params.phases,
           "barrier": params.barrier, "arity": params.arity if params.barrier == "tree" else None,
           "repeat": params.repeat, "reps": reps.to_dict("records")}
    if reps.empty:
        return out
    out["ranks"] = int(reps["ranks"].iloc[0])
    out["work_iters"] = int(reps["work_iters"].iloc[0])
    for key in ("total_ns", "per_phase_ns", "slowdown_vs_compute"):
        m, lo, hi = mean_ci(reps[key].to_numpy())
        out[key] = m
        out[key + "_ci"] = [lo, hi]
    base = params.baseline
    if base:
        m, lo, hi = mean_ci(reps["slowdown"].to_numpy())
        out["slowdown"], out["slowdown_ci"] = m, [lo, hi]
        out["baseline"] = {"run": base.run, "per_phase_ns": base.per_phase_ns, "work_iters": base.work_iters}
    return out


__all__ = ["BARRIERS", "Baseline", "Bsp", "BspParams", "global_phases", "load_baseline", "summary"]
