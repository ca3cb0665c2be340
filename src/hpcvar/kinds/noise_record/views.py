"""The views of 'noise record' runs (one machine or several nodes): terminal tables, report section, metrics,
figures; also the terminal view of 'noise report' (an analysis of a trace, no stored run)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from hpcvar.compare import Metric
from hpcvar.report.sections import Headline, Section
from hpcvar.report.terminal import ns
from hpcvar.report.verdict import judge_noise_pct
from hpcvar.results import Run
from hpcvar.units import format_time_ns

NOISE_WINDOW_S = 0.1  # hpcvar compare: the noise fraction per 100 ms window, a sample per window


def noise_caption(stem: str) -> str:
    """What a stored noise figure shows, from its file name (noise_cpu0, noise_spectrum_cpu1, ...)."""
    m = re.fullmatch(r"noise_spectrum_cpu(\d+)", stem)
    if m:
        return (f"CPU {m[1]}: spectrum of the detour train; peaks are periodic noise sources (the kernel tick at "
                "its HZ, timers, daemons), marked with their frequency")
    m = re.fullmatch(r"noise_cpu(\d+)", stem)
    if m:
        return (f"CPU {m[1]}: every detour over time, and the distribution of detour lengths (linear and log "
                "bins, CCDF)")
    if stem == "noise_nodes_windows":
        return ("CPU time lost per window on every node, on the common time base: lines that rise together are "
                "noise aligned across nodes")
    return stem.replace("_", " ")


def _judge_cpu(res: dict, c: dict) -> tuple[str, str]:
    """A CPU's lost time judged against the noise thresholds, unless other processes shared the CPU (then the
    recording measured load, not the OS): suspect, with the preemptions and the hypervisor's steal time. A CPU
    over the 'bad' threshold is suspect too when another CPU of the recording was shared (a CI run: CPU 0's
    collector preempted 143 times in 5 s, CPU 1 losing 5.5 % at 19,573 short detours/s: DEGRADED, on a
    machine that was not idle)."""
    from hpcvar.noise.analysis import preemption_suspicion, recording_suspicion, throttle_cause
    from hpcvar.report.sections import BAD, SUSPECT

    status, ref = judge_noise_pct(100 * c["noise_fraction"])
    quota = throttle_cause(res)
    if quota:
        ref += f"; {quota}"

    att = res.get("attribution") or {}
    cpu = str(c["cpu"])
    window = att.get("window_s") or c.get("length_s") or 0
    steal = (att.get("steal_s") or {}).get(cpu)
    if steal is not None and window:
        ref += f"; hypervisor steal {100 * steal / window:.1f}% of the recording"
    why = preemption_suspicion(res, cpu)
    if why:
        return SUSPECT, f"{why}; record on an idle machine ({ref})"
    if status == BAD:  # never a 'bad' built on suspect input: other processes on one CPU perturb them all
        other = recording_suspicion(res)
        if other:
            return SUSPECT, (f"other processes ran during the recording ({other}); their interrupts, IPIs "
                             f"and caches reach every CPU: record on an idle machine ({ref})")
        hv = hypervisor_suspicion(res, c)
        if hv:
            return SUSPECT, f"{hv} ({ref})"
    return status, ref


def hypervisor_suspicion(res: dict, c: dict) -> str:
    """Why a CPU over the 'bad' threshold of a VM is not this OS's fault ('' when it is): the detours the guest
    kernel cannot have caused (hpcvar.noise.analysis.unexplained) are what put it over. They are the host's and
    its other tenants', come and go with them (a VM measured 0.5 % one day and 6.5 % at 21,000 detours/s the
    next), and no setting of this OS removes them."""
    from hpcvar.report.verdict import NOISE_BAD_PCT

    un = c.get("unexplained")
    if not un or not (res.get("quality") or {}).get("in_vm"):
        return ""
    own = 100 * (c["noise_fraction"] - un["lost_fraction_min"])
    if own > NOISE_BAD_PCT:
        return ""
    rate = un["events"] / c["length_s"] if c.get("length_s") else 0.0
    return (f"in a VM, at least {100 * un['lost_fraction_min']:.2g}% of the CPU went to {rate:.0f} detours/s more "
            f"than the {un['guest_events']} interrupts and context switches the guest counted: the hypervisor's "
            f"exits (the host and its other tenants, not counted as steal), which leave this OS at most "
            f"{own:.2g}%; judge this VM against its own history or --expect, or record on bare metal")


def _periods(c: dict, n: int = 3) -> str:
    return ", ".join(f"{p['hz']:.1f} Hz ({p['strength']:.2f})" for p in c["periods"][:n]) or "-"


def render_nodes(console: Console, result: dict) -> None:
    """A multi-node recording: per node the noise, the clocks, and how noise lines up across nodes."""
    t = Table(title=f"OS jitter on {len(result['nodes'])} nodes ({result['method']} method)", title_justify="left")
    for col in ("node", "noise per CPU", "events/s per CPU"):
        t.add_column(col, justify="right" if col != "node" else "left")
    for n in result["per_node"]:
        t.add_row(n["host"], ", ".join(f"{100 * x:.3g}%" for x in n["noise_fraction"]),
                  ", ".join(f"{x:.0f}" for x in n["events_per_s"]))
    console.print(t)
    c = result["clock"]
    console.print(f"clocks aligned to within {c['precision_ns'] / 1e3:.2f} us (half the best ping-pong round trip); "
                  f"largest drift {c['max_drift_ppm']:.2f} ppm")
    a = result["alignment"]
    p = Table(title=f"Noise across nodes: {a['verdict'].upper()}", title_justify="left")
    for col in ("node A", "node B", "verdict", "excess overlap", "correlation"):
        p.add_column(col, justify="left" if col.startswith(("node", "verdict")) else "right")
    for row in a["pairs"]:
        p.add_row(row["host_a"], row["host_b"], row["verdict"] + (" (one machine)" if row["same_machine"] else ""),
                  f"{row['excess']:.2f}", f"{row['corr']:.2f}")
    console.print(p)
    mode = {"sync": "jitSim's synchronized mode ('hpcvar sim jitter --align sync') fits these nodes",
            "unsync": "jitSim's unsynchronized mode ('hpcvar sim jitter --align unsync') fits these nodes"}.get(
        a.get("jitsim_mode") or "", "neither jitSim mode is clearly right: use 'hpcvar sim jitter --align measured'")
    console.print(f"{mode}; rule: {a['rule']} (long detours >= {a['min_detour_s'] * 1e6:g} us, windows "
                  f"{a['window_s'] * 1e3:g} ms)")


def render(console: Console, run: Run) -> None:
    """A stored 'noise record' run (one machine or several nodes)."""
    render_noise_result(console, run.info["result"])


def render_noise_result(console: Console, result: dict) -> None:
    """A recording's summary; also what 'noise report' computes from a trace file (or again from a run's trace,
    with its own --top), which is not a stored result."""
    if "nodes" in result:
        render_nodes(console, result)
        return
    t = Table(title="OS jitter per CPU", title_justify="left")
    for col in ("cpu", "t_min", "events", "rate", "noise", "p50", "p99", "max", "periodic sources (locking)"):
        last = col.startswith("periodic")
        t.add_column(col, justify="left" if last else "right", no_wrap=not last)
    for c in result["cpus"]:
        t.add_row(str(c["cpu"]), ns(c["t_min_ns"]), str(c["events"]), f"{c['events_per_s']:.0f}/s",
                  f"{100 * c['noise_fraction']:.3g}%", ns(c["p50_ns"]), ns(c["p99_ns"]), ns(c["max_ns"]),
                  _periods(c))
    console.print(t)
    tick = [c["tick"] for c in result["cpus"] if c.get("tick")]
    if tick:
        found = sum(1 for x in tick if x["found"])
        console.print(f"kernel tick CONFIG_HZ={tick[0]['config_hz']}: in the spectrum of {found} of {len(tick)} CPUs")
    att = result.get("attribution", {})
    matched = att.get("matched") or {}
    if matched.get("available"):
        render_matched(console, matched)
    if att.get("available"):
        top = [s for s in att.get("top_sources", [])][:8]
        if top:
            console.print("sources over the window (/proc): " + "; ".join(
                f"CPU{s['cpu']} {s['source'].split(' (')[0]} {s['per_s']:.0f}/s" for s in top))
        for m in att.get("matches", [])[:6]:
            console.print(f"  CPU {m['cpu']}: {m['hz']:.1f} Hz matches {m['source']} at {m['per_s']:.1f}/s "
                          f"({m['how']})")
        console.print("  /proc rates and rate matches are a GUESS from counts"
                      + ("; the time-aligned table above is MATCHED" if matched.get("available") else
                         "; hpcvar noise record --attribute (root) matches detours with kernel events in time"))
    render_unexplained(console, result)
    q = result.get("quality", {})
    if q.get("freq_drift_ppm") is not None:
        console.print(f"collector: TSC {q['tsc_hz'] / 1e9:.6f} GHz, drift over the run {q['freq_drift_ppm']:+.2f} ppm, "
                      f"calibration spread {q.get('calib_spread_ppm', 0):.1f} ppm"
                      + (", in a VM" if q.get("in_vm") else ""))
    for line in tracing_notes(q):
        console.print(line)


def render_unexplained(console: Console, result: dict) -> None:
    """The CPU quota that throttled the collector, if any; per CPU, the detours the kernel did not count (from
    0.1% of the CPU): the hypervisor's or the firmware's."""
    from hpcvar.noise.analysis import throttle_cause

    quota = throttle_cause(result)
    if quota:
        console.print(f"  {quota[0].upper()}{quota[1:]}")
    who = "the hypervisor's exits (not steal)" if result.get("quality", {}).get("in_vm") else \
        "firmware (SMIs) or the hardware"
    for c in result["cpus"]:
        un = c.get("unexplained") or {}
        if un.get("events") and un["lost_fraction_min"] >= 0.001:
            console.print(f"  CPU {c['cpu']}: {un['events']} detours more than the {un['guest_events']} interrupts "
                          f"and context switches the kernel counted, at least {100 * un['lost_fraction_min']:.2g}% "
                          f"of the CPU: {who}")


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.3g}%"


def render_matched(console: Console, matched: dict, top: int = 8) -> None:
    """The time-aligned attribution: per CPU, the top sources by lost time and the unattributed share."""
    t = Table(title="Detours MATCHED with kernel events in time (tracefs, x86-tsc)", title_justify="left")
    for col in ("cpu", "source", "detours", "of detours", "lost time", "of lost time", "kernel events in detours"):
        t.add_column(col, justify="left" if col == "source" else "right", no_wrap=col != "source")
    for c in matched.get("cpus", []):
        rows = [s for s in c["sources"] if s["source"] != "unattributed" and s["detours"]][:top]
        rows += [s for s in c["sources"] if s["source"] == "unattributed"]
        for s in rows:
            t.add_row(str(c["cpu"]), s["source"], str(s["detours"]), _pct(s["detour_share"]),
                      ns(s["lost_ns"]), _pct(s["lost_share"]),
                      f"{s['kernel_events_in_detours']}/{s['kernel_events']}" if s["kernel_events"] else "-")
    console.print(t)
    for c in matched.get("cpus", []):
        cls = ", ".join(f"{_cls(k)} {_pct(k['attributed_share'])}" for k in c.get("classes", []))
        console.print(f"CPU {c['cpu']}: {_pct(1 - c['unattributed_lost_share'])} of the lost time and "
                      f"{_pct(c['attributed_share'])} of {c['covered_detours']} detours attributed (by size: {cls}); "
                      f"{c['kernel_events_in_detours']} of {c['kernel_events']} kernel events fell in a detour; "
                      f"tracefs lost {c['lost_kernel_events']} events")
    console.print("  " + matched.get("how", ""))
    if matched.get("warning"):
        console.print("  warning: " + matched["warning"])


def _cls(k: dict) -> str:
    lo, hi = k["lo_ns"], k["hi_ns"]
    return f"<{format_time_ns(hi)}" if not lo else (f">{format_time_ns(lo)}" if hi is None
                                                    else f"{format_time_ns(lo)}-{format_time_ns(hi)}")


def tracing_notes(quality: dict) -> list[str]:
    """One line per CPU: t_min, loop iteration, noise fraction and event rate without and with tracing."""
    tr = quality.get("tracing") or {}
    out = []
    for r in tr.get("cpus", []):
        def pair(k, fmt, r=r):
            a, b = r.get(k + "_untraced"), r.get(k + "_traced")
            return f"{fmt(a) if a is not None else '-'} -> {fmt(b) if b is not None else '-'}"

        out.append(f"tracing overhead CPU {r['cpu']} (untraced -> traced): t_min {pair('t_min_ns', format_time_ns)}, "
                   f"loop {pair('loop_ns', format_time_ns)}, noise {pair('noise_fraction', _pct)}, "
                   f"events {pair('events_per_s', lambda x: f'{x:.0f}/s')}, "
                   f"mean detour {pair('mean_ns', format_time_ns)}")
    if out:
        out.append("  (" + tr.get("note", "") + ")")
    return out


def nodes_section(run) -> Section:
    """A multi-node recording: the verdict on cross-node alignment, the clocks, per-node statistics, and the
    per-window noise of every node on the common time base."""
    res = run.info.get("result") or {}
    a = run.info.get("alignment") or {}
    nodes = run.info.get("nodes") or []
    sec = Section(title=f"OS jitter on {len(nodes)} nodes (hpcvar noise record, {res.get('method', '?')} method)")
    mode = {"sync": "'hpcvar sim jitter --align sync' fits", "unsync": "'hpcvar sim jitter --align unsync' fits"}.get(
        a.get("jitsim_mode") or "", "use 'hpcvar sim jitter --align measured'")
    steal = "; the hypervisor's steal understates the alignment (see the warnings)" if a.get("steal_warning") else ""
    sec.headlines.append(Headline("Noise across nodes", a.get("verdict", "?"),
                                  f"{mode}; {a.get('rule', '')}{steal}"))
    clock = res.get("clock") or {}
    if clock:
        sec.headlines.append(Headline("Clock alignment", f"{clock['precision_ns'] / 1e3:.2f} us",
                                      f"worst precision of the common time base (half the best ping-pong); drift "
                                      f"up to {clock['max_drift_ppm']:.2f} ppm"))
    if a.get("pairs"):
        import pandas as pd

        sec.tables.append(("Node pairs: excess overlap of long detours (1 all matched, 0 chance), correlation, "
                           "verdict", pd.DataFrame(a["pairs"])))
    for name, caption in (("noise.clock_sync", "Clocks against rank 0 (before and after the recording)"),
                          ("noise.summary", "Per node and CPU: detour statistics"),
                          ("noise.alignment", "Per CPU pair: overlap, chance, excess, correlation, phase")):
        if run.has_table(name):
            sec.tables.append((caption, run.read_table(name)))
    png = Path(run.path) / "plots" / "noise_nodes_windows.png"
    if png.is_file():  # drawn when the recording was stored: the report never rewrites a run
        sec.figures.append(("Share of each 10 ms window lost to detours in the first second, every node and CPU on "
                            "the common time base (peaks at the same time are aligned noise)", png))
    return sec


def plot_windows(run, w) -> Path | None:
    """The per-window noise of every node and CPU, one row each, on the common time base (PNG and SVG)."""
    from hpcvar.report.plots import figure, save

    if w.empty:
        return None
    keys = list(dict.fromkeys(zip(w["host"], w["cpu"], strict=True)))
    fig, axes = figure(nrows=len(keys), sharex=True, figsize=(8, 0.9 * len(keys) + 1.2)) \
        if len(keys) > 1 else figure()
    axes = list(axes) if len(keys) > 1 else [axes]
    span = min(float(w["t_start_s"].max()), 1.0)  # the first second: individual bursts stay visible
    for ax, (host, cpu) in zip(axes, keys, strict=True):
        g = w[(w["host"] == host) & (w["cpu"] == cpu) & (w["t_start_s"] <= span)]
        ax.fill_between(g["t_start_s"], g["noise_fraction"], step="post", lw=0)
        ax.set_ylim(0, 1)
        ax.set_ylabel(f"{host}\ncpu {cpu}", rotation=0, ha="right", va="center", fontsize=7)
        ax.set_yticks([])
    axes[-1].set_xlabel("time since the agreed start (s)")
    return save(fig, run.plots_dir() / "noise_nodes_windows")[0]


def section(run: Run) -> Section:
    if run.info.get("nodes"):
        return nodes_section(run)
    res = run.info.get("result") or {}
    sec = Section(title="OS jitter (hpcvar noise record)")
    for c in res.get("cpus", []):
        status, ref = _judge_cpu(res, c)
        sec.headlines.append(Headline(
            f"CPU {c['cpu']} noise", f"{100 * c['noise_fraction']:.3g}% ({c['events_per_s']:.0f} events/s)",
            f"CPU time lost to detours; max {format_time_ns(c['max_ns'])}, top period {_periods(c, 1)}",
            status, ref))
    if run.has_table("noise.summary"):
        sec.tables.append(("Per-CPU detour statistics", run.read_table("noise.summary")))
    if run.has_table("noise.periods"):
        sec.tables.append(("Periodic sources (fundamental, phase locking)", run.read_table("noise.periods")))
    if run.has_table("noise.sources"):
        src = run.read_table("noise.sources")
        sec.tables.append(("Interrupt/softirq rates over the window (/proc)", src[src["per_s"] >= 1.0]))
    if run.has_table("noise.attribution_summary"):
        sec.tables.append(("Detours matched with kernel events in time (tracefs; matched, not a guess)",
                           run.read_table("noise.attribution_summary")))
        matched = (res.get("attribution") or {}).get("matched") or {}
        for c in matched.get("cpus", []):
            sec.headlines.append(Headline(
                f"CPU {c['cpu']} lost time matched", _pct(1 - c["unattributed_lost_share"]),
                f"detour time overlapping a kernel event (time-aligned); {_pct(c['attributed_share'])} of the "
                "detours, short ones being mostly invisible to the kernel (hypervisor exits)"))
    plots = Path(run.path) / "plots"
    for p in sorted(plots.glob("noise_*.png")):
        sec.figures.append((noise_caption(p.stem), p))
    sec.notes.append("Attribution compares /proc counters with detour rates: a rate match is a guess, "
                     "not a time-aligned proof (docs/noise.md). 'noise record --attribute' matches each detour "
                     "in time with the kernel's tracepoints instead.")
    sec.notes += tracing_notes(res.get("quality") or {})
    return sec


def plots(run: Run) -> list[Path]:
    """One machine: per CPU the detours and their spectrum (from trace.jtr, the periods of the result marked);
    several nodes: the per-window noise of every node on the common time base."""
    if run.info.get("nodes"):
        png = plot_windows(run, run.read_table("noise.windows"))
        return [png] if png else []
    from hpcvar.noise.formats import read_jtr

    return [p for _, p in plot_trace(read_jtr(run.path / "trace.jtr"), run.info["result"], run.plots_dir())]


def plot_trace(trace, report: dict, outdir: Path) -> list[tuple[str, Path]]:
    """Time series, linear and log histograms, CCDF and spectrum per CPU: PNG + SVG in outdir. ``report``:
    ``hpcvar.noise.analysis.analyze``'s, or a recording's result (each CPU's ``periods`` are marked)."""
    from hpcvar.noise.analysis import spectrum
    from hpcvar.noise.trace import recorded_starts
    from hpcvar.report.plots import figure, save

    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    ns = 1e9 / trace.freq_hz
    figs = []
    for c, r in zip(trace.cpus, report["cpus"], strict=True):
        d_us = c.duration * ns / 1e3
        t_s = recorded_starts(c) * ns / 1e9
        fig, ax = figure(2, 2, figsize=(11, 7))
        ax[0, 0].plot(t_s, d_us, ".", ms=2)
        ax[0, 0].set(xlabel="time (s)", ylabel="detour (us)", yscale="log", title=f"CPU {c.cpu}: detours over time")
        ax[0, 1].hist(d_us, bins=100)
        ax[0, 1].set(xlabel="detour (us)", ylabel="events", yscale="log", title="histogram (linear bins)")
        lo, hi = max(d_us.min(), 1e-3), max(d_us.max(), 2e-3)
        ax[1, 0].hist(d_us, bins=np.logspace(np.log10(lo), np.log10(hi) + 1e-9, 60))
        ax[1, 0].set(xlabel="detour (us)", ylabel="events", xscale="log", yscale="log", title="histogram (log bins)")
        srt = np.sort(d_us)
        ccdf = 1.0 - np.arange(srt.size) / srt.size
        ax[1, 1].step(srt, ccdf, where="post")
        ax[1, 1].set(xlabel="detour (us)", ylabel="P(D >= x)", xscale="log", yscale="log", title="CCDF")
        figs.append((f"CPU {c.cpu}: detours", save(fig, outdir / f"noise_cpu{c.cpu}")[0]))
        f, p = spectrum(trace, c)
        fig, ax = figure()
        ax.semilogy(f[1:], p[1:], lw=0.7)
        for s in r["periods"]:
            ax.axvline(s["hz"], color="C3", ls=":", lw=0.8)
            ax.annotate(f"{s['hz']:.1f} Hz", (s["hz"], p[1:].max()), fontsize=8, rotation=90, va="top")
        ax.set(xlabel="frequency (Hz)", ylabel="power", title=f"CPU {c.cpu}: spectrum of the event train")
        figs.append((f"CPU {c.cpu}: spectrum", save(fig, outdir / f"noise_spectrum_cpu{c.cpu}")[0]))
    return figs


def metrics(run: Run) -> list[Metric]:
    """Per CPU: the fraction of CPU lost in every 100 ms window, and every detour's duration. A multi-node
    recording gives them per node ("noise <host> cpu0 ...")."""
    from hpcvar.noise.formats import load_trace

    single = run.path / "trace.jtr"
    if single.is_file():
        return _trace_metrics(load_trace(single), "noise")
    out = []
    for f in sorted((run.path / "traces").glob("*.jtr")):
        out += _trace_metrics(load_trace(f), f"noise {f.stem}")
    return out


def _trace_metrics(trace, label: str) -> list[Metric]:
    out = []
    for c in trace.cpus:
        starts = c.starts()
        window = int(NOISE_WINDOW_S * trace.freq_hz)
        if c.length >= 2 * window and c.events:
            idx = starts // window
            lost = np.bincount(idx, weights=c.duration, minlength=int(c.length // window))[: c.length // window]
            out.append(Metric(f"{label} cpu{c.cpu} fraction lost per {NOISE_WINDOW_S * 1e3:.0f} ms", lost / window,
                              True, ""))
        # detour lengths are bimodal (timer ticks of ~0.1 us, interrupts of ~10 us): their median jumps between the
        # modes from run to run, so history follows the fraction lost and compare tests both
        out.append(Metric(f"{label} cpu{c.cpu} detour", c.duration / trace.freq_hz * 1e9, True, "ns", headline=False))
    return out
