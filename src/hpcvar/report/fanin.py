"""Fan-in results for people: plots (the paper's Figures 5-11 style), terminal tables, report section."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from rich.console import Console
from rich.table import Table

from hpcvar.bench.fanin import chatter_label, strategy_label
from hpcvar.report.sections import Headline, Section, register
from hpcvar.units import format_rate_bytes, format_size, format_time_ns

MAX_SERIES_LINES = 12  # time-series figure: at most this many lines per panel


def _panels(points: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """Left: without chatter, right: with chatter (the paper's layout), whichever exist."""
    out = []
    if (points["chatter"] == 0).any():
        out.append(("- chatter", points[points["chatter"] == 0]))
    if (points["chatter"] > 0).any():
        out.append(("+ chatter", points[points["chatter"] > 0]))
    return out


def plot_fanin(run, points: pd.DataFrame, bins: pd.DataFrame) -> list[Path]:
    """Write the fan-in figures into run.plots_dir(); returns the PNG paths."""
    from hpcvar.report.plots import figure, save

    if points.empty:
        return []
    pngs: list[Path] = []
    d = run.plots_dir()
    panels = _panels(points)
    # 1. mean aggregate bandwidth vs clients, one line per strategy (Figures 5, 8, 9, 10)
    fig, axes = figure(1, len(panels), figsize=(6.0 * len(panels), 4.0), squeeze=False)
    for ax, (title, sub) in zip(axes[0], panels):
        mean = sub.groupby(["queues", "depth", "match", "chatter", "clients"])["aggregate_bytes_per_s"].mean()
        for (q, dep, m, ch), s in mean.groupby(level=[0, 1, 2, 3]):
            x = s.index.get_level_values("clients")
            ax.plot(x, s.to_numpy() / 1e6, marker="o",
                    label=f"{strategy_label(q, dep, m)} ({chatter_label(int(x[0]), int(ch))})")
        ax.set(title=f"aggregate bandwidth at the root, {title}", xlabel="large-buffer clients", ylabel="MB/s")
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=7)
    pngs.append(save(fig, d / "fanin-bandwidth")[0])
    # 2. one line per run, per strategy (Figures 6, 7, 11)
    for (q, dep, m), strat in points.groupby(["queues", "depth", "match"], sort=True):
        sp = _panels(strat)
        fig, axes = figure(1, len(sp), figsize=(6.0 * len(sp), 4.0), squeeze=False)
        for ax, (title, sub) in zip(axes[0], sp):
            for (rep, ch), s in sub.groupby(["rep", "chatter"]):
                s = s.sort_values("clients")
                ax.plot(s["clients"], s["aggregate_bytes_per_s"] / 1e6, marker=".", alpha=0.8,
                        label=f"run {rep}" + (f", {ch} chatter" if ch else ""))
            ax.set(title=f"{strategy_label(q, dep, m)}: runs, {title}", xlabel="large-buffer clients",
                   ylabel="MB/s")
            ax.set_ylim(bottom=0)
            ax.legend(fontsize=7)
        pngs.append(save(fig, d / f"fanin-runs-{q}-{dep}-{m}")[0])
    # 3. the root's receive rate over time, at the largest client count
    if len(bins):
        top = int(points["clients"].max())
        b = bins[(bins["clients"] == top) & bins["full"]]
        bp = _panels(points[points["clients"] == top])
        fig, axes = figure(1, max(len(bp), 1), figsize=(6.0 * max(len(bp), 1), 4.0), squeeze=False)
        for ax, (title, sub) in zip(axes[0], bp):
            n = 0
            for r in sub.itertuples():
                if n >= MAX_SERIES_LINES:
                    break
                s = b[(b["rep"] == r.rep) & (b["chatter"] == r.chatter) & (b["queues"] == r.queues)
                      & (b["depth"] == r.depth) & (b["match"] == r.match)]
                s = s.groupby("t_start_s")[["large_bytes_per_s", "small_bytes_per_s"]].sum()
                if s.empty:
                    continue
                line = ax.plot(s.index, s["large_bytes_per_s"] / 1e6, lw=1,
                               label=f"{strategy_label(r.queues, r.depth, r.match)} run {r.rep}")[0]
                if r.chatter:
                    ax.plot(s.index, s["small_bytes_per_s"] / 1e6, lw=1, ls=":", color=line.get_color())
                n += 1
            ax.set(title=f"root receive rate, {top} clients, {title}", xlabel="time since start (s)",
                   ylabel="MB/s (dotted: chatter)")
            ax.set_ylim(bottom=0)
            ax.legend(fontsize=7)
        pngs.append(save(fig, d / "fanin-timeseries")[0])
    return pngs


def _fmt_depth(d) -> str:
    return str(d)


def render_fanin(console: Console, result: dict) -> None:
    t = Table(title=f"Fan-in: {result['servers']} root(s), large {format_size(result['large'])}, "
                    f"chatter {format_size(result['small'])}", title_justify="left")
    for c in ("run", "clients", "chatter", "queues", "depth", "match", "aggregate", "chatter bw", "Jain",
              "chatter RTT p50", "p99"):
        t.add_column(c, justify="right", no_wrap=True)
    for p in result["points"]:
        t.add_row(str(p["rep"]), str(p["clients"]), str(p["chatter"]), p["queues"], _fmt_depth(p["depth"]),
                  p["match"], format_rate_bytes(p["aggregate_bytes_per_s"]),
                  format_rate_bytes(p["chatter_bytes_per_s"]) if p["chatter"] else "-",
                  f"{p['jain_index']:.3f}",
                  format_time_ns(p["chatter_rtt_median_ns"]) if p["chatter_rtt_n"] else "-",
                  format_time_ns(p["chatter_rtt_p99_ns"]) if p["chatter_rtt_n"] else "-")
    console.print(t)
    var = [v for v in result.get("variability", []) if v["runs"] > 1]
    if var:
        v = Table(title="Run-to-run variability of the aggregate bandwidth", title_justify="left")
        for c in ("clients", "chatter", "strategy", "runs", "mean", "run range", "CV between", "CV overall",
                  "between/within"):
            v.add_column(c, justify="right", no_wrap=True)
        for r in var:
            v.add_row(str(r["clients"]), str(r["chatter"]), strategy_label(r["queues"], r["depth"], r["match"]),
                      str(r["runs"]), format_rate_bytes(r["mean_bytes_per_s"]),
                      f"{format_rate_bytes(r['run_mean_min'])} - {format_rate_bytes(r['run_mean_max'])}",
                      f"{r['cv_between']:.3f}", f"{r['cv_overall']:.3f}", f"{r['between_over_within']:.3g}")
        console.print(v)
    eff = result.get("chatter_effect", [])
    if eff:
        e = Table(title="Effect of chatter on the large-buffer bandwidth", title_justify="left")
        for c in ("clients", "strategy", "chatter", "without", "with", "drop"):
            e.add_column(c, justify="right", no_wrap=True)
        for r in eff:
            e.add_row(str(r["clients"]), strategy_label(r["queues"], r["depth"], r["match"]), str(r["chatter"]),
                      format_rate_bytes(r["without_bytes_per_s"]), format_rate_bytes(r["with_bytes_per_s"]),
                      f"{r['drop_pct']:.1f}%")
        console.print(e)
    for p in result.get("plots", []):
        console.print(f"plot: {p}")
    if result.get("run"):
        console.print(f"stored in {result['run']}")


@register("bench fanin")
def fanin_section(run) -> Section:
    res = run.info.get("result") or {}
    sec = Section(title="Fan-in (many clients into one root)")
    pts = pd.DataFrame(res.get("points", []))
    if not pts.empty:
        best = pts.loc[pts["aggregate_bytes_per_s"].idxmax()]
        sec.headlines.append(Headline(
            "peak aggregate bandwidth", format_rate_bytes(best["aggregate_bytes_per_s"]),
            f"at {best['clients']} clients, {best['chatter']} chatter, "
            f"{strategy_label(best['queues'], best['depth'], best['match'])}"))
        jain = pts.loc[pts["chatter"] == 0, "jain_index"].dropna()
        if len(jain):
            sec.headlines.append(Headline("lowest Jain index without chatter", f"{jain.min():.3f}",
                                          "1 = every large-buffer client got the same bytes"))
        cols = ["rep", "clients", "chatter", "queues", "depth", "match", "aggregate_bytes_per_s",
                "chatter_bytes_per_s", "jain_index", "chatter_rtt_median_ns", "chatter_rtt_p99_ns"]
        sec.tables.append(("points", pts[cols]))
    eff = pd.DataFrame(res.get("chatter_effect", []))
    if not eff.empty:
        worst = eff.loc[eff["drop_pct"].idxmax()]
        sec.headlines.append(Headline("largest bandwidth drop under chatter", f"{worst['drop_pct']:.1f}%",
                                      f"{worst['clients']} clients with {worst['chatter']} chatter clients"))
        sec.tables.append(("effect of chatter", eff))
    var = pd.DataFrame(res.get("variability", []))
    if not var.empty and (var["runs"] > 1).any():
        sec.tables.append(("run-to-run variability", var[var["runs"] > 1]))
    pdir = run.path / "plots"
    for png in sorted(pdir.glob("fanin-*.png")) if pdir.is_dir() else []:
        sec.figures.append((png.stem, png))
    for w in run.info.get("warnings", []):
        sec.notes.append(w)
    return sec


__all__ = ["fanin_section", "plot_fanin", "render_fanin"]
