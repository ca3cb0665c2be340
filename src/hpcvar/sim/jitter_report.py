"""jitSim output: terminal renderer, plots and the HTML report section of 'sim jitter' runs."""

from __future__ import annotations

import pandas as pd
from rich.console import Console
from rich.table import Table

from hpcvar.report.sections import Headline, Section


def _pct(x: float) -> str:
    return f"{100 * x:.2f}%"


def render_jitter(console: Console, result: dict) -> None:
    t = Table(title=f"jitSim: {result['phases_n']} phases of W = {result['work_cycles']} cycles, "
                    f"barrier {result['barrier']}; T0 = {result['baseline_cycles']} cycles at the last point; "
                    f"Mtp/s = million task-phases per second", title_justify="left")
    for col in ("config", "tasks", "T (cycles)", "slowdown", "95% CI", "closed form", "coverage", "Mtp/s"):
        t.add_column(col, justify="right", overflow="fold")
    for p in result["points"]:
        cf = p.get("closed_form") or {}
        cf_txt = _pct(cf["expected_slowdown"]) if "expected_slowdown" in cf else "-"
        t.add_row(p["config"], str(p["tasks"]), f"{p['total_cycles']:.4g}", _pct(p["slowdown"]),
                  f"{_pct(p['slowdown_ci'][0])}..{_pct(p['slowdown_ci'][1])}", cf_txt, _pct(p["coverage"]),
                  f"{p['task_phases_per_s'] / 1e6:.2f}")
    console.print(t)
    for w in result.get("warnings", []):
        console.print(f"[yellow]warning:[/] {w}")
    if result.get("run"):
        console.print(f"stored in {result['run']}")


def plot_sweep(points: pd.DataFrame, stem) -> list:
    from hpcvar.report.plots import figure, save

    fig, ax = figure()
    for cfg, grp in points.groupby("config", sort=False):
        grp = grp.sort_values("tasks")
        ax.errorbar(grp["tasks"], 100 * grp["slowdown"],
                    yerr=[100 * (grp["slowdown"] - grp["slowdown_ci_lo"]),
                          100 * (grp["slowdown_ci_hi"] - grp["slowdown"])],
                    marker="o", capsize=3, label=cfg)
        if grp["closed_form_slowdown"].notna().any():
            ax.plot(grp["tasks"], 100 * grp["closed_form_slowdown"], ls="--", label=f"{cfg} (closed form)")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("tasks")
    ax.set_ylabel("slowdown T/T0 - 1 (%)")
    ax.legend(fontsize=8)
    return save(fig, stem)


def plot_phases(phases: pd.DataFrame, stem) -> list:
    from hpcvar.report.plots import figure, save

    fig, ax = figure()
    for (cfg, tasks), grp in phases.groupby(["config", "tasks"], sort=False):
        g0 = grp[grp["replica"] == 0]
        ax.plot(g0["phase"], g0["duration_cycles"], marker=".", label=f"{cfg}, {tasks} tasks")
    ax.set_xlabel("phase")
    ax.set_ylabel("phase duration (cycles)")
    ax.legend(fontsize=7)
    return save(fig, stem)


def jitter_section(run) -> Section:
    res = run.info.get("result") or {}
    sec = Section(title="Jitter slowdown predicted at scale (jitSim)")
    points = res.get("points", [])
    # one headline per configuration (trace x alignment), at its largest task count
    largest: dict = {}
    for p in points:
        if p["config"] not in largest or p["tasks"] > largest[p["config"]]["tasks"]:
            largest[p["config"]] = p
    for cfg, p in largest.items():
        sec.headlines.append(Headline(f"jitter slowdown, {cfg}, {p['tasks']:,} tasks",
                                      f"{_pct(p['slowdown'])} [{_pct(p['slowdown_ci'][0])}, "
                                      f"{_pct(p['slowdown_ci'][1])}]",
                                      f"T/T0 - 1 of compute + barrier phases, 95% CI over {p['replicas']} replicas"))
    if run.has_table("jitter.points"):
        sec.tables.append(("Slowdown against task count", run.read_table("jitter.points")))
    for name, cap in (("sweep", "Slowdown against tasks (log x)"), ("phases", "Phase durations (replica 0)")):
        f = run.path / "plots" / f"{name}.png"
        if f.is_file():
            sec.figures.append((cap, f))
    sec.notes.extend(run.info.get("warnings", []))
    return sec
