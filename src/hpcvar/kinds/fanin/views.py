"""The views of 'bench fanin' runs: figures (the paper's Figures 5-11 style), terminal tables, report section,
metrics."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from rich.console import Console
from rich.table import Table

from hpcvar.compare import Metric
from hpcvar.kinds.fanin.job import strategy_label
from hpcvar.report.sections import BAD, GOOD, INFO, Headline, Section
from hpcvar.report.terminal import Cell, ns, rate
from hpcvar.report.verdict import JAIN_GOOD, judge_rate, link_rate
from hpcvar.results import Run
from hpcvar.units import format_rate_bytes, format_size

MAX_SERIES_LINES = 12  # time-series figure: at most this many lines per panel


def _panels(points: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """Left: without chatter, right: with chatter (the paper's layout), whichever exist."""
    out = []
    if (points["chatter"] == 0).any():
        out.append(("- chatter", points[points["chatter"] == 0]))
    if (points["chatter"] > 0).any():
        out.append(("+ chatter", points[points["chatter"] > 0]))
    return out


def plots(run: Run) -> list[Path]:
    """The fan-in figures of a stored run; chatter settings are ratios when the run swept --chatter-ratio (no
    --chatter counts)."""
    by_ratio = (run.info.get("params") or {}).get("chatter") is None
    return plot_fanin(run, run.read_table("fanin.points"), run.read_table("fanin.bins"), by_ratio)


def plot_fanin(run, points: pd.DataFrame, bins: pd.DataFrame, by_ratio: bool = True) -> list[Path]:
    """Write the fan-in figures into run.plots_dir(); returns the PNG paths.

    fanin-bandwidth: mean aggregate bandwidth vs clients, one line per strategy and chatter setting
    (the paper's Figures 5, 8, 9, 10). fanin-runs-<queues>-<depth>-<match>: per strategy, top row one
    line per run (Figures 6, 7, 11), bottom row the root's receive rate over time at the largest
    client count, one line per run. Chatter settings are ratios (chatter / clients) when ``by_ratio``.
    """
    from hpcvar.report.plots import figure, save

    if points.empty:
        return []
    points = points.assign(cset=points["chatter"] / points["clients"] if by_ratio else points["chatter"])
    d = run.plots_dir()

    def cname(cset) -> str:
        return "- chatter" if cset == 0 else (f"+ chatter {cset:g}:1" if by_ratio else f"+ {cset:g} chatter")

    panels = _panels(points)
    fig, axes = figure(1, len(panels), figsize=(6.0 * len(panels), 4.0), squeeze=False)
    for ax, (title, sub) in zip(axes[0], panels, strict=True):
        _bandwidth_panel(ax, title, sub, cname)
    pngs = [save(fig, d / "fanin-bandwidth")[0]]

    full = bins[bins["full"]] if len(bins) else bins
    for (q, dep, m), strat in points.groupby(["queues", "depth", "match"], sort=True):
        sp = _panels(strat)
        fig, axes = figure(2, len(sp), figsize=(6.0 * len(sp), 7.5), squeeze=False)
        for col, (title, sub) in enumerate(sp):
            _runs_panel(axes[0][col], title, sub, (q, dep, m), cname)
            _series_panel(axes[1][col], title, sub, full, (q, dep, m))
        pngs.append(save(fig, d / f"fanin-runs-{q}-{dep}-{m}")[0])
    return pngs


def _bandwidth_panel(ax, title: str, sub: pd.DataFrame, cname) -> None:
    """Mean aggregate bandwidth against clients, a line per strategy and chatter setting (a bar each when the
    sweep has one client count)."""
    from matplotlib.ticker import MaxNLocator

    mean = sub.groupby(["queues", "depth", "match", "cset", "clients"])["aggregate_bytes_per_s"].mean()
    if sub["clients"].nunique() == 1:  # one client count: a bar per strategy, not a line of one point
        labels = [f"{strategy_label(q, dep, m)}\n({cname(cs)})" for q, dep, m, cs, _ in mean.index]
        ax.bar(range(len(mean)), mean.to_numpy() / 1e6, color=[f"C{i}" for i in range(len(mean))])
        ax.set_xticks(range(len(mean)), labels, fontsize=7)
        ax.set(title=f"aggregate bandwidth at the root, {int(sub['clients'].iloc[0])} large-buffer clients, "
                     f"{title}", ylabel="MB/s")
        ax.set_ylim(bottom=0)
        return
    for (q, dep, m, cs), s in mean.groupby(level=[0, 1, 2, 3]):
        ax.plot(s.index.get_level_values("clients"), s.to_numpy() / 1e6, marker="o",
                label=f"{strategy_label(q, dep, m)} ({cname(cs)})")
    ax.set(title=f"aggregate bandwidth at the root, {title}", xlabel="large-buffer clients", ylabel="MB/s")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=7)


def _runs_panel(ax, title: str, sub: pd.DataFrame, strategy: tuple, cname) -> None:
    """One strategy's aggregate bandwidth against clients, a line per run."""
    for (rep, cs), s in sub.groupby(["rep", "cset"]):
        s = s.sort_values("clients")
        one = len(s) == 1  # a run of one point: a marker people see, not a dot
        ax.plot(s["clients"], s["aggregate_bytes_per_s"] / 1e6, marker="o" if one else ".", ms=8 if one else 6,
                alpha=0.8,
                label=f"run {rep}" + (f" ({cname(cs)})" if cs else ""))
    ax.set(title=f"{strategy_label(*strategy)}: one line per run, {title}",
           xlabel="large-buffer clients", ylabel="aggregate MB/s")
    _client_axis(ax, sub["clients"])
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=7)


def _series_panel(ax, title: str, sub: pd.DataFrame, full: pd.DataFrame, strategy: tuple) -> None:
    """The root's receive rate over time at the largest client count, a line per run (dotted: chatter)."""
    q, dep, m = strategy
    top = int(sub["clients"].max())
    for n, r in enumerate(sub[sub["clients"] == top].itertuples()):
        if n >= MAX_SERIES_LINES or not len(full):
            break
        s = full[(full["rep"] == r.rep) & (full["clients"] == top) & (full["chatter"] == r.chatter)
                 & (full["queues"] == q) & (full["depth"] == dep) & (full["match"] == m)]
        s = s.groupby("t_start_s")[["large_bytes_per_s", "small_bytes_per_s"]].sum()
        if s.empty:
            continue
        line = ax.plot(s.index, s["large_bytes_per_s"] / 1e6, lw=1, label=f"run {r.rep}")[0]
        if r.chatter:
            ax.plot(s.index, s["small_bytes_per_s"] / 1e6, lw=1, ls=":", color=line.get_color())
    ax.set(title=f"root receive rate over time, {top} clients, {title}", xlabel="time since start (s)",
           ylabel="MB/s (dotted: chatter)")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=7)


def _client_axis(ax, clients: pd.Series) -> None:
    """Integer ticks of client counts; one count is centred with a unit margin (not 0.95..1.05)."""
    from matplotlib.ticker import MaxNLocator

    if clients.nunique() == 1:
        n = int(clients.iloc[0])
        ax.set_xlim(n - 1, n + 1)
        ax.set_xticks([n])
    else:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))


def fanin_caption(stem: str) -> str:
    """What a stored fan-in figure shows, from its name."""
    if stem == "fanin-bandwidth":
        return ("Aggregate bandwidth of the large-buffer clients at the root, per strategy, without (left) and "
                "with (right) chatter clients")
    parts = stem.split("-")
    if len(parts) == 5 and parts[1] == "runs":
        return (f"Strategy {strategy_label(parts[2], parts[3], parts[4])}: aggregate bandwidth of each run (top), "
                "and the root's receive rate over time at the largest client count (bottom; dotted: chatter)")
    return stem


def _fmt_depth(d) -> str:
    return str(d)


def render(console: Console, run: Run) -> None:
    """A stored 'bench fanin' run: points, run-to-run variability, effect of chatter."""
    result = run.info["result"]
    t = Table(title=f"Fan-in: {result['servers']} root(s), large {format_size(result['large'])}, "
                    f"chatter {format_size(result['small'])}", title_justify="left")
    for c in ("run", "clients", "chatter", "queues", "depth", "match", "aggregate", "chatter bw", "Jain",
              "chatter RTT p50", "p99"):
        t.add_column(c, justify="right", no_wrap=True)
    for p in result["points"]:
        t.add_row(str(p["rep"]), str(p["clients"]), str(p["chatter"]), p["queues"], _fmt_depth(p["depth"]),
                  p["match"], rate(p["aggregate_bytes_per_s"]),
                  rate(p["chatter_bytes_per_s"] if p["chatter"] else None), f"{p['jain_index']:.3f}",
                  ns(p["chatter_rtt_median_ns"] if p["chatter_rtt_n"] else None),
                  ns(p["chatter_rtt_p99_ns"] if p["chatter_rtt_n"] else None))
    console.print(t)
    var = [v for v in result.get("variability", []) if v["runs"] > 1]
    if var:
        v = Table(title="Run-to-run variability of the aggregate bandwidth", title_justify="left")
        for c in ("clients", "chatter", "strategy", "runs", "mean", "run range", "CV between", "CV overall",
                  "between/within"):
            v.add_column(c, justify="right", no_wrap=True)
        for r in var:
            v.add_row(str(r["clients"]), str(r["chatter"]), strategy_label(r["queues"], r["depth"], r["match"]),
                      str(r["runs"]), rate(r["mean_bytes_per_s"]), Cell("rate", r["run_mean_min"], r["run_mean_max"]),
                      f"{r['cv_between']:.3f}", f"{r['cv_overall']:.3f}", f"{r['between_over_within']:.3g}")
        console.print(v)
    eff = result.get("chatter_effect", [])
    if eff:
        e = Table(title="Effect of chatter on the large-buffer bandwidth", title_justify="left")
        for c in ("clients", "strategy", "chatter", "without", "with", "drop"):
            e.add_column(c, justify="right", no_wrap=True)
        for r in eff:
            e.add_row(str(r["clients"]), strategy_label(r["queues"], r["depth"], r["match"]), str(r["chatter"]),
                      rate(r["without_bytes_per_s"]), rate(r["with_bytes_per_s"]),
                      f"{r['drop_pct']:.1f}%")
        console.print(e)
        if min(r["drop_pct"] for r in eff) < 0:
            console.print(RISE_NOTE)


RISE_NOTE = "a negative drop is a rise, not a drop: the large-buffer bandwidth was higher with chatter than without"


def drop_meaning(drop_pct: float, clients, chatter) -> str:
    """What the largest drop under chatter means; a negative one is a rise (no point lost bandwidth)."""
    where = f"{clients} clients with {chatter} chatter clients"
    if drop_pct < 0:
        return (f"{where}; a rise, not a drop: at every point the large-buffer bandwidth was higher with chatter "
                f"(by {-drop_pct:.1f}% or more), so chatter cost no measurable bandwidth here")
    return where


def section(run: Run) -> Section:
    res = run.info.get("result") or {}
    sec = Section(title="Fan-in (many clients into one root)")
    pts = pd.DataFrame(res.get("points", []))
    if not pts.empty:
        best = pts.loc[pts["aggregate_bytes_per_s"].idxmax()]
        limit, text = link_rate(run)
        status, ref = judge_rate(float(best["aggregate_bytes_per_s"]), limit, text)
        sec.headlines.append(Headline(
            "peak aggregate bandwidth", format_rate_bytes(best["aggregate_bytes_per_s"]),
            f"at {best['clients']} clients, {best['chatter']} chatter, "
            f"{strategy_label(best['queues'], best['depth'], best['match'])}", status,
            ref + " (the root's link)" if limit else ref))
        jain = pts.loc[pts["chatter"] == 0, "jain_index"].dropna()
        if len(jain):
            one = int(pts["clients"].max()) < 2
            status, ref = (INFO, "one large-buffer client: fairness is 1 by definition") if one else \
                (GOOD, f"at least {JAIN_GOOD:g}: fair shares") if jain.min() >= JAIN_GOOD else \
                (BAD, f"under {JAIN_GOOD:g}: some clients starve")
            sec.headlines.append(Headline("lowest Jain index without chatter", f"{jain.min():.3f}",
                                          "1 = every large-buffer client got the same bytes", status, ref))
        cols = ["rep", "clients", "chatter", "queues", "depth", "match", "aggregate_bytes_per_s",
                "chatter_bytes_per_s", "jain_index", "chatter_rtt_median_ns", "chatter_rtt_p99_ns"]
        sec.tables.append(("points", pts[cols]))
    eff = pd.DataFrame(res.get("chatter_effect", []))
    if not eff.empty:
        worst = eff.loc[eff["drop_pct"].idxmax()]
        sec.headlines.append(Headline("largest bandwidth drop under chatter", f"{worst['drop_pct']:.1f}%",
                                      drop_meaning(float(worst["drop_pct"]), worst["clients"], worst["chatter"])))
        sec.tables.append(("effect of chatter", eff))
    var = pd.DataFrame(res.get("variability", []))
    if not var.empty and (var["runs"] > 1).any():
        sec.tables.append(("run-to-run variability", var[var["runs"] > 1]))
    pdir = run.path / "plots"
    for png in sorted(pdir.glob("fanin-*.png")) if pdir.is_dir() else []:
        sec.figures.append((fanin_caption(png.stem), png))
    return sec


def metrics(run: Run) -> list[Metric]:
    b = run.read_table("fanin.bins")
    b = b[b["full"]]
    keys = ["clients", "chatter", "queues", "depth", "match"]
    return [Metric("fanin " + " ".join(f"{k}={v}" for k, v in zip(keys, kv, strict=True)),
                   g["large_bytes_per_s"].to_numpy(), False, "B/s") for kv, g in b.groupby(keys)]
