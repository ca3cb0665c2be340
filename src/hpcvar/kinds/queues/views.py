"""The views of `bench queues posted|unexpected` runs: terminal tables, report sections, metrics, figures.

Plots (the views of the paper's Figures 3 to 5):
  queues_posted_heatmap_<size>   median one-way latency over (length, % traversed), one per size
  queues_posted_vs_entries       median latency against traversed entries, with the fitted line
  queues_unexpected_vs_length    median (95% CI) and p99 latency against unexpected-queue length
Matplotlib is imported only when drawing, so the terminal renderers stay light.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from hpcvar.compare import Metric
from hpcvar.report.sections import INFO, SUSPECT, Headline, Section
from hpcvar.report.terminal import nbytes, ns, ns_interval
from hpcvar.report.verdict import judge_ci
from hpcvar.results import Run
from hpcvar.units import format_size, format_time_ns


def _slope_text(slope, ci) -> str:
    if slope is None:
        return "not identifiable (the sweep does not vary the entries)"
    text = f"{slope:.3g} ns/entry"
    if ci and ci[0] is not None:
        text += f" [95% CI {ci[0]:.3g}, {ci[1]:.3g}]"
    else:
        text += " (no CI: too few points)"
    return text


# --- plots ------------------------------------------------------------------------------------------------

def posted_plots(run: Run) -> list[Path]:
    return [p for _, p in posted_figures(run)]


def unexpected_plots(run: Run) -> list[Path]:
    return [p for _, p in unexpected_figures(run)]


def posted_figures(run: Run) -> list[tuple[str, Path]]:
    from hpcvar.report.plots import figure, label_cells, save

    summ = run.read_table("queues_posted.summary")
    fits = run.read_table("queues_posted.fit")
    figs: list[tuple[str, Path]] = []
    if summ.empty:
        return figs
    for size, grp in summ.groupby("size_bytes", sort=True):
        lengths = sorted(grp["length"].unique())
        pcts = sorted(grp["traversed_pct"].unique())
        grid = np.full((len(lengths), len(pcts)), np.nan)
        for r in grp.itertuples():
            grid[lengths.index(r.length), pcts.index(r.traversed_pct)] = r.median_ns / 1e3
        fig, ax = figure()
        im = ax.imshow(grid, origin="lower", aspect="auto", cmap="viridis")
        ax.set_xticks(range(len(pcts)), [str(p) for p in pcts])
        ax.set_yticks(range(len(lengths)), [str(n) for n in lengths])
        ax.set_xlabel("percent of the posted queue traversed")
        ax.set_ylabel("posted-queue length (receives)")
        ax.grid(False)
        if grid.size <= 64:
            label_cells(ax, im, grid, fontsize=7)
        fig.colorbar(im, ax=ax, label="median one-way latency (us)")
        ax.set_title(f"{format_size(size)} messages")
        figs.append((f"Median one-way latency (us) over queue length and percent traversed, "
                     f"{format_size(size)} messages (the paper's Figures 3-4 as a heat map)",
                     save(fig, run.plots_dir() / f"queues_posted_heatmap_{int(size)}")[0]))
    fig, ax = figure()
    for size, grp in summ.groupby("size_bytes", sort=True):
        grp = grp.sort_values("entries")
        f = fits[fits["size_bytes"] == size]
        stat = f.iloc[0]["fit_stat"] if len(f) else "median"
        col = {"median": "median_ns", "p10": "p10_ns", "min": "min_ns"}[stat]
        line = ax.plot(grp["entries"], grp[col] / 1e3, "o", label=f"{format_size(size)} {stat}")[0]
        if len(f) and np.isfinite(f.iloc[0]["slope_ns_per_entry"]):
            extra = 0.0
            if np.isfinite(f.iloc[0]["untraversed_slope_ns_per_entry"]):
                extra = f.iloc[0]["untraversed_slope_ns_per_entry"] * grp["untraversed"].mean()
            _fit_line(ax, f.iloc[0], grp["entries"].max(), line.get_color(), offset_ns=extra)
    ax.set_xlabel("traversed posted receives (entries in front of the match)")
    ax.set_ylabel("one-way latency (us)")
    ax.legend(fontsize=8)
    figs.append(("One-way latency (the fitted per-point statistic) against traversed entries, with the "
                 "least-squares line per size",
                 save(fig, run.plots_dir() / "queues_posted_vs_entries")[0]))
    return figs


def unexpected_figures(run: Run) -> list[tuple[str, Path]]:
    from hpcvar.report.plots import figure, save

    summ = run.read_table("queues_unexpected.summary")
    fits = run.read_table("queues_unexpected.fit")
    if summ.empty:
        return []
    fig, (ax, tail) = figure(1, 2, figsize=(10, 4))
    for size, grp in summ.groupby("size_bytes", sort=True):
        grp = grp.sort_values("length")
        f = fits[fits["size_bytes"] == size]
        stat = f.iloc[0]["fit_stat"] if len(f) else "median"
        col = {"median": "median_ns", "p10": "p10_ns", "min": "min_ns"}.get(stat, "median_ns")
        line = ax.errorbar(grp["length"], grp[col] / 1e3,
                           yerr=None if col != "median_ns" else
                           # runs stored before the intervals were made to hold their median can miss it by
                           # one rounding step: a bar is never negative
                           [np.clip(grp["median_ns"] - grp["median_ci_lo_ns"], 0, None) / 1e3,
                            np.clip(grp["median_ci_hi_ns"] - grp["median_ns"], 0, None) / 1e3],
                           fmt="o", capsize=3, label=f"{format_size(size)} {stat} (fitted points)")[0]
        if len(f) and np.isfinite(f.iloc[0]["slope_ns_per_entry"]):
            _fit_line(ax, f.iloc[0], grp["length"].max(), line.get_color())
        tail.plot(grp["length"], grp["p99_ns"] / 1e3, "s-", color=line.get_color(), label=f"{format_size(size)} p99")
    ax.set_xlabel("unexpected-queue length (messages waiting)")
    ax.set_ylabel("one-way latency (us)")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=8, loc="upper left")
    tail.set_xlabel("unexpected-queue length (messages waiting)")
    tail.set_ylabel("p99 one-way latency (us)")
    tail.set_yscale("log")
    tail.legend(fontsize=8, loc="upper left")
    return [("One-way latency (receive post included) against unexpected-queue length (the paper's Figure 5): "
             "left, the fitted per-point statistic with the least-squares line over all lengths and the band of "
             "its slope's 95% CI; right, p99",
             save(fig, run.plots_dir() / "queues_unexpected_vs_length")[0])]


def _fit_line(ax, fit, xmax: float, color, offset_ns: float = 0.0) -> None:
    """The fitted line over [0, xmax] and the band its slope's 95% CI spans (shaded)."""
    x = np.linspace(0.0, float(xmax), 50)
    y0 = fit["intercept_ns"] + offset_ns
    ax.plot(x, (y0 + fit["slope_ns_per_entry"] * x) / 1e3, "-", color=color, alpha=0.8,
            label=f"fit {fit['slope_ns_per_entry']:.3g} ns/entry, {int(fit['points'])} points")
    lo, hi = fit["slope_ci_lo"], fit["slope_ci_hi"]
    if np.isfinite(lo) and np.isfinite(hi):
        ax.fill_between(x, (y0 + lo * x) / 1e3, (y0 + hi * x) / 1e3, color=color, alpha=0.2,
                        label="slope 95% CI")


# --- report sections -----------------------------------------------------------------------------------------

def _section(run, title: str, table: str, per: str, plot) -> Section:
    sec = Section(title=title)
    summ = run.read_table(f"{table}.summary")
    if summ.empty:
        sec.notes.append("The run stored no complete point.")
        return sec
    fits = run.read_table(f"{table}.fit")
    for f in fits.itertuples():
        ci = (f.slope_ci_lo, f.slope_ci_hi) if np.isfinite(f.slope_ci_lo) else None
        slope = f.slope_ns_per_entry if np.isfinite(f.slope_ns_per_entry) else None
        status, ref = INFO, "no reference: the cost of matching depends on the MPI library"
        flag = judge_ci(ci[0] if ci else None, ci[1] if ci else None, points=int(f.points))
        if flag:
            status, ref = flag
        elif slope is not None and slope < 0:
            status, ref = SUSPECT, "a negative cost per entry: the latency fell as the queue grew (noise?)"
        sec.headlines.append(Headline(f"cost per {per}, {format_size(f.size_bytes)}", _slope_text(slope, ci),
                                      f"least squares over {f.points} per-point {f.fit_stat}s (one-way latency)",
                                      status, ref))
        if np.isfinite(f.baseline_ns):
            sec.headlines.append(Headline(f"{table.split('_')[-1]}-queue baseline, {format_size(f.size_bytes)}",
                                          format_time_ns(f.baseline_ns),
                                          f"{f.fit_stat} one-way latency with an empty queue"))
    sec.figures.extend(plot(run))
    cols = [c for c in summ.columns if c not in ("mean_ns", "min_ns", "mad_ns")]
    sec.tables.append(("One-way latency per point", summ[cols]))
    sec.tables.append(("Least-squares fits per message size", fits))
    native = run.info.get("metadata", {}).get("native", {})
    if native:
        sec.notes.append(f"MPI: {native.get('mpi_library', '?')[:80]}. Timer {native.get('timer')}: resolution "
                         f"{native.get('timer_resolution_ns')} ns.")
    return sec


def posted_section(run) -> Section:
    sec = _section(run, "Latency under a long posted-receive queue", "queues_posted", "traversed entry",
                   posted_figures)
    if run.info.get("params", {}).get("any_source"):
        sec.notes.append("Receives were posted with MPI_ANY_SOURCE (the wildcard that defeats hashed matching).")
    return sec


def unexpected_section(run) -> Section:
    return _section(run, "Latency under a long unexpected-message queue", "queues_unexpected",
                    "unexpected message", unexpected_figures)


# --- terminal ------------------------------------------------------------------------------------------------

def _render(console, result: dict, title: str, posted: bool) -> None:
    from rich.table import Table

    t = Table(title=title, title_justify="left")
    cols = ["length"] + (["% trav.", "entries"] if posted else []) + ["size", "n", "median", "95% CI", "p99"]
    for c in cols:
        t.add_column(c, justify="right", no_wrap=True)
    for p in result["points"]:
        row: list = [str(p["length"])] + ([str(p["traversed_pct"]), str(p["entries"])] if posted else [])
        lo, hi = p["median_ci_ns"]
        row += [nbytes(p["size"]), str(p["n"]), ns(p["median_ns"]),
                ns_interval(lo, hi) if lo is not None and hi is not None else "-", ns(p["p99_ns"])]
        t.add_row(*row)
    console.print(t)
    per = "traversed posted receive" if posted else "unexpected message"
    if result.get("fit_stat"):
        console.print(f"fits on the per-point {result['fit_stat']} (--fit-stat)")
    for f in result.get("fits", []):
        ci = (f["slope_ci_lo"], f["slope_ci_hi"])
        line = f"{format_size(f['size_bytes'])}: per {per} {_slope_text(f['slope_ns_per_entry'], ci)}"
        if f.get("baseline_ns") is not None:
            line += f"; baseline {format_time_ns(f['baseline_ns'])}"
        if posted and f.get("untraversed_slope_ns_per_entry") is not None:
            line += f"; per untraversed entry {f['untraversed_slope_ns_per_entry']:.3g} ns"
        console.print(line)


def render_posted(console, run: Run) -> None:
    """A stored 'bench queues posted' run."""
    result = run.info["result"]
    wild = " (MPI_ANY_SOURCE receives)" if result.get("any_source") else ""
    _render(console, result, f"One-way latency under a posted-receive queue{wild}", True)


def render_unexpected(console, run: Run) -> None:
    """A stored 'bench queues unexpected' run."""
    _render(console, run.info["result"], "One-way latency under an unexpected-message queue (receive post timed)",
            False)


# --- hpcvar compare ------------------------------------------------------------------------------------------

def posted_metrics(run: Run) -> list[Metric]:
    s = run.read_table("queues_posted.samples")
    return [Metric(f"posted queue length={L} traversed={t}% size={format_size(z)}", g["oneway_ns"].to_numpy(),
                   True, "ns") for (L, t, z), g in s.groupby(["length", "traversed_pct", "size_bytes"])]


def unexpected_metrics(run: Run) -> list[Metric]:
    s = run.read_table("queues_unexpected.samples")
    return [Metric(f"unexpected queue length={L} size={format_size(z)}", g["oneway_ns"].to_numpy(), True, "ns")
            for (L, z), g in s.groupby(["length", "size_bytes"])]
