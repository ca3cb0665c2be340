"""Terminal tables of bandwidth sharing: measured penalties, model penalties, model evaluation."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from hpcvar.units import format_size, format_time_ns


def render_sharing(console: Console, run) -> None:
    """A stored 'bench sharing' run: the measured penalties."""
    result = run.info["result"]
    t = Table(title=f"Bandwidth sharing, measured penalties (T_ref {format_time_ns(result['t_ref_ns'])}, "
                    f"{result['reps']} reps)", title_justify="left")
    for col in ("comm", "src -> dst", "size", "T (median)", "penalty", "95% CI", "min", "max"):
        t.add_column(col, justify="right", no_wrap=True)
    for c in result["communications"]:
        lo, hi = c["penalty_ci"]
        t.add_row(c["name"], f"{c['src']} -> {c['dst']}", format_size(c["size_bytes"]), format_time_ns(c["t_ns"]),
                  f"{c['penalty']:.2f}", f"{lo:.2f}-{hi:.2f}", f"{c['penalty_min']:.2f}", f"{c['penalty_max']:.2f}")
    console.print(t)


def render_penalties(console: Console, result: dict) -> None:
    t = Table(title=f"Model '{result['model']}' penalties", title_justify="left")
    cols = ["comm", "src -> dst", "penalty"]
    timed = any("t_predicted_s" in c for c in result["communications"])
    if timed:
        cols.append("predicted T")
    for col in cols:
        t.add_column(col, justify="right", no_wrap=True)
    for c in result["communications"]:
        row = [c["name"], f"{c['src']} -> {c['dst']}", f"{c['penalty']:.3f}"]
        if timed:
            row.append(format_time_ns(c["t_predicted_s"] * 1e9))
        t.add_row(*row)
    console.print(t)
    if result.get("params"):
        console.print("parameters: " + ", ".join(f"{k}={v}" for k, v in result["params"].items()))


def render_evaluation(console: Console, result: dict) -> None:
    models = result["models"]
    t = Table(title=f"Predicted vs measured times (run {result['run_id']}), E_rel in %", title_justify="left")
    t.add_column("comm", justify="right")
    t.add_column("T_m", justify="right")
    for m in models:
        t.add_column(f"T_p {m}", justify="right")
        t.add_column(f"E_rel {m}", justify="right")
    for c in result["communications"]:
        row = [c["name"], format_time_ns(c["t_measured_ns"])]
        for m in models:
            row += [format_time_ns(c["predicted"][m]["t_ns"]), f"{c['predicted'][m]['e_rel_pct']:+.1f}"]
        t.add_row(*row)
    t.add_row("E_abs", "", *[x for m in models for x in ("", f"{result['e_abs_pct'][m]:.1f}")], style="bold")
    console.print(t)
    for p in result.get("plots", []):
        console.print(f"plot: {p}")
