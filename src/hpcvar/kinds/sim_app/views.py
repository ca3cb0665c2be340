"""The views of 'sim app' runs: terminal tables, figures (the paper's Figures 8-9), the HTML report section."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from hpcvar.report.sections import MODEL, Headline, Section, figures_of
from hpcvar.report.terminal import Cell, seconds
from hpcvar.report.verdict import judge_error_pct
from hpcvar.results import Run


def _conflicts(c: dict) -> str:
    return " ".join(f"{k}:{v}" for k, v in sorted(c.items())) or "-"


def render(console: Console, run: Run) -> None:
    """A stored 'sim app' run: per mapping x model, the tasks; then the comparison (and the breakdown)."""
    out = run.info["result"]
    cl = out["cluster"]
    console.print(f"{out['trace']}: {out['ntasks']} tasks on {cl['nodes']} nodes x {cl['cores_per_node']} cores; "
                  f"collectives {out['collectives']}"
                  + ("; each message a flow of its own (--pair-messages shared)"
                     if cl.get("pair_messages", "shared") == "shared" else ""))  # runs before the option: shared
    for one in out["runs"]:
        console.print(_tasks_table(one, out["timed"], run.id))
    console.print(_comparison(out["runs"], out["timed"]))
    if "replay.breakdown" in run.info.get("tables", []):
        render_breakdown(console, run.read_table("replay.breakdown"))


TASK_ROWS = 16  # beyond this many tasks the terminal lists the ones that matter (every task stays in replay.tasks)


def _shown_tasks(tasks: list[dict], timed: bool) -> tuple[list[dict], str]:
    """The tasks the table lists, in task order, and what it says about the others: all of them up to TASK_ROWS;
    beyond, the TASK_ROWS with the largest E_abs (timed) or communication time (the ones that make the makespan),
    and a caption with the range over every task."""
    if len(tasks) <= TASK_ROWS:
        return tasks, ""
    key = "e_abs_pct" if timed else "comm_s"
    order = sorted(range(len(tasks)), key=lambda i: -tasks[i][key] if math.isfinite(tasks[i][key]) else math.inf)
    shown = [tasks[i] for i in sorted(order[:TASK_ROWS])]
    comm = np.array([r["comm_s"] for r in tasks], dtype=float)
    text = (f"the {TASK_ROWS} of {len(tasks)} tasks with the largest {'E_abs' if timed else 'communication time'}; "
            f"comm over all of them {comm.min():.6g} to {comm.max():.6g} s, median {np.median(comm):.6g} s")
    if timed:
        text += f"; mean E_abs {np.mean([r['e_abs_pct'] for r in tasks]):.1f} %"
    return shown, text


def _tasks_table(one: dict, timed: bool, run_id: str = "") -> Table:
    shown, caption = _shown_tasks(one["tasks"], timed)
    if caption and run_id:
        caption += f" (every task: hpcvar runs show {run_id} --format csv)"
    t = Table(title=f"mapping {one['mapping']}, model {one['model']}"
                    + (f", {one['replicas']} replicas (median)" if one["replicas"] > 1 else ""),
              title_justify="left", box=None, caption=caption or None, caption_justify="left")
    cols = ["task", "node", "total", "comm", "avg penalty", "conflicts"] + (["measured comm", "E_abs %"] if timed
                                                                            else [])
    for c in cols:
        t.add_column(c, justify="right" if c != "conflicts" else "left")
    for r in shown:
        cells: list[Cell | str] = [str(r["task"]), str(r["node"]), seconds(r["total_s"]), seconds(r["comm_s"]),
                                   f"{r['avg_penalty']:.2f}", _conflicts(r["conflicts"])]
        if timed:
            cells += [seconds(r["measured_comm_s"]), f"{r['e_abs_pct']:.1f}"]
        t.add_row(*cells)
    return t


def _comparison(runs: list[dict], timed: bool) -> Table:
    s = Table(title="comparison", title_justify="left", box=None)
    for c in ["mapping", "model", "makespan"] + (["mean E_abs %"] if timed else []) + ["engine", "events/s"]:
        s.add_column(c, justify="left" if c in ("mapping", "model", "engine") else "right")
    for one in runs:
        cells: list[Cell | str] = [one["mapping"], one["model"], seconds(one["makespan_s"])]
        if timed:
            v = one.get("mean_e_abs_pct")
            cells.append("-" if v is None else f"{v:.1f}")
        eps = one.get("events_per_s")
        cells += [str(one.get("engine", "-")), "-" if not eps else f"{eps:,.0f}"]
        s.add_row(*cells)
    return s


BREAKDOWN_TASKS = 8  # beyond this many tasks the breakdown views sum over tasks (the table keeps every task)


def breakdown_views(bd) -> tuple:
    """(by kind, by phase) of a replay.breakdown table: replica 0 of each mapping x model, per task (summed over
    tasks beyond BREAKDOWN_TASKS), with the error (predicted - measured) and the times per call."""
    import pandas as pd

    bd = bd[bd["replica"] == 0].copy()
    if bd["task"].nunique() > BREAKDOWN_TASKS:
        bd["task"] = "all"
    bd["error_s"] = bd["predicted_s"] - bd["measured_s"]
    sums = {"calls": "sum", "measured_s": "sum", "predicted_s": "sum", "error_s": "sum"}
    kind = bd.groupby(["mapping", "model", "task", "kind"], sort=False, as_index=False).agg(sums)
    kind["measured_per_call_s"] = kind["measured_s"] / kind["calls"].where(kind["calls"] > 0)
    kind["predicted_per_call_s"] = kind["predicted_s"] / kind["calls"].where(kind["calls"] > 0)
    keys = ["mapping", "model", "task", "phase", "phase_start_s", "phase_end_s"]
    phase = bd.groupby(keys, sort=False, as_index=False).agg(sums)
    worst = bd.loc[bd["error_s"].abs().groupby([bd[k] for k in keys], sort=False).idxmax().to_numpy()]
    phase["largest_error_kind"] = worst["kind"].to_numpy()
    return kind, pd.DataFrame(phase)


def render_breakdown(console: Console, bd) -> None:
    """The breakdown in the terminal: per mapping x model (replica 0), by call kind, then by phase."""
    kind, phase = breakdown_views(bd)
    for (mp, m), k in kind.groupby(["mapping", "model"], sort=False):
        t = Table(title=f"breakdown by call kind: mapping {mp}, model {m} (replica 0); error = predicted - "
                        "measured", title_justify="left", box=None)
        for c in ("task", "kind", "calls", "measured", "predicted", "error", "measured/call", "predicted/call"):
            t.add_column(c, justify="left" if c == "kind" else "right")
        for r in k.itertuples():
            t.add_row(str(r.task), r.kind, str(r.calls), seconds(r.measured_s), seconds(r.predicted_s),
                      seconds(r.error_s), seconds(r.measured_per_call_s), seconds(r.predicted_per_call_s))
        console.print(t)
        p = phase[(phase["mapping"] == mp) & (phase["model"] == m)]
        t = Table(title=f"breakdown by phase (slices of each task's measured span): mapping {mp}, model {m}",
                  title_justify="left", box=None)
        for c in ("task", "phase", "from", "to", "calls", "measured", "predicted", "error", "largest error"):
            t.add_column(c, justify="left" if c == "largest error" else "right")
        for r in p.itertuples():
            t.add_row(str(r.task), str(r.phase), seconds(r.phase_start_s), seconds(r.phase_end_s), str(r.calls),
                      seconds(r.measured_s), seconds(r.predicted_s), seconds(r.error_s),
                      r.largest_error_kind)
        console.print(t)


def plot_comparison(runs: list[dict], stem) -> list[Path]:
    """The paper's Figures 8-9: measured and predicted comm time per task (bars), E_abs (line), per run."""
    from hpcvar.report.plots import figure, save

    fig, axes = figure(len(runs), 1, figsize=(7, 2.6 * len(runs)), squeeze=False)
    for ax, run in zip(axes[:, 0], runs, strict=True):
        tasks = [r["task"] for r in run["tasks"]]
        x = np.arange(len(tasks))
        pred = [r["comm_s"] for r in run["tasks"]]
        if "measured_comm_s" in run["tasks"][0]:
            ax.bar(x - 0.2, [r["measured_comm_s"] for r in run["tasks"]], 0.4, label="measured")
            ax.bar(x + 0.2, pred, 0.4, label="predicted")
            ax2 = ax.twinx()
            ax2.plot(x, [r["e_abs_pct"] for r in run["tasks"]], "k.-", label="E_abs")
            ax2.set_ylabel("E_abs (%)")
        else:
            ax.bar(x, pred, 0.6, label="predicted")
        ax.set_xticks(x, [str(t) for t in tasks])
        ax.set_xlabel("MPI task")
        ax.set_ylabel("communication time (s)")
        ax.set_title(f"mapping {run['mapping']}, model {run['model']}")
        ax.legend(loc="upper left", fontsize=8)
    return save(fig, Path(stem))


def plot_e_abs(runs: list[dict], stem) -> list[Path]:
    """Mean E_abs per mapping x model (bars; whiskers: the per-task range)."""
    from hpcvar.report.plots import figure, save

    fig, ax = figure()
    labels, means, lo, hi = [], [], [], []
    for run in runs:
        ea = np.array([r["e_abs_pct"] for r in run["tasks"]], float)
        ea = ea[np.isfinite(ea)]
        if not ea.size:
            continue
        labels.append(f"{run['mapping']}\n{run['model']}")
        m = float(ea.mean())
        means.append(m)
        lo.append(m - ea.min())
        hi.append(ea.max() - m)
    x = np.arange(len(labels))
    ax.bar(x, means, 0.6, yerr=[lo, hi], capsize=3)
    ax.set_xticks(x, labels, fontsize=8)
    ax.set_ylabel("mean E_abs over tasks (%)")
    ax.set_title("prediction error per mapping and model (whiskers: per-task min..max)")
    return save(fig, Path(stem))


def plots(run: Run) -> list[Path]:
    """Measured and predicted communication time per task (every mapping x model), and with several of them
    the mean E_abs of each, when the run asked for its figures (--plots; runs of earlier versions drew them
    unless --no-plots); the comparison also at --plot STEM."""
    params = run.info.get("params") or {}
    out = run_figures(run) if params.get("plots", True) else []
    if params.get("plot_stem"):
        out += plot_comparison(run.info["result"]["runs"], params["plot_stem"])
    return out


FIGURES = (("comm_per_task", "Measured and predicted communication time per task, with E_abs (the paper's "
                             "Figures 8-9)"),
           ("e_abs", "Mean E_abs per mapping and model"))


def run_figures(run: Run) -> list[Path]:
    """The run's own figures, drawn into its plots/ from its result."""
    res = run.info["result"]
    out = plot_comparison(res["runs"], run.plots_dir() / "comm_per_task")
    if len(res["runs"]) > 1 and res.get("timed"):
        out += plot_e_abs(res["runs"], run.plots_dir() / "e_abs")
    return out


def section(run: Run) -> Section:
    # what the run resolved is in its result (runs of 55a5545 and before kept it in their params)
    p = {**(run.info.get("params") or {}), **(run.info.get("result") or {})}
    cl = p.get("cluster", {})
    sec = Section(title=f"Application replay: {Path(p.get('trace', '?')).name}")
    runs = run.read_table("replay.runs")
    tasks = run.read_table("replay.tasks")
    if runs.empty:
        sec.notes.append("The run stored no replay.")
        return sec
    timed = bool(p.get("timed", True))
    if timed and runs["mean_e_abs_pct"].notna().any():
        best = runs.loc[runs["mean_e_abs_pct"].idxmin()]
        sec.headlines.append(Headline(
            "smallest mean E_abs", f"{best.mean_e_abs_pct:.1f} %",
            f"mapping {best.mapping}, model {best.model}: |S_p - S_m| / S_m of the communication time, "
            "averaged over tasks", *judge_error_pct(float(best.mean_e_abs_pct), "mean E_abs"), role=MODEL))
    fast = runs.loc[runs["makespan_s"].idxmin()]
    sec.headlines.append(Headline("shortest predicted makespan", f"{fast.makespan_s:.6g} s",
                                  f"mapping {fast.mapping}, model {fast.model}"))
    eps = runs["events_per_s"].dropna()
    if len(eps):
        sec.headlines.append(Headline("replay speed", f"{eps.median():,.0f} events/s",
                                      f"median over the runs; engine {', '.join(sorted(set(runs['engine'])))}"))
    sec.tables.append(("Mapping x model: predicted makespan and mean E_abs", runs))
    cols = ["mapping", "model", "task", "node", "total_s", "comm_s", "measured_comm_s", "e_abs_pct", "avg_penalty",
            "conflicts_out", "conflicts_in", "conflicts_in_out"]
    sec.tables.append(("Per task: predicted and measured communication time, E_abs, penalties, conflicts met",
                       tasks[cols]))
    if "replay.breakdown" in run.info.get("tables", []):
        kind, phase = breakdown_views(run.read_table("replay.breakdown"))
        sec.tables.append(("Where the error comes from, by MPI call kind (replica 0; error = predicted - measured; "
                           "the kinds of a task sum to its S_m and S_p)", kind))
        sec.tables.append(("By phase: equal slices of each task's measured span, a call in the slice where it "
                           "starts", phase))
    sec.figures += figures_of(run, FIGURES, run_figures)
    sec.notes.append(
        f"Cluster: {cl.get('nodes')} nodes x {cl.get('cores_per_node')} cores, "
        f"{_fmt(cl.get('bandwidth_bytes_per_s'))} B/s, latency {_fmt(cl.get('latency_s'))} s; collectives "
        f"{p.get('collectives')}; eager limit {p.get('eager_bytes')} B"
        + (f"; jitter {p.get('jitter')} ({p.get('align')})" if p.get("jitter") else "") + ".")
    if not timed:
        sec.notes.append("The trace has no measured times (TIT import): no E_abs.")
    return sec


def _fmt(v) -> str:
    return "?" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.4g}"


__all__ = ["breakdown_views", "plot_comparison", "plot_e_abs", "plots", "render", "render_breakdown", "section"]
