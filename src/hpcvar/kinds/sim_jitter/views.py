"""The views of 'sim jitter' runs: terminal table, figures, report section (no metrics: a prediction has no
samples to test)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

from hpcvar.report.sections import BAD, GOOD, PREDICTION, SUSPECT, Headline, Section, figures_of
from hpcvar.report.verdict import SLOWDOWN_BAD_PCT, judge_ci
from hpcvar.results import Run
from hpcvar.units import format_interval

if TYPE_CHECKING:
    import pandas as pd


def _pct(x: float) -> str:
    return f"{100 * x:.2f}%"


def _ci(lo: float | None, hi: float | None, replicas: int, sep: str = "..") -> str:
    """The 95% CI of a slowdown; one replica has none ("n = 1")."""
    if lo is None or hi is None or lo != lo or hi != hi:
        return f"n = {replicas}"
    return format_interval(lo, hi, replicas, _pct, sep)


def render(console: Console, run: Run) -> None:
    """A stored 'sim jitter' run: one row per configuration and task count."""
    result = run.info["result"]
    t = Table(title=f"jitSim: {result['phases_n']} phases of W = {result['work_cycles']} cycles, "
                    f"barrier {result['barrier']}; T0 = {result['baseline_cycles']} cycles at the last point; "
                    f"Mtp/s = million task-phases per second", title_justify="left")
    from hpcvar.report.humanize import number

    freq = result.get("freq_hz")  # T in seconds where the trace's clock is known, as the report shows it
    for col in ("config", "tasks", "T (s)" if freq else "T (cycles)", "slowdown", "95% CI", "closed form",
                "coverage", "Mtp/s"):
        t.add_column(col, justify="right", overflow="fold")
    for p in result["points"]:
        cf = p.get("closed_form") or {}
        cf_txt = _pct(cf["expected_slowdown"]) if "expected_slowdown" in cf else "-"
        total = number(p["total_cycles"] / float(freq)) if freq else number(float(p["total_cycles"]))
        t.add_row(p["config"], str(p["tasks"]), total, _pct(p["slowdown"]),
                  _ci(p["slowdown_ci"][0], p["slowdown_ci"][1], int(p["replicas"])), cf_txt, _pct(p["coverage"]),
                  f"{p['task_phases_per_s'] / 1e6:.2f}")
    console.print(t)


def plots(run: Run) -> list[Path]:
    """The slowdown against the task count, and replica 0's phase durations."""
    return [plot_sweep(run.read_table("jitter.points"), run.plots_dir() / "sweep")[0],
            plot_phases(run.read_table("jitter.phases"), run.plots_dir() / "phases",
                        freq_hz=run.info["result"].get("freq_hz"))[0]]


def plot_sweep(points: pd.DataFrame, stem) -> list:
    import numpy as np

    from hpcvar.report.plots import figure, save

    fig, ax = figure()
    for cfg, grp in points.groupby("config", sort=False):
        grp = grp.sort_values("tasks")
        ax.errorbar(grp["tasks"], 100 * grp["slowdown"],
                    yerr=[100 * np.clip(grp["slowdown"] - grp["slowdown_ci_lo"], 0, None),
                          100 * np.clip(grp["slowdown_ci_hi"] - grp["slowdown"], 0, None)],
                    marker="o", capsize=3, label=cfg)
        if grp["closed_form_slowdown"].notna().any():
            ax.plot(grp["tasks"], 100 * grp["closed_form_slowdown"], ls="--", label=f"{cfg} (closed form)")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("tasks")
    ax.set_ylabel("slowdown T/T0 - 1 (%)")
    ax.legend(fontsize=8)
    return save(fig, stem)


def plot_phases(phases: pd.DataFrame, stem, freq_hz: float | None = None) -> list:
    """Phase durations of replica 0: one colour per configuration, the smallest and the largest task count
    (solid: largest); durations in ms when the trace's frequency is known, else in cycles."""
    from hpcvar.report.plots import figure, save

    scale, unit = (1e3 / freq_hz, "ms") if freq_hz else (1.0, "cycles")
    fig, ax = figure(figsize=(6.4, 4.4))
    for k, (cfg, grp) in enumerate(phases.groupby("config", sort=False)):
        counts = sorted(grp["tasks"].unique())
        for tasks, style in ((counts[-1], "-"), (counts[0], ":")) if len(counts) > 1 else ((counts[0], "-"),):
            g0 = grp[(grp["tasks"] == tasks) & (grp["replica"] == 0)].sort_values("phase")
            ax.plot(g0["phase"], g0["duration_cycles"] * scale, style, marker=".", color=f"C{k}",
                    label=f"{cfg}, {tasks:,} task{'s' if tasks > 1 else ''}")
    ax.set_xlabel("phase")
    ax.set_ylabel(f"phase duration ({unit})")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2, frameon=False)
    return save(fig, stem)


def _assumptions(run, res: dict) -> str:
    """What a predicted slowdown rests on: the grain, the phases, the barrier, the noise that was replayed."""
    freq = res.get("freq_hz") or 0
    grain = f"{res['work_cycles'] / freq * 1e3:.3g} ms" if freq and res.get("work_cycles") else "?"
    text = (f"for a {grain} compute grain, {res.get('phases_n', '?')} phases, a {res.get('barrier', '?')} barrier")
    for noise in _noise_runs(run):
        nres = noise.get("result") or {}
        lost = [c.get("noise_fraction", 0) for c in nres.get("cpus", [])]
        where = "a VM" if (noise.get("metadata") or {}).get("virtualized") else "this machine"
        att = nres.get("attribution") or {}
        steal = att.get("steal_s") or {}
        window = att.get("window_s") or 0
        text += f", replaying noise recorded on {where}"
        if lost:
            text += f" that lost up to {100 * max(lost):.3g}% of a CPU"
        if steal and window:
            text += f" (hypervisor steal up to {100 * max(steal.values()) / window:.1f}%)"
        break
    return text


def _noise_runs(run) -> list[dict]:
    """The run.json of the noise recordings a prediction replayed (its traces' runs)."""
    import json
    from pathlib import Path

    out = []
    for t in (run.info.get("params") or {}).get("traces") or []:
        src = Path(t)
        rj = (src if src.is_dir() else src.parent) / "run.json"
        try:
            info = json.loads(rj.read_text())
        except (OSError, ValueError):
            continue
        # a recording made as a characterization's step: that characterization's load while its steps ran
        if rj.parent.parent.name == "steps":
            try:
                info["_within_load"] = json.loads((rj.parent.parent.parent / "run.json").read_text()).get("load")
            except (OSError, ValueError):
                pass
        out.append(info)
    return out


def input_suspicion(run) -> str:
    """Why the noise a prediction replayed is suspect ('' when it is not): a prediction on suspect input is
    suspect itself, never bad."""
    from hpcvar.noise.analysis import recording_suspicion

    for noise in _noise_runs(run):
        why = recording_suspicion(noise.get("result") or {})
        load = noise.get("_within_load") or {}
        if not why and load.get("warning"):  # a multi-node recording keeps no preemption count: the load judges
            why = f"recorded while other processes used {load.get('others_pct', float('nan')):.0f}% of the CPUs"
        if why:
            return f"built on a noise recording that is suspect ({why})"
    return ""


def section(run: Run) -> Section:
    res = run.info.get("result") or {}
    sec = Section(title="Jitter slowdown predicted at scale (jitSim)")
    points = res.get("points", [])
    # one headline per configuration (trace x alignment), at its largest task count
    largest: dict = {}
    for p in points:
        if p["config"] not in largest or p["tasks"] > largest[p["config"]]["tasks"]:
            largest[p["config"]] = p
    assumptions = _assumptions(run, res)
    suspect_input = input_suspicion(run)
    for cfg, p in largest.items():
        lo, hi = p["slowdown_ci"]
        flag = judge_ci(lo, hi, replicas=int(p["replicas"]), impossible_below=0.0)  # noise only adds time
        if suspect_input:
            status, ref = SUSPECT, f"{suspect_input}; {assumptions}"
        elif flag:
            status, ref = flag[0], f"{flag[1]}; {assumptions}"
        elif p["slowdown"] > SLOWDOWN_BAD_PCT / 100:
            status, ref = BAD, f"above {SLOWDOWN_BAD_PCT:g}% {assumptions}"
        else:
            status, ref = GOOD, f"within {SLOWDOWN_BAD_PCT:g}% {assumptions}"
        sec.headlines.append(Headline(f"jitter slowdown, {cfg}, {p['tasks']:,} tasks",
                                      f"{_pct(p['slowdown'])} " + (f"[{_ci(lo, hi, int(p['replicas']), ', ')}]"
                                                                   if int(p["replicas"]) >= 2 else
                                                                   f"({_ci(lo, hi, int(p['replicas']))})"),
                                      f"T/T0 - 1 of compute + barrier phases, 95% CI over {p['replicas']} replicas; "
                                      f"T = {p.get('total_s', float('nan')):.4g} s", status, ref,
                                      role=PREDICTION))
    if run.has_table("jitter.points"):
        sec.tables.append(("Slowdown against task count",
                           points_for_people(run.read_table("jitter.points"), run.info["result"].get("freq_hz"))))
    sec.figures += figures_of(run, (("sweep", "Slowdown against tasks (log x)"),
                                    ("phases", "Phase durations (replica 0)")), plots)
    return sec


SLOWDOWNS = ("slowdown", "slowdown_ci_lo", "slowdown_ci_hi", "slowdown_vs_compute", "closed_form_slowdown")


def points_for_people(points: pd.DataFrame, freq_hz: float | None) -> pd.DataFrame:
    """jitter.points for the report: times in seconds when the trace's frequency is known (``total_s``, not
    ``total_cycles``), slowdowns in percent (``slowdown_pct``, not the fraction)."""
    out = points.copy()
    for c in SLOWDOWNS:
        if c in out:
            out = out.rename(columns={c: f"{c}_pct"})
            out[f"{c}_pct"] = out[f"{c}_pct"] * 100.0
    if freq_hz:
        out = out.rename(columns={c: c.removesuffix("_cycles") + "_s" for c in out.columns if c.endswith("_cycles")})
        for c in out.columns:
            if c.endswith("_s") and c != "sim_s" and f"{c.removesuffix('_s')}_cycles" in points:
                out[c] = out[c] / float(freq_hz)
    return out
