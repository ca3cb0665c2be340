"""hpcvar noise: record, inject, synth, convert, report."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from hpcvar.cli.common import (
    DURATION,
    OUT_PATH,
    POSITIVE_DURATION,
    FiniteFloat,
    emit,
    emit_run,
    format_options,
    option,
    output_options,
    stderr_console,
    writing_out,
)

FORMAT_CHOICE = click.Choice(["jtr", "text", "loggopsim", "csv"])


def _freq(text: str | None, flag: str = "--freq") -> float | None:
    """'2.4GHz', '2400MHz', '1e9' -> Hz (hpcvar.units.parse_freq)."""
    from hpcvar.units import parse_freq

    return None if text is None else parse_freq(text, flag)


@click.group("noise")
def cli() -> None:
    """Record, inject, synthesize, convert and analyse OS jitter traces."""


@cli.command("record")
@click.option("--cpus", default="all", show_default=True, help="CPUs to record on: all, 0,1 or 0-3.")
@click.option("--duration", type=POSITIVE_DURATION, default="10s", show_default=True,
              help="Recording time (e.g. 2s, 10m, 1h).")
@click.option("--threshold", type=DURATION, default=None,
              help="Detour threshold, a time with its unit (e.g. 200ns); default max(9 x t_min, 100 ns) per CPU.")
@click.option("--max-rate", type=FiniteFloat(1), default=200000, show_default=True,
              help="Event buffer per CPU, in events per second of --duration (16 bytes each, locked in RAM).")
@click.option("--rt-prio", type=click.IntRange(0, 99), default=0, show_default=True,
              help="Run the collector threads SCHED_FIFO at this priority (0: normal scheduler). Other user "
                   "processes then cannot preempt it: the trace shows kernel and real-time noise only.")
@click.option("--attribute", is_flag=True,
              help="Also trace the kernel's irq, softirq, irq_vectors and sched_switch events (tracefs, root) "
                   "and attribute each detour to the events that overlap it in time.")
@click.option("--method", type=click.Choice(["auto", "spin", "timer"]), default="auto", show_default=True,
              help="spin: a pinned thread reads the TSC in a tight loop (every detour above the threshold; takes "
                   "the CPU). timer: a pinned thread sleeps to a deadline every --interval and records how late it "
                   "woke (little CPU; sees what delays wake-ups). auto: spin, or timer when the nodes of the "
                   "launcher are one machine (the testbed).")
@click.option("--interval", type=POSITIVE_DURATION, default="200us", show_default=True,
              help="--method timer: time between deadlines.")
@click.option("--launcher", type=click.Choice(["local", "srun", "testbed", "template"]), default="local",
              show_default=True, help="local: this machine. srun / testbed / template: one collector on every node "
                                      "of the allocation or testbed, started together, clocks aligned "
                                      "(docs/cluster.md).")
@click.option("--np", "nodes", type=click.IntRange(1, 1 << 16), default=None,
              help="Nodes to record on with a multi-node launcher (default: every node of the allocation/testbed).")
@click.option("--srun-mpi", default="auto", show_default=True, metavar="PLUGIN",
              help="srun --mpi plugin (--launcher srun).")
@click.option("--template", default=None, help="Launcher template for --launcher template ({np} {exe} {args} {rpn}).")
@click.option("--launcher-args", default="", help="Extra options for the launcher (split like a shell).")
@click.option("--timeout", type=POSITIVE_DURATION, default=None, help="Stop a multi-node recording after this long.")
@click.option("--min-detour", type=DURATION, default="100us", show_default=True,
              help="Multi-node: detours at least this long are compared across nodes.")
@click.option("--window", type=DURATION, default="10ms", show_default=True,
              help="Multi-node: window of the per-window noise fraction correlated across nodes.")
@option("-o", "--out", type=OUT_PATH, default=None, help="Also copy the .jtr trace here (local).")
@click.option("--plots/--no-plots", default=True, show_default=True, help="Draw the PNG/SVG figures.")
@output_options
def record(cpus, duration, threshold, max_rate, rt_prio, attribute, method, interval, launcher, nodes, srun_mpi,
           template, launcher_args, timeout, min_detour, window, out, plots, as_json, runs_dir):
    """Record OS jitter: one pinned TSC-reading thread per CPU (the TraceCollector of De & Mann, jitSim).

    Stores the trace (trace.jtr), per-CPU statistics, periodic sources and /proc attribution in a run.
    With --attribute (root), a private tracefs instance records the kernel events on those CPUs during the
    run, and every detour is matched in time with them (tables noise.attribution and
    noise.attribution_summary). With --launcher srun or testbed, one collector runs on every node (on the
    same --cpus of each), the nodes' clocks are aligned by ping-pongs with rank 0 before and after, and the
    run says whether noise lines up across nodes (docs/noise.md "Noise on every node").
    """
    import shutil

    from hpcvar.errors import UsageError
    from hpcvar.kinds.noise_record.job import RecordParams, job
    from hpcvar.noise import collector

    if duration <= 0:
        raise UsageError("the duration must be positive", "--duration", "Give e.g. 10s")
    local = launcher == "local"
    if local:
        for flag, given in (("--np", nodes is not None), ("--srun-mpi", srun_mpi != "auto"), ("--template", template)):
            if given:
                raise UsageError(f"{flag} is for a multi-node --launcher", flag, "Add --launcher srun or testbed")
        cpu_list = collector.parse_cpus(cpus)
        mem = 16 * len(cpu_list) * (duration * max_rate + 4096)
        if mem > 4 << 30:
            raise UsageError(f"the event buffers would take {mem / 2**30:.1f} GiB", "--max-rate",
                             "Lower --max-rate or --duration")
    elif attribute:
        raise UsageError("--attribute records one node", "--attribute", "Drop it, or use --launcher local")
    params = RecordParams(cpus=tuple(cpu_list) if local else _node_cpus(cpus), duration_s=duration,
                          threshold_ns=threshold * 1e9 if threshold else 0.0, max_rate_per_s=max_rate, rt_prio=rt_prio,
                          attribute=attribute, method="spin" if local and method == "auto" else method,
                          interval_ns=interval * 1e9, min_detour_s=min_detour, window_s=window, nodes=nodes,
                          plots=plots)
    run = job(params, _record_context(launcher, srun_mpi, template, launcher_args, timeout, runs_dir))
    if out:
        with writing_out(out):
            shutil.copyfile(run.path / "trace.jtr", out)
    emit_run(run, as_json)


def _node_cpus(text: str) -> tuple[int, ...] | None:
    """--cpus on several nodes: all (None), or a comma list of CPUs, the same on every node."""
    from hpcvar.errors import UsageError

    if text.strip() == "all":
        return None
    if not all(x.strip().isdigit() for x in text.split(",")):
        raise UsageError(f"'{text}' is not 'all' or a comma list of CPUs", "--cpus",
                         "On several nodes give all or a list such as 0,1 (the same CPUs on every node)")
    return tuple(sorted({int(x) for x in text.split(",")}))


def _record_context(launcher_name, srun_mpi, template, launcher_args, timeout, runs_dir):
    """A JobContext for this machine; a BenchContext with the launcher for several nodes."""
    import shlex

    from hpcvar.bench.runner import BenchContext
    from hpcvar.errors import UsageError
    from hpcvar.launch import get_launcher
    from hpcvar.results.context import JobContext

    argv = ["hpcvar", *sys.argv[1:]]
    if launcher_name == "local":
        return JobContext(runs_dir=runs_dir, argv=argv, console=stderr_console())
    kw = {"mpi": srun_mpi} if launcher_name == "srun" else {}
    if launcher_name == "testbed":
        kw = {"map_by": "slot", "ranks_per_host": 1}
    launcher = get_launcher(launcher_name, template=template, **kw)
    try:
        extra = shlex.split(launcher_args or "")
    except ValueError as e:
        raise UsageError(f"cannot split --launcher-args: {e}", "--launcher-args", "Check its quotes") from None
    return BenchContext(launcher=launcher, runs_dir=runs_dir, argv=argv, console=stderr_console(), timeout_s=timeout,
                        launcher_args=extra)


@cli.command("report")
@click.argument("source")
@click.option("--freq", default=None, help="Cycles per second, for text/CSV traces without a freq_hz header.")
@click.option("--from", "fmt", type=FORMAT_CHOICE, default=None, help="Input format (default: extension/content).")
@option("--plots-dir", "plots_dir", type=click.Path(file_okay=False), default=None, aliases=("--plots",),
        help="Write the figures (PNG+SVG) here; for a run, default its plots/ directory.")
@click.option("--top", type=click.IntRange(1, 50), default=5, show_default=True, help="Periodic sources per CPU.")
@output_options
def report(source, freq, fmt, plots_dir, top, as_json, runs_dir):
    """Statistics, periodic sources, attribution and collector quality of a trace.

    SOURCE is a trace file (.jtr, text, LogGOPSim, CSV) or a 'noise record' run (path, name or 'latest').
    """
    from hpcvar.noise import analysis, collector
    from hpcvar.noise.formats import load_trace
    from hpcvar.results import Run, resolve_run

    path = Path(source)
    run = None
    if path.is_file():
        trace = load_trace(path, _freq(freq), fmt)
    else:
        run = Run.open(resolve_run(source, runs_dir))
        trace = load_trace(run.path / "trace.jtr")
    trace.validate(str(path))
    rep = analysis.analyze(trace, top)
    if run is not None:
        collector.add_matched_from_run(rep, trace, run)
    out_dir = Path(plots_dir) if plots_dir else (run.plots_dir() if run else None)
    if out_dir:
        from hpcvar.kinds.noise_record.views import plot_trace

        plot_trace(trace, rep, out_dir)
    result = collector.json_summary(rep)
    if run:
        result["run"] = str(run.path)
    _emit(result, as_json)


@cli.command("convert")
@click.argument("src")
@click.argument("dst")
@click.option("--from", "src_fmt", type=FORMAT_CHOICE, default=None, help="Input format (default: extension/content).")
@click.option("--to", "dst_fmt", type=FORMAT_CHOICE, default=None, help="Output format (default: extension).")
@click.option("--freq", default=None, help="Cycles per second of the input (text/CSV without a freq_hz header).")
@click.option("--cpu", type=click.IntRange(0), default=None, help="Keep only this CPU (needed for LogGOPSim output "
                                                                  "of a multi-CPU trace).")
def convert(src, dst, src_fmt, dst_fmt, freq, cpu):
    """Convert a jitter trace between .jtr, two-column text, LogGOPSim and CSV."""
    from hpcvar.errors import UsageError
    from hpcvar.noise.formats import load_trace, save_trace

    trace = load_trace(src, _freq(freq), src_fmt)
    idx = None
    if cpu is not None:
        ids = [c.cpu for c in trace.cpus]
        if cpu not in ids:
            raise UsageError(f"the trace has no CPU {cpu}", "--cpu", f"Choose one of {', '.join(map(str, ids))}")
        idx = ids.index(cpu)
    save_trace(trace, dst, dst_fmt, idx)
    n = sum(c.events for c in (trace.cpus if idx is None else [trace.cpus[idx]]))
    stderr_console().print(f"wrote {dst}: {n} events, {len(trace.cpus) if idx is None else 1} CPU(s), "
                           f"freq {trace.freq_hz:.6g} Hz")


@cli.command("synth")
@click.argument("dst")
@click.option("--periodic", multiple=True, metavar="FREQ:DUR[:PHASE]",
              help="A periodic source, e.g. 250Hz:5us or 10Hz:2.5ms:1ms (repeatable).")
@click.option("--poisson", multiple=True, metavar="RATE:DUR", help="A Poisson source, e.g. 100/s:20us (repeatable).")
@option("--duration", "length", type=DURATION, default="10s", show_default=True, aliases=("--length",),
        help="Trace length.")
@option("--ncpus", "cpus", type=click.IntRange(1, 4096), default=1, show_default=True, aliases=("--cpus",),
        help="Number of CPUs (a count).")
@click.option("--freq", default="1GHz", show_default=True, help="Cycles per second of the trace.")
@click.option("--random-phase", is_flag=True, help="Give each CPU a random phase for the periodic sources.")
@click.option("--seed", type=int, default=1, show_default=True, help="Seed of the random generator.")
@click.option("--to", "dst_fmt", type=FORMAT_CHOICE, default=None, help="Output format (default: extension).")
def synth(dst, periodic, poisson, length, cpus, freq, random_phase, seed, dst_fmt):
    """Make a synthetic trace: periodic, Poisson, or a mix (overlapping detours merge)."""
    from hpcvar.errors import UsageError
    from hpcvar.noise import collector
    from hpcvar.noise.formats import save_trace

    comps = [collector.parse_component(f"periodic:{p}", "--periodic") for p in periodic]
    comps += [collector.parse_component(f"poisson:{p}", "--poisson") for p in poisson]
    if not comps:
        raise UsageError("no noise source given", "--periodic", "Give --periodic 250Hz:5us and/or --poisson 100/s:20us")
    trace = collector.synth(comps, length, cpus, _freq(freq), seed, random_phase)
    save_trace(trace, dst, dst_fmt, cpu_flag=("--ncpus", "Synthesize one CPU (--ncpus 1) for a LogGOPSim trace"))
    stderr_console().print(f"wrote {dst}: {sum(c.events for c in trace.cpus)} events on {cpus} CPU(s)")


@cli.command("inject")
@click.option("--cpus", required=True, help="CPUs to inject on: 1, 0,1, 0-3 or all.")
@click.option("--period", type=POSITIVE_DURATION, default=None, help="Time between bursts (e.g. 10ms for 100 Hz).")
@click.option("--burn", type=DURATION, default=None,
              help="Length of one burst, from its due time, wake-up included (e.g. 1ms).")
@click.option("--phase", type=DURATION, default="0s", show_default=True, help="Offset of the first burst.")
@click.option("--at-clock", is_flag=True,
              help="Burst at multiples of --period of the wall clock (CLOCK_REALTIME), plus --phase: injectors "
                   "started separately on nodes with synchronised clocks (NTP/PTP) burst at the same instants.")
@option("--duration", "time_s", type=DURATION, default="10s", show_default=True, aliases=("--time",),
        help="How long to inject.")
@click.option("--trace", "trace_path", type=click.Path(dir_okay=False, exists=True), default=None,
              help="Replay this trace's detours instead (its CPU --trace-cpu, looped until --duration).")
@click.option("--trace-cpu", type=click.IntRange(0), default=None, help="CPU of --trace to replay (default: first).")
@click.option("--freq", default=None, help="Cycles per second of --trace (text/CSV without freq_hz).")
@click.option("--rt-prio", type=click.IntRange(0, 99), default=50, show_default=True,
              help="SCHED_FIFO priority of the burner (0: normal scheduler).")
@format_options
def inject(cpus, period, burn, phase, at_clock, time_s, trace_path, trace_cpu, freq, rt_prio, as_json):
    """Inject noise: wake every --period and take the CPU for --burn on each CPU, or replay a trace.

    A burst ends at its due time + --burn: the wake-up (interrupt, switch in) counts inside it, so an
    interrupted program loses about --burn plus the switch back. A wake-up later than the whole burst is an
    overrun (a longer detour than promised); keep bursts well above the wake-up time (docs/noise.md)."""
    import tempfile

    from hpcvar.errors import UsageError
    from hpcvar.noise import collector
    from hpcvar.noise.formats import load_trace

    cpu_list = collector.parse_cpus(cpus)
    if trace_path:
        if period or burn or at_clock:
            raise UsageError("--trace replays a trace; --period/--burn/--at-clock make periodic noise", "--trace",
                             "Give one or the other")
        tr = load_trace(trace_path, _freq(freq))
        ids = [c.cpu for c in tr.cpus]
        idx = 0 if trace_cpu is None else (ids.index(trace_cpu) if trace_cpu in ids else None)
        if idx is None:
            raise UsageError(f"the trace has no CPU {trace_cpu}", "--trace-cpu", f"Choose one of {ids}")
        with tempfile.TemporaryDirectory() as td:
            f = Path(td) / "replay.txt"
            length_ns = collector.replay_file(tr, idx, f)
            spec = collector.InjectSpec(cpu_list, time_s, rt_prio=rt_prio, replay=f, replay_length_ns=length_ns,
                                        loop=True)
            stderr_console().print(f"replaying {trace_path} (CPU {ids[idx]}) on CPU {cpus} for {time_s:g} s")
            res = collector.inject(spec)
    else:
        if not period or not burn:
            raise UsageError("periodic injection needs both --period and --burn", "--period",
                             "Give e.g. --period 10ms --burn 1ms, or --trace FILE")
        if burn >= period:
            raise UsageError("--burn must be shorter than --period", "--burn", "Shorten --burn")
        if period < 1e-6:
            raise UsageError("--period below 1 us cannot be honoured", "--period", "Give 1us or more")
        spec = collector.InjectSpec(cpu_list, time_s, period * 1e9, burn * 1e9, phase * 1e9, rt_prio,
                                    at_clock=at_clock)
        stderr_console().print(f"injecting {1 / period:g} Hz x {burn * 1e6:g} us on CPU {cpus} for {time_s:g} s")
        res = collector.inject(spec)
    for r in res:
        if rt_prio and not r["realtime"]:
            stderr_console().print(f"warning: CPU {r['cpu']}: SCHED_FIFO refused; bursts may be delayed. "
                                   "Run as root or grant CAP_SYS_NICE")
        if r["bursts"] and r["overruns"] > 0.1 * r["bursts"]:
            stderr_console().print(
                f"warning: CPU {r['cpu']}: {r['overruns']} of {r['bursts']} bursts overran: the injector woke later "
                f"than the whole burst (median wake-up {r['late_ns_p50'] / 1e3:.1f} us late), so those detours "
                "were as long as the wake-up, longer than promised. Give bursts well above the wake-up time "
                "(docs/noise.md)")
    emit({"cpus": res}, as_json, _render_inject)


def _render_inject(console, result: dict) -> None:
    for r in result["cpus"]:
        console.print(f"CPU {r['cpu']}: {r['bursts']} bursts, {r['burned_ns'] / 1e6:.1f} ms burned, "
                      f"wake-ups {r['late_ns_p50'] / 1e3:.1f} us late (median) "
                      f"(latest {r['late_ns_max'] / 1e3:.1f} us), {r['overruns']} overran, "
                      f"{'SCHED_FIFO' if r['realtime'] else 'normal scheduler'}")


def _emit(result: dict, as_json: bool) -> None:
    """'noise report': an analysis computed now (from a trace file, or again from a run's trace with this --top),
    not a stored result, so it is rendered from the result itself."""
    emit(result, as_json, _render_report)


def _render_report(console, result: dict) -> None:
    from hpcvar.kinds.noise_record.views import render_noise_result

    render_noise_result(console, result)
    if result.get("run"):
        console.print(f"stored in {result['run']}", markup=False)
