"""The views of 'bench bsp' runs: terminal table, figure, report section, metrics."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from rich.console import Console
from rich.table import Table

from hpcvar.compare import Metric
from hpcvar.report.sections import INFO, Headline, Section
from hpcvar.report.terminal import ns
from hpcvar.report.verdict import judge_ci
from hpcvar.results import Run
from hpcvar.units import format_interval, format_time_ns


def _pct(x) -> str:
    return "-" if x is None or not np.isfinite(x) else f"{100.0 * x:+.2f}%"


def _ci_pct(ci, n: int | None) -> str:
    """The 95% CI over the repetitions; one repetition has none ("n = 1")."""
    text = format_interval(ci[0], ci[1], n, lambda x: f"{100.0 * x:+.2f}")
    return f"[{text}]%" if n is None or n >= 2 else f"({text})"


def plots(run: Run) -> list[Path]:
    return plot_bsp(run, run.read_table("bsp.phases"), run.info["result"])


def plot_bsp(run, phases: pd.DataFrame, result: dict) -> list[Path]:
    """bsp-phases: left, every phase's duration (last barrier exit to last barrier exit) per repetition;
    right, the distribution (CCDF) of the per-rank compute times against the quantum."""
    from hpcvar.kinds.bsp.job import global_phases
    from hpcvar.report.plots import figure, save

    if phases.empty:
        return []
    w = result["quantum_ns"]
    fig, (a, b) = figure(1, 2, figsize=(12.0, 4.0))
    for rep, df in phases.groupby("rep"):
        d = global_phases(df)
        a.plot(np.arange(d.size), d / 1e6, lw=0.8, label=f"rep {rep}")
    a.axhline(w / 1e6, color="k", ls="--", lw=0.8, label="quantum W")
    a.set(title="phase durations", xlabel="phase", ylabel="ms")
    a.legend(fontsize=7)
    for rank, df in phases.groupby("rank"):
        x = np.sort(df["compute_ns"].to_numpy())
        y = 1.0 - np.arange(x.size) / x.size
        b.step(x / 1e6, y, where="post", label=f"rank {rank}")
    b.axvline(w / 1e6, color="k", ls="--", lw=0.8)
    b.set(title="compute time per phase (CCDF)", xlabel="ms", ylabel="P(compute > x)", yscale="log")
    b.legend(fontsize=7)
    return [save(fig, run.plots_dir() / "bsp-phases")[0]]


def render(console: Console, run: Run) -> None:
    """A stored 'bench bsp' run: per repetition, the slowdowns."""
    result = run.info["result"]
    arity = f" (arity {result['arity']})" if result.get("arity") else ""
    t = Table(title=f"BSP: {result.get('ranks', '?')} ranks, W = {format_time_ns(result['quantum_ns'])}, "
                    f"{result['phases']} phases, barrier {result['barrier']}{arity}", title_justify="left")
    for c in ("rep", "T", "T/N", "vs N*W", "vs baseline", "phase p50", "p99", "max"):
        t.add_column(c, justify="right", no_wrap=True)
    for r in result["reps"]:
        t.add_row(str(r["rep"]), ns(r["total_ns"]), ns(r["per_phase_ns"]), _pct(r["slowdown_vs_compute"]),
                  _pct(r["slowdown"]), ns(r["phase_p50_ns"]), ns(r["phase_p99_ns"]), ns(r["phase_max_ns"]))
    console.print(t)
    if "slowdown_vs_compute" in result:
        console.print(f"slowdown T/(N*W) - 1: {_pct(result['slowdown_vs_compute'])} "
                      f"95% CI {_ci_pct(result['slowdown_vs_compute_ci'], result.get('repeat'))}; "
                      f"work = {result['work_iters']} "
                      "loop iterations per phase")
    if "slowdown" in result:
        console.print(f"slowdown vs baseline (T/N)/(T0/N0) - 1: {_pct(result['slowdown'])} "
                      f"95% CI {_ci_pct(result['slowdown_ci'], result.get('repeat'))} (T0/N0 = "
                      f"{format_time_ns(result['baseline']['per_phase_ns'])}, {result['baseline']['run']})",
                      soft_wrap=True)


def section(run: Run) -> Section:
    res = run.info.get("result") or {}
    sec = Section(title="Bulk-synchronous workload (compute quantum + barrier)")
    if "slowdown_vs_compute" in res:
        sec.headlines.append(Headline(
            "slowdown against pure compute",
            f"{_pct(res['slowdown_vs_compute'])} {_ci_pct(res['slowdown_vs_compute_ci'], res.get('repeat'))}",
            f"T/(N*W) - 1 over {res['repeat']} repetitions of {res['phases']} phases of "
            f"{format_time_ns(res['quantum_ns'])} on {res.get('ranks')} ranks ({res['barrier']} barrier)",
            *(judge_ci(res["slowdown_vs_compute_ci"][0], res["slowdown_vs_compute_ci"][1],
                       replicas=int(res.get("repeat") or 0), replicas_flag="--repeat") or
              (INFO, "no reference: the slowdown of this workload on this machine"))))
    if "slowdown" in res:
        sec.headlines.append(Headline(
            "slowdown against the baseline",
            f"{_pct(res['slowdown'])} {_ci_pct(res['slowdown_ci'], res.get('repeat'))}",
            f"(T/N)/(T0/N0) - 1 against {Path(res['baseline']['run']).name} (no injected noise)",
            *(judge_ci(res["slowdown_ci"][0], res["slowdown_ci"][1], replicas=int(res.get("repeat") or 0),
                       replicas_flag="--repeat") or
              (INFO, "against the baseline run named"))))
    reps = pd.DataFrame(res.get("reps", []))
    if not reps.empty:
        sec.tables.append(("repetitions", reps[["rep", "total_ns", "per_phase_ns", "slowdown_vs_compute",
                                                "slowdown", "phase_p50_ns", "phase_p99_ns", "phase_max_ns",
                                                "compute_mean_ns", "wait_mean_ns", "cpu_changes"]]))
    pdir = run.path / "plots"
    for png in sorted(pdir.glob("bsp-*.png")) if pdir.is_dir() else []:
        sec.figures.append((png.stem, png))
    return sec


def metrics(run: Run) -> list[Metric]:
    p = run.read_table("bsp.phases")
    return [Metric("bsp phase duration", p.groupby(["rep", "phase"])["phase_ns"].max().to_numpy(), True, "ns")]
