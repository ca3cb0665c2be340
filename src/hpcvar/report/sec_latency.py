"""Report section and plots of `bench latency` runs."""

from __future__ import annotations

import numpy as np

from hpcvar.compare import Metric
from hpcvar.report.sections import Headline, Section
from hpcvar.units import format_rate_bytes, format_size, format_time_ns


def plot_latency(run) -> list:
    """latency_vs_size (median, CI, p99) and latency_ccdf (every sample, per size)."""
    from hpcvar.report.plots import figure, save

    summ = run.read_table("latency.summary")
    samples = run.read_table("latency.samples")
    figs = []
    fig, ax = figure()
    x = summ["size_bytes"].clip(lower=1)
    ax.plot(x, summ["median_ns"] / 1e3, "o-", label="median")
    ax.fill_between(x, summ["median_ci_lo_ns"] / 1e3, summ["median_ci_hi_ns"] / 1e3, alpha=0.3, label="95% CI")
    ax.plot(x, summ["p99_ns"] / 1e3, "s--", label="p99")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("message size (bytes; 0 drawn at 1)")
    ax.set_ylabel("one-way latency (us)")
    ax.legend()
    figs.append(("One-way latency against message size: median with its 95% CI, and p99",
                 save(fig, run.plots_dir() / "latency_vs_size")[0]))
    fig, ax = figure()
    for size, grp in samples.groupby("size_bytes"):
        v = np.sort(grp["oneway_ns"].to_numpy())
        ccdf = 1.0 - np.arange(v.size) / v.size
        ax.step(v / 1e3, ccdf, where="post", label=format_size(size))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("one-way latency (us)")
    ax.set_ylabel("P(latency > x)")
    ax.legend(fontsize=8, ncol=2)
    figs.append(("Tail of every sample (CCDF): a long flat tail means rare large delays",
                 save(fig, run.plots_dir() / "latency_ccdf")[0]))
    return figs


def latency_section(run) -> Section:
    sec = Section(title="Point-to-point latency and bandwidth")
    summ = run.read_table("latency.summary")
    if summ.empty:
        sec.notes.append("The run stored no complete point.")
        return sec
    small = summ.iloc[(summ["size_bytes"] - 8).abs().argmin()]
    sec.headlines.append(Headline(
        f"latency, {format_size(small.size_bytes)} (one-way median)",
        f"{format_time_ns(small.median_ns)} [{format_time_ns(small.median_ci_lo_ns)}, "
        f"{format_time_ns(small.median_ci_hi_ns)}]",
        f"half a ping-pong between 2 ranks; p99 {format_time_ns(small.p99_ns)}"))
    big = summ.iloc[summ["size_bytes"].argmax()]
    if big.size_bytes > 0:
        sec.headlines.append(Headline(
            f"bandwidth, {format_size(big.size_bytes)}", format_rate_bytes(big.bw_bytes_per_s),
            "size / median one-way time for the largest message"))
    sec.figures.extend(plot_latency(run))
    table = summ[["size_bytes", "n", "median_ns", "median_ci_lo_ns", "median_ci_hi_ns", "p99_ns", "p99_9_ns",
                  "max_ns", "outliers", "bw_bytes_per_s"]]
    sec.tables.append(("One-way latency per size (ns) and bandwidth (bytes/s)", table))
    native = run.info.get("metadata", {}).get("native", {})
    if native:
        sec.notes.append(f"Timer {native.get('timer')}: resolution {native.get('timer_resolution_ns')} ns, "
                         f"cost {native.get('timer_cost_ns')} ns per read. Hosts of the ranks: {native.get('hosts')}.")
    return sec


def latency_metrics(run) -> list[Metric]:
    samples = run.read_table("latency.samples")
    return [Metric(f"latency one-way size={format_size(size)}", grp["oneway_ns"].to_numpy(), True, "ns")
            for size, grp in samples.groupby("size_bytes")]
