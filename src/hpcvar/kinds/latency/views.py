"""The views of `bench latency` runs: the terminal table, the report section, the metrics, the figures."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from hpcvar.compare import Metric
from hpcvar.report.sections import Headline, Section
from hpcvar.report.terminal import Cell, nbytes, ns, ns_interval, rate
from hpcvar.results import Run
from hpcvar.units import format_interval, format_rate_bytes, format_size, format_time_ns


def render(console: Console, run: Run) -> None:
    result = run.info["result"]
    t = Table(title="Ping-pong, one-way latency", title_justify="left")
    sends = any(r.get("send_median_ns") is not None for r in result["sizes"])  # runs before send times: none
    cols: tuple[str, ...] = ("size", "n", "median", "95% CI", "p99", "p99.9", "max", "bandwidth")
    cols += ("send", "buffered") if sends else ()
    for col in cols:
        t.add_column(col, justify="right", no_wrap=True)
    for r in result["sizes"]:
        row: list[Cell | str] = [nbytes(r["size"]), str(r["n"]), ns(r["median_ns"]), ns_interval(*r["median_ci_ns"]),
                                 ns(r["p99_ns"]), ns(r["p99_9_ns"]), ns(r["max_ns"]),
                                 rate(r["bw_bytes_per_s"] if r["size"] else None)]
        if sends:
            buf = r.get("buffered_bytes")
            row += [ns(r.get("send_median_ns")), nbytes(round(buf) if buf is not None and r["size"] else None)]
        t.add_row(*row)
    console.print(t)
    if sends:
        console.print("send: median time of rank 0's MPI_Send (timed from 64 KiB up); buffered: bytes still on "
                      "their way when it returned (hpcvar sim app --send-buffer)")


def _median_ci(row) -> str:
    """'[lo, hi]' of a summary row's median, '(n = 1)' for one sample."""
    text = format_interval(row.median_ci_lo_ns, row.median_ci_hi_ns, int(row.n), format_time_ns)
    return f"[{text}]" if row.n >= 2 else f"({text})"


def size_axis(ax, axis: str = "x") -> None:
    """A log2 axis of message sizes with ticks at 1, 32, 1K, 32K, 1M ... labelled with units (osu_* style)."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    getattr(ax, f"set_{axis}scale")("log", base=2)
    a = getattr(ax, f"{axis}axis")
    a.set_major_locator(FixedLocator([float(2 ** k) for k in range(0, 41, 5)]))
    a.set_minor_locator(NullLocator())
    a.set_major_formatter(FuncFormatter(lambda v, _: format_size(int(v)).replace(" ", "")))


def _loglog(ax, ylabel: str) -> None:
    size_axis(ax)
    ax.set_yscale("log")
    ax.set_xlabel("message size")
    ax.set_ylabel(ylabel)
    ax.legend(loc="upper left", fontsize=8)


def figures(run: Run) -> list[tuple[str, Path]]:
    """latency_vs_size (median, CI, p99, log-log), bandwidth_vs_size and latency_ccdf (every sample, per size);
    a baseline run set for the report (hpcvar report --baseline) is overlaid in grey."""
    from hpcvar.report.plots import baseline_for, figure, save

    summ = run.read_table("latency.summary")
    samples = run.read_table("latency.samples")
    base = baseline_for(run)
    bsum = base.read_table("latency.summary") if base is not None and base.has_table("latency.summary") else None
    drawn = summ[summ["size_bytes"] >= 1]
    zero = "" if len(drawn) == len(summ) else " (the 0-byte point is in the table: a log axis cannot draw it)"
    figs = []
    fig, ax = figure()
    x = drawn["size_bytes"]
    ax.plot(x, drawn["median_ns"] / 1e3, "o-", label="median")
    ax.fill_between(x, drawn["median_ci_lo_ns"] / 1e3, drawn["median_ci_hi_ns"] / 1e3, alpha=0.3, label="95% CI")
    ax.plot(x, drawn["p99_ns"] / 1e3, "s--", label="p99")
    if bsum is not None:
        b = bsum[bsum["size_bytes"] >= 1]
        ax.plot(b["size_bytes"], b["median_ns"] / 1e3, "o:", color="0.5", label=f"baseline median ({base.id})")
    _loglog(ax, "one-way latency (us)")
    figs.append(("One-way latency against message size (log-log): median with its 95% CI, and p99" + zero,
                 save(fig, run.plots_dir() / "latency_vs_size")[0]))
    fig, ax = figure()
    ax.plot(x, drawn["bw_bytes_per_s"] / 1e6, "o-", label="size / median one-way time")
    if bsum is not None:
        b = bsum[bsum["size_bytes"] >= 1]
        ax.plot(b["size_bytes"], b["bw_bytes_per_s"] / 1e6, "o:", color="0.5", label=f"baseline ({base.id})")
    from hpcvar.report.verdict import link_rate

    limit, text = link_rate(run)
    if limit:
        ax.axhline(limit / 1e6, color="tab:red", lw=1, ls="--", label=text)
    _loglog(ax, "bandwidth (MB/s)")
    figs.append(("Bandwidth against message size (log-log): message size over the median one-way time" + zero,
                 save(fig, run.plots_dir() / "bandwidth_vs_size")[0]))
    fig, ax = figure()
    groups = list(samples.groupby("size_bytes"))
    if len(groups) > 8:  # a readable CCDF: at most 8 sizes, spread over the sweep
        keep = {groups[int(round(i))][0] for i in np.linspace(0, len(groups) - 1, 8)}
        groups = [g for g in groups if g[0] in keep]
    for size, grp in groups:
        v = np.sort(grp["oneway_ns"].to_numpy())
        ccdf = 1.0 - np.arange(v.size) / v.size
        ax.step(v / 1e3, ccdf, where="post", label=format_size(size))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("one-way latency (us)")
    ax.set_ylabel("P(latency > x)")
    ax.legend(fontsize=7, ncol=2, loc="lower left")
    figs.append(("Tail of every sample (CCDF) per message size: a long flat tail means rare large delays",
                 save(fig, run.plots_dir() / "latency_ccdf")[0]))
    return figs


def plots(run: Run) -> list[Path]:
    return [p for _, p in figures(run)]


def section(run: Run) -> Section:
    from hpcvar.report.sections import MEASURED, SUSPECT
    from hpcvar.report.verdict import TIMER_READS, judge_rate, link_rate

    sec = Section(title="Point-to-point latency and bandwidth")
    summ = run.read_table("latency.summary")
    if summ.empty:
        sec.notes.append("The run stored no complete point.")
        return sec
    native = run.info.get("metadata", {}).get("native", {})
    small = summ.iloc[(summ["size_bytes"] - 8).abs().argmin()]
    cost = float(native.get("timer_cost_ns") or 0)
    if cost:
        ok = small.median_ns >= TIMER_READS * cost
        status, ref = (MEASURED, f"measured: the timer ({cost:.3g} ns a read) resolves it, and nothing else to "
                                  "judge it against here (hpcvar screen compares nodes; --expect, --baseline)") \
            if ok else \
            (SUSPECT, f"under {TIMER_READS} timer reads ({cost:.3g} ns each): the timer dominates it")
    else:
        status, ref = SUSPECT, "the timer's cost was not recorded"
    sec.headlines.append(Headline(
        f"latency, {format_size(small.size_bytes)} (one-way median)",
        f"{format_time_ns(small.median_ns)} {_median_ci(small)}",
        f"half a ping-pong between 2 ranks; p99 {format_time_ns(small.p99_ns)}", status, ref))
    big = summ.iloc[summ["size_bytes"].argmax()]
    if big.size_bytes > 0:
        limit, text = link_rate(run)
        status, ref = judge_rate(float(big.bw_bytes_per_s), limit, text)
        sec.headlines.append(Headline(
            f"bandwidth, {format_size(big.size_bytes)}", format_rate_bytes(big.bw_bytes_per_s),
            "size / median one-way time for the largest message", status, ref))
    sec.figures.extend(figures(run))
    table = summ[["size_bytes", "n", "median_ns", "median_ci_lo_ns", "median_ci_hi_ns", "p99_ns", "p99_9_ns",
                  "max_ns", "outliers", "bw_bytes_per_s"]]
    sec.tables.append(("One-way latency and bandwidth per message size", table))
    if native:
        sec.notes.append(f"Timer {native.get('timer')}: resolution {native.get('timer_resolution_ns')} ns, "
                         f"cost {native.get('timer_cost_ns')} ns per read. Hosts of the ranks: {native.get('hosts')}.")
    return sec


def metrics(run: Run) -> list[Metric]:
    samples = run.read_table("latency.samples")
    return [Metric(f"latency one-way size={format_size(size)}", grp["oneway_ns"].to_numpy(), True, "ns")
            for size, grp in samples.groupby("size_bytes")]
