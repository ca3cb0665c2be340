"""``hpcvar noise record`` as library jobs: ``(params, ...) -> (Run, result)``, called by the command line
and by ``hpcvar characterize`` (which gets the Run back as a value).

- ``record_local``: hv_noise_collect on CPUs of this machine (optionally with kernel tracepoints,
  ``attribute``): the run holds ``trace.jtr``.
- ``record_nodes``: hv_noise_nodes on every node of a multi-node launcher (srun, testbed, template): the run
  holds ``traces/<host>.jtr`` and the cross-node alignment (hpcvar.noise.nodes).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass

from hpcvar import metadata
from hpcvar.errors import UsageError
from hpcvar.launch import Launcher
from hpcvar.results import Run, run_lifecycle


@dataclass(frozen=True)
class LocalParams:
    cpus: tuple[int, ...]
    duration_s: float
    threshold_ns: float = 0.0
    max_rate: float = 200000.0
    rt_prio: int = 0
    attribute: bool = False
    method: str = "spin"  # spin | timer
    interval_ns: float = 200_000.0
    plots: bool = True


@dataclass(frozen=True)
class NodesJobParams:
    cpus: str  # "all" or a comma list, the same CPUs on every node
    duration_s: float
    threshold_ns: float = 0.0
    max_rate: float = 200000.0
    rt_prio: int = 0
    method: str = "auto"  # auto | spin | timer
    interval_ns: float = 200_000.0
    min_detour_s: float = 100e-6
    window_s: float = 10e-3
    nodes: int | None = None  # None: every node of the launcher
    plots: bool = True


def _quiet(_: str) -> None:
    return None


def record_local(p: LocalParams, runs_dir, argv: list[str] | None = None,
                 say: Callable[[str], None] = _quiet) -> tuple[Run, dict]:
    cpu_list = list(p.cpus)
    tracefs = None
    if p.attribute:
        from hpcvar.noise import ktrace

        tracefs = ktrace.require_tracefs("--attribute")  # fails (root, tracefs) before anything is recorded
    params = {"cpus": cpu_list, "duration_s": p.duration_s, "threshold_ns": p.threshold_ns, "max_rate": p.max_rate,
              "rt_prio": p.rt_prio, "attribute": p.attribute, "method": p.method}
    run = Run.create("noise record", params, runs_dir, argv=argv, metadata=metadata.collect())
    with run_lifecycle(run):
        run.info["result"] = _record_local(p, run, cpu_list, tracefs, argv, say)
    return run, run.info["result"]


def _record_local(p: LocalParams, run: Run, cpu_list: list[int], tracefs, argv: list[str] | None,
                  say: Callable[[str], None]) -> dict:
    """The work of ``record_local`` once its run exists; returns the JSON result."""
    from hpcvar.noise import analysis, collector
    from hpcvar.noise.formats import read_jtr

    jtr = run.path / "trace.jtr"
    rec = None
    duration, thr_ns, rt_prio = p.duration_s, p.threshold_ns, p.rt_prio
    if p.attribute:
        ref_s = min(collector.REFERENCE_S, duration)
        say(f"reference recording without tracing: {ref_s:g} s")
        collector.collect(cpu_list, ref_s, run.raw_dir() / "untraced.jtr", thr_ns, p.max_rate, argv, rt_prio)
        say(f"recording {duration:g} s on CPU {','.join(map(str, cpu_list))} with kernel tracepoints "
            f"(tracefs instance under {tracefs}/instances) into {run.path}")
        rec = collector.collect_attributed(cpu_list, duration, jtr, thr_ns, p.max_rate, argv, rt_prio, tracefs)
        res = rec.result
    else:
        say(f"recording {duration:g} s on CPU {','.join(map(str, cpu_list))} into {run.path}")
        res = collector.collect(cpu_list, duration, jtr, thr_ns, p.max_rate, argv, rt_prio, p.method,
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
    if p.plots:
        analysis.plot_all(trace, report, run.plots_dir())
    result = collector.json_summary(report)
    result["run"] = str(run.path)
    result["trace"] = str(jtr)
    return result


def record(p: LocalParams | NodesJobParams, runs_dir, argv: list[str] | None = None, *,
           launcher: Launcher | None = None, timeout_s: float | None = None, launcher_args: list[str] | None = None,
           say: Callable[[str], None] = _quiet) -> tuple[Run, dict]:
    """The job of ``noise record`` (the table of kinds names it): ``record_local`` for LocalParams,
    ``record_nodes`` on every node of ``launcher`` for NodesJobParams."""
    if isinstance(p, NodesJobParams):
        if launcher is None:
            raise UsageError("recording on several nodes needs a multi-node launcher", "--launcher",
                             "Give --launcher srun, testbed or template")
        return record_nodes(p, launcher, runs_dir, argv, timeout_s, launcher_args, say)
    return record_local(p, runs_dir, argv, say)


def record_nodes(p: NodesJobParams, launcher: Launcher, runs_dir, argv: list[str] | None = None,
                 timeout_s: float | None = None, launcher_args: list[str] | None = None,
                 say: Callable[[str], None] = _quiet) -> tuple[Run, dict]:
    from hpcvar.noise import nodes as nn

    if p.cpus != "all" and not all(x.strip().isdigit() for x in p.cpus.split(",")):
        raise UsageError(f"'{p.cpus}' is not 'all' or a comma list of CPUs", "--cpus",
                         "On several nodes give all or a list such as 0,1 (the same CPUs on every node)")
    count = p.nodes or launcher.nodes()
    if not count:
        raise UsageError("cannot tell how many nodes to record on", "--np",
                         "Give --np NODES (outside an allocation, or with --launcher template)")
    np_ = nn.NodesParams(cpus=p.cpus, duration_s=p.duration_s, threshold_ns=p.threshold_ns, max_rate=p.max_rate,
                         rt_prio=p.rt_prio, method=nn.resolve_method(p.method, nn.shares_machine(launcher)),
                         interval_ns=p.interval_ns, min_detour_s=p.min_detour_s, window_s=p.window_s)
    params = {**asdict(np_), "attribute": False, "nodes": count, "launcher": launcher.name}
    run = Run.create("noise record", params, runs_dir, argv=argv,
                     metadata=metadata.collect({"launcher": launcher.describe(), "np": count, "ranks_per_node": 1}))
    say(f"recording {p.duration_s:g} s on {count} nodes ({launcher.name}, {np_.method} method) into {run.path}")
    with run_lifecycle(run):
        result = nn.record(launcher, count, np_, run, timeout_s, launcher_args or [], argv)
        if p.plots:
            from hpcvar.kinds.noise_record.views import plot_windows

            plot_windows(run, run.read_table("noise.windows"))
        run.info["result"] = result
    return run, result
