"""``hpcvar noise record``: OS jitter recorded on this machine's CPUs, or on every node of a multi-node launcher.

``job(RecordParams, ctx) -> Run``, called by the command line and by ``hpcvar characterize``:

- with a plain JobContext (or a BenchContext whose launcher is ``local``): hv_noise_collect on CPUs of this
  machine (optionally with kernel tracepoints, ``attribute``): the run holds ``trace.jtr``;
- with a BenchContext of a multi-node launcher (srun, testbed, template): hv_noise_nodes on every node; the run
  holds ``traces/<host>.jtr`` and the cross-node alignment (hpcvar.noise.nodes).
"""

from __future__ import annotations

from dataclasses import dataclass

from hpcvar import metadata
from hpcvar.bench.runner import BenchContext
from hpcvar.errors import UsageError
from hpcvar.launch import Launcher
from hpcvar.results import Run, run_lifecycle
from hpcvar.results.context import JobContext
from hpcvar.results.kinds import draw_plots
from hpcvar.results.params import Params

COMMAND = "noise record"


@dataclass(frozen=True)
class RecordParams(Params):
    """``hpcvar noise record``'s parameters (run.json ``params``)."""

    cpus: tuple[int, ...] | None  # the CPUs recorded on (the same on every node); None: all of them
    duration_s: float
    threshold_ns: float = 0.0  # 0: max(9 x t_min, 100 ns) per CPU
    max_rate_per_s: float = 200000.0  # event buffer per CPU, in events per second of the recording
    rt_prio: int = 0
    attribute: bool = False  # one machine: also trace the kernel's events (tracefs, root)
    method: str = "auto"  # spin | timer | auto (spin; timer when the nodes are one machine)
    interval_ns: float = 200_000.0  # --method timer: time between deadlines
    min_detour_s: float = 100e-6  # several nodes: detours compared across nodes
    window_s: float = 10e-3  # several nodes: window of the noise fraction correlated across nodes
    nodes: int | None = None  # several nodes: how many (None: every node of the launcher)
    plots: bool = True


def job(params: RecordParams, ctx: JobContext) -> Run:
    """Record on this machine, or on every node of ``ctx.launcher`` when it is a multi-node one."""
    launcher = ctx.launcher if isinstance(ctx, BenchContext) else None
    if launcher is not None and launcher.name != "local":
        if params.attribute:
            raise UsageError("--attribute records one node", "--attribute", "Drop it, or use --launcher local")
        assert isinstance(ctx, BenchContext)
        return _record_nodes(params, launcher, ctx)
    return _record_local(params, ctx)


def _record_local(p: RecordParams, ctx: JobContext) -> Run:
    from hpcvar.noise import collector

    cpu_list = list(p.cpus) if p.cpus is not None else collector.parse_cpus("all")
    tracefs = None
    if p.attribute:
        from hpcvar.noise import ktrace

        tracefs = ktrace.require_tracefs("--attribute")  # fails (root, tracefs) before anything is recorded
    run = ctx.create_run(COMMAND, p, metadata.collect())
    with run_lifecycle(run):
        run.info["result"] = _record_local_into(p, run, cpu_list, tracefs, ctx)
        if p.plots:
            run.info["result"]["plots"] = draw_plots(run)
    return run


def _record_local_into(p: RecordParams, run: Run, cpu_list: list[int], tracefs, ctx: JobContext) -> dict:
    """The work of a recording on this machine once its run exists; returns the JSON result."""
    from hpcvar.noise import analysis, collector
    from hpcvar.noise.formats import read_jtr

    jtr = run.path / "trace.jtr"
    rec = None
    duration, thr_ns, rt_prio, argv, say = p.duration_s, p.threshold_ns, p.rt_prio, ctx.argv, ctx.say
    method = "spin" if p.method == "auto" else p.method
    if p.attribute:
        ref_s = min(collector.REFERENCE_S, duration)
        say(f"reference recording without tracing: {ref_s:g} s")
        collector.collect(cpu_list, ref_s, run.raw_dir() / "untraced.jtr", thr_ns, p.max_rate_per_s, argv, rt_prio)
        say(f"recording {duration:g} s on CPU {','.join(map(str, cpu_list))} with kernel tracepoints "
            f"(tracefs instance under {tracefs}/instances) into {run.path}")
        rec = collector.collect_attributed(cpu_list, duration, jtr, thr_ns, p.max_rate_per_s, argv, rt_prio,
                                           tracefs)
        res = rec.result
    else:
        say(f"recording {duration:g} s on CPU {','.join(map(str, cpu_list))} into {run.path}")
        res = collector.collect(cpu_list, duration, jtr, thr_ns, p.max_rate_per_s, argv, rt_prio, method,
                                p.interval_ns)

    (run.raw_dir() / "collector.log").write_text(res.stderr)
    trace = read_jtr(jtr)
    report = analysis.analyze(trace)
    for name, df in collector.tables(report).items():
        run.write_table(name, df)
    if rec is not None:
        from hpcvar.results import atomic_write_text, dumps

        kev, session = collector.kernel_events(rec, trace)
        session["overhead"] = collector.tracing_overhead(read_jtr(run.raw_dir() / "untraced.jtr"), trace,
                                                         min(collector.REFERENCE_S, duration))
        atomic_write_text(run.path / "tracefs.json", dumps(session))
        run.write_table("noise.kernel_events", kev)
        det, summ = collector.add_matched(report, trace, kev, session)
        run.write_table("noise.attribution", det)
        run.write_table("noise.attribution_summary", summ)
        if report["matched"].get("warning"):
            run.warn(report["matched"]["warning"] + "; record shorter or on fewer CPUs")
        if not len(kev):
            run.warn("tracefs recorded no kernel event on the recorded CPUs")
    for q in report["quality"]["cpus"]:
        if q.get("overflow"):
            run.warn(f"CPU {q['cpu']}: the event buffer filled; raise --max-rate")
        if rt_prio and not q.get("rt_prio"):
            run.warn(f"CPU {q['cpu']}: SCHED_FIFO was refused; run as root or grant CAP_SYS_NICE")
        if q.get("migrations"):
            run.warn(f"CPU {q['cpu']}: the thread ran on another CPU after {q['migrations']} events")
    result = collector.json_summary(report)
    result["run"] = str(run.path)
    result["trace"] = str(jtr)
    return result


def _record_nodes(p: RecordParams, launcher: Launcher, ctx: BenchContext) -> Run:
    from hpcvar.noise import nodes as nn

    count = p.nodes or launcher.nodes()
    if not count:
        raise UsageError("cannot tell how many nodes to record on", "--np",
                         "Give --np NODES (outside an allocation, or with --launcher template)")
    cpus = "all" if p.cpus is None else ",".join(map(str, p.cpus))
    np_ = nn.NodesParams(cpus=cpus, duration_s=p.duration_s, threshold_ns=p.threshold_ns,
                         max_rate=p.max_rate_per_s, rt_prio=p.rt_prio,
                         method=nn.resolve_method(p.method, nn.shares_machine(launcher)), interval_ns=p.interval_ns,
                         min_detour_s=p.min_detour_s, window_s=p.window_s)
    run = ctx.create_run(COMMAND, p, metadata.collect({"launcher": launcher.describe(), "np": count,
                                                       "ranks_per_node": 1}))
    ctx.say(f"recording {p.duration_s:g} s on {count} nodes ({launcher.name}, {np_.method} method) into {run.path}")
    with run_lifecycle(run):
        run.info["result"] = nn.record(launcher, count, np_, run, ctx.timeout_s, ctx.launcher_args, ctx.argv)
        if p.plots:
            run.info["result"]["plots"] = draw_plots(run)
    return run
