"""hpcvar characterize: the main job, as a list of steps.

A characterization is a composite run (command ``characterize``) whose steps
are ordinary runs stored under its ``steps/`` directory as soon as each one
finishes. ``--resume`` skips the steps already complete. A step that fails is
recorded with its error and the characterization goes on with the others.
Each step has a quick and a thorough parameter set.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hpcvar.bench.runner import BenchContext
from hpcvar.errors import HpcvarError
from hpcvar.results.store import Run, run_lifecycle


@dataclass
class Step:
    name: str
    title: str
    run: Callable[[StepContext, bool], Run]  # (context, quick) -> the step's run
    needs: set = field(default_factory=lambda: {"mpi"})  # "mpi", "root", "multinode"
    estimate_quick_s: float = 10.0


@dataclass
class StepContext:
    bench: BenchContext  # launcher, np, ... with runs_dir set to the steps directory
    parent: Run
    results: dict = field(default_factory=dict)  # name -> finished step run (for later steps)

    def nodes(self) -> int:
        """Nodes the launcher places ranks on (1 when it cannot tell)."""
        return self.bench.launcher.nodes() or 1

    def bench_ctx(self, **over) -> BenchContext:
        import dataclasses

        return dataclasses.replace(self.bench, resume=None, **over)


def _latency(ctx: StepContext, quick: bool) -> Run:
    from hpcvar.kinds.latency.job import LatencyParams, job

    # osu_latency / osu_bw style: 0 bytes, then every power of two up to 4 MiB (16 MiB when thorough)
    sizes = (0, *(1 << k for k in range(0, 23 if quick else 25)))
    params = LatencyParams(sizes=sizes, iters=1000 if quick else 10000, min_iters=20, warmup=10 if quick else 100,
                           time_per_size_s=0.3 if quick else 2.0)
    return job(params, ctx.bench_ctx(np=2))


# bench queues' defaults
QUEUE_DEFAULTS: dict[str, Any] = {"min_iters": 20, "warmup": 10, "pin": True, "fit_stat": "median"}


def _queues_posted(ctx: StepContext, quick: bool) -> Run:
    from hpcvar.kinds.queues.job import PostedParams, posted

    params = PostedParams(lengths=(0, 250, 500, 1000) if quick else (0, 250, 500, 1000, 2000, 4000),
                          traversed=(0, 50, 100), sizes=(8,) if quick else (8, 1024), any_source=False,
                          iters=200 if quick else 1000, time_per_point_s=0.15 if quick else 1.0, **QUEUE_DEFAULTS)
    return posted(params, ctx.bench_ctx(np=2))


def _queues_unexpected(ctx: StepContext, quick: bool) -> Run:
    from hpcvar.kinds.queues.job import UnexpectedParams, unexpected

    params = UnexpectedParams(lengths=(0, 250, 500, 1000, 2000) if quick else (0, 250, 500, 1000, 2000, 4000, 8000),
                              sizes=(8,), iters=200 if quick else 1000, time_per_point_s=0.15 if quick else 1.0,
                              **QUEUE_DEFAULTS)
    return unexpected(params, ctx.bench_ctx(np=2))


def _ace(ctx: StepContext, quick: bool) -> Run:
    from hpcvar.kinds.ace import job as ace

    shaped = ctx.nodes() > 1  # across shaped or real links a 1 MiB exchange costs ~80 ms at 200 Mbit/s
    cycles = (20 if shaped else 100) if quick else 1000
    ea = ace.parse_ea(f"pattern=pairs,mode=blocking,cycles={cycles}")
    params = ace.AceParams(eas=(ea,), np=2, loads=(20, 50, 80) if quick else (10, 20, 30, 40, 50, 60, 70, 80),
                           sizes=(1024, 1 << 20) if quick else (1024, 65536, 1 << 20), repeat=1, bench_iters=20,
                           bench_warmup=5)
    return ace.job(params, ctx.bench_ctx(np=2))


def _noise(ctx: StepContext, quick: bool) -> Run:
    """Noise on every CPU of every node of the launcher (one node: this machine's collector)."""
    from hpcvar.kinds.noise_record.job import RecordParams, job
    from hpcvar.noise import collector
    from hpcvar.results.context import JobContext

    duration = 5.0 if quick else 60.0
    if ctx.nodes() > 1:
        return job(RecordParams(cpus=None, duration_s=duration, nodes=ctx.nodes()), ctx.bench)
    here = JobContext(runs_dir=ctx.bench.runs_dir, argv=ctx.bench.argv)  # this machine's CPUs
    return job(RecordParams(cpus=tuple(collector.parse_cpus("all")), duration_s=duration), here)


def _jitter(ctx: StepContext, quick: bool) -> Run:
    """jitSim on the noise step's recording; on several nodes with the measured alignment as well."""
    from hpcvar.kinds.sim_jitter.job import JitterParams, Span, job, parse_span
    from hpcvar.noise import COSCHED, MEASURED, SYNC, UNSYNC
    from hpcvar.results.context import JobContext

    noise = ctx.results.get("noise")
    if noise is None:
        raise HpcvarError("the jitter prediction needs the noise step's trace", "--steps",
                          "Run the noise step too (it records the trace)")
    multi = (noise.path / "traces").is_dir()
    trace = str(noise.path if multi else noise.path / "trace.jtr")
    lat = ctx.results.get("latency")

    def measured(flag: str) -> Span:  # the latency step's, or none
        return parse_span(f"run:{lat.path}", flag) if lat is not None else Span(cycles=0)

    params = JitterParams(traces=(trace,), align=(UNSYNC, SYNC, COSCHED) + ((MEASURED,) if multi else ()),
                          window=Span(seconds=10e-3), replicas=3 if quick else 10, work=Span(seconds=1e-3),
                          send=measured("--send-cycles"), recv=measured("--recv-cycles"),
                          latency_intra=measured("--latency-intra"), latency_inter=measured("--latency-inter"),
                          phases=10 if quick else 50, tasks=tuple(_task_counts(4 if quick else 2)))
    return job(params, JobContext(runs_dir=ctx.bench.runs_dir, argv=ctx.bench.argv))


def _task_counts(factor: int) -> list[int]:
    """1, factor, factor^2, ... up to 1M tasks (the CLI's 1..1M:xF)."""
    out, n = [], 1
    while n <= 1 << 20:
        out.append(n)
        n *= factor
    return out


def _fanin(ctx: StepContext, quick: bool) -> Run:
    """Fan-in with and without chatter; across nodes one rank per node where the nodes suffice, else the root
    alone on its node (launchers that can place so), the clients sharing the root's link."""
    from hpcvar.kinds.fanin.job import FaninParams, job

    nodes = ctx.nodes()
    if nodes > 1:
        clients, chatter, large, small = (2,), (0, 1) if quick else (0, 2), 4 << 20, 64 << 10
        duration_s = 2.0 if quick else 5.0
    else:
        clients, chatter, large, small, duration_s = (1,), (0, 1), 256 << 10, 4 << 10, 0.5 if quick else 3.0
    params = FaninParams(servers=1, clients=clients, chatter_ratio=(4.0,), chatter=chatter, large=large, small=small,
                         duration_s=duration_s, messages=None, queues=("single",) if quick else ("single", "dual"),
                         depth=("deep",), match=("any",) if quick else ("any", "exact"), bin_s=None,
                         repeat=1 if quick else 3, placement="fixed", seed=1, max_samples=20000, wait="auto")
    need = 1 + clients[0] + max(chatter)
    # one rank per node when the nodes suffice; else the root alone on its node and the clients K to a node on
    # the others, where the launcher can place so (the testbed); the fan-in run says when the root shared its node
    rpn = (1 if nodes >= need else -(-(need - 1) // (nodes - 1))) if nodes > 1 else None
    return job(params, ctx.bench_ctx(np=None, ranks_per_node=rpn, root_alone=nodes > 1))


# the paper's Figure 2 schemes (examples/schemes/ has them as files, with comments)
STANDARD_SCHEMES = {
    "fig2-2": "a: 0 -> 1; b: 0 -> 2",
    "fig2-3": "a: 0 -> 1; b: 0 -> 2; c: 0 -> 3",
    "fig2-4": "a: 0 -> 1; b: 0 -> 2; c: 0 -> 3; d: 1 -> 4",
    "star3-in": "a: 1 -> 0; b: 2 -> 0; c: 3 -> 0",
}


def _sharing(ctx: StepContext, quick: bool) -> Run:
    """The standard schemes that fit on the launcher's nodes, the gige fit on them, and each model's E_abs."""
    from hpcvar.kinds.sharing.job import SharingParams, job
    from hpcvar.models.fit import Observation, fit_gige
    from hpcvar.models.scheme import load_scheme

    schemes = [load_scheme(STANDARD_SCHEMES[n]) for n in
               (("fig2-2", "fig2-3") if quick else ("fig2-2", "fig2-3", "fig2-4", "star3-in"))]
    nodes = ctx.nodes()
    fit_here = [s for s in schemes if len(s.nodes) <= nodes]
    if not fit_here:
        raise HpcvarError(f"every standard scheme needs more than the launcher's {nodes} nodes", "--launcher",
                          "Run it on 3 nodes or more (salloc -N 4, or testbed up --hosts 4)")
    runs = []
    for sch in fit_here:
        runs.append(job(SharingParams(scheme=sch, size=20 << 20, reps=2 if quick else 5, warmup=1),
                        ctx.bench_ctx(np=None, ranks_per_node=None)))
    obs = []
    for r in runs:
        summ = r.read_table("sharing.summary").sort_values("comm_index")
        pairs = list(zip(summ.src.astype(str), summ.dst.astype(str), strict=True))
        obs.append(Observation(r.id, pairs, list(summ.comm),
                               [float(x) for x in summ.penalty]))
    fit = fit_gige(obs)
    for r in runs:
        r.info["gige_fit"] = fit["params"]
        r.info["gige_fit_runs"] = [o.label for o in obs]
        held = _held_out_fit(fit_gige, [o for o in obs if o.label != r.id])
        if held is not None:
            r.info["gige_heldout_fit"] = held
        r.info["params"]["step"] = "sharing"
        r.save()
    if len(fit_here) < len(schemes):
        runs[-1].warn(f"{len(schemes) - len(fit_here)} standard scheme(s) need more than the {nodes} nodes here "
                      "and were not run")
    return runs[-1]


def _held_out_fit(fit_gige, others: list) -> dict | None:
    """The gige parameters fitted on the other schemes only ({"params", "runs"}), against which a scheme's
    error is a held-out prediction error; None when the other schemes cannot fit beta (none, or no pure
    conflict among them): that scheme's gige error is then an in-sample fit only."""
    from hpcvar.errors import UsageError

    if not others:
        return None
    try:
        return {"params": fit_gige(others)["params"], "runs": [o.label for o in others]}
    except UsageError:
        return None


def _screen(ctx: StepContext, quick: bool) -> Run:
    """Which node, which link: every node and every pair of the launcher's nodes (hpcvar screen)."""
    import os

    from hpcvar.kinds.screen.job import ScreenParams, job

    nodes = ctx.nodes()
    params = ScreenParams(nodes=nodes, ranks_per_node=2, pairs="auto", seed=1, rounds=2 if quick else 3,
                          check_s=0.2 if quick else 0.5, noise_s=0.5 if quick else 2.0,
                          kernel_s=0.3 if quick else 1.0, kernel_quantum_s=1e-3, timer_samples=20 if quick else 100,
                          timer_reads=1000, shm_iters=100 if quick else 500, lat_iters=100 if quick else 200,
                          lat_warmup=10 if quick else 20, bw_size_bytes=(1 << 20) if quick else (4 << 20),
                          bw_iters=3 if quick else 5, bw_warmup=1, partition=os.environ.get("SLURM_JOB_PARTITION"),
                          expect_file=None, expect_text=None, costs=True)
    return job(params, ctx.bench_ctx(np=None, ranks_per_node=None))


STEPS: list[Step] = [
    Step("latency", "Point-to-point latency and bandwidth", _latency, estimate_quick_s=5),
    Step("queues-posted", "Latency against posted-receive queue length", _queues_posted, estimate_quick_s=15),
    Step("queues-unexpected", "Latency against unexpected-queue length", _queues_unexpected, estimate_quick_s=10),
    Step("ace", "ACE: predicted vs measured run time over a load grid", _ace, estimate_quick_s=30),
    Step("noise", "OS jitter recorded on every core", _noise, needs=set(), estimate_quick_s=10),
    Step("jitter", "Jitter slowdown predicted up to 1M tasks", _jitter, needs=set(), estimate_quick_s=60),
    Step("sharing", "Bandwidth-sharing penalties and model errors", _sharing, needs={"mpi", "multinode"},
         estimate_quick_s=60),
    Step("fanin", "Fan-in bandwidth with and without chatter", _fanin, estimate_quick_s=15),
    Step("screen", "Which node, which link: every node and every pair of nodes", _screen,
         needs={"mpi", "multinode"}, estimate_quick_s=30),
]


def step_names() -> list[str]:
    return [s.name for s in STEPS]


def _applies(step: Step, ctx: BenchContext) -> str | None:
    """Why a step does not apply here (None when it does)."""
    import os

    from hpcvar._native import build_info

    if "mpi" in step.needs and not build_info().get("mpi_found"):
        return "hpcvar was built without MPI"
    if "root" in step.needs and os.geteuid() != 0:
        return "needs root"
    if "multinode" in step.needs and (ctx.launcher.nodes() or 1) < 3:
        return ("needs 3 nodes or more (a multi-node launcher: 'hpcvar characterize --launcher srun' in an "
                "allocation of 3+ nodes, or '--launcher testbed' with 3+ hosts)")
    return None


def run_characterization(ctx: BenchContext, quick: bool, only: str | None = None, resume: str | None = None,
                         report: str | None = None, console=None, baseline: str | None = None,
                         expect: str | None = None, flags_given: tuple[str, ...] = ()) -> dict:
    """Run the chosen steps (each stored as it finishes), then write the report; ``baseline``: an earlier
    characterization the report's verdict compares against (resolved first, so a wrong one fails early);
    ``expect``: a site expectations file (hpcvar.expect; read first). The result holds the one-line answer
    (``answer``: OK, DEGRADED or UNRELIABLE, hpcvar.answer). With ``resume``, the characterization continues
    with its stored ``quick`` and ``steps`` unless ``flags_given`` (the command line's --quick, --steps) set
    them, which must then be the stored ones."""
    from hpcvar import metadata
    from hpcvar.errors import UsageError
    from hpcvar.results.store import resolve_run

    expectations = None
    if expect:
        from hpcvar import expect as ex

        expectations = ex.load(expect)

    base = Run.open(resolve_run(baseline, ctx.runs_dir)) if baseline else None
    if base is not None and base.info.get("command") != "characterize":
        raise UsageError(f"run {base.id} is not a characterization", "--baseline",
                         "Give an earlier characterize run (hpcvar runs list)")
    parent = _resumed(resume, ctx) if resume else None
    if parent is not None:  # what the command line did not set, the characterization's stored parameters do
        stored = parent.info.get("params") or {}
        quick = quick if "quick" in flags_given else bool(stored.get("quick", quick))
        only = only if "steps" in flags_given or not stored.get("steps") else ",".join(stored["steps"])
    chosen = STEPS
    if only:
        names = [n.strip() for n in only.split(",") if n.strip()]
        unknown = [n for n in names if n not in step_names()]
        if unknown:
            raise UsageError(f"unknown step(s) {', '.join(unknown)}", "--steps",
                             f"Choose from {', '.join(step_names())}")
        chosen = [s for s in STEPS if s.name in names]
    params = {"quick": quick, "steps": [s.name for s in chosen], "np": ctx.np, "launcher": ctx.launcher.name}
    if parent is not None:
        _check_resumed(parent, params, flags_given)
        parent.claim()
        parent.save()
    else:
        parent = Run.create("characterize", params, ctx.runs_dir, ctx.argv,
                            metadata.collect({"launcher": ctx.launcher.describe(), "np": ctx.np}))
    with run_lifecycle(parent):  # Ctrl-C or an unexpected error ends the parent interrupted or failed
        _check_load(ctx, parent, console)
        return _run_steps(ctx, parent, chosen, quick, report, console, base, expectations)


def _resumed(resume: str, ctx: BenchContext) -> Run:
    """The characterization ``--resume`` names."""
    from hpcvar.errors import UsageError
    from hpcvar.results.store import resolve_run

    parent = Run.open(resolve_run(resume, ctx.runs_dir))
    if parent.info.get("command") != "characterize":
        raise UsageError(f"run {parent.id} is not a characterization", "--resume", "Give a characterize run")
    return parent


def _check_resumed(parent: Run, params: dict, flags_given: tuple[str, ...]) -> None:
    """--quick / --steps given with --resume must be what the characterization was started with."""
    from hpcvar.errors import UsageError

    stored = parent.info.get("params") or {}
    differ = [f"--{key}" for key in ("quick", "steps") if key in flags_given and stored.get(key) != params[key]]
    if differ:
        was = f"{'--quick' if stored.get('quick') else 'thorough'}, steps {','.join(stored.get('steps') or [])}"
        raise UsageError(f"run {parent.id} was started {was}: {' and '.join(differ)} differ", differ[0],
                         f"Continue it with --resume {parent.id} alone (its stored parameters), or start a new "
                         "characterization")


def _here(ctx: BenchContext) -> bool:
    """Whether the steps run on this machine (local and testbed launchers), so that its load is theirs."""
    return ctx.launcher.name in ("local", "testbed")


def _check_load(ctx: BenchContext, parent: Run, console) -> None:
    """The load check before measuring: other processes' share of this machine's CPUs over 0.5 s, recorded in
    the run (``load_check``), a warning when above metadata.LOAD_WARN_PCT."""
    from hpcvar import metadata

    if not _here(ctx):
        parent.info["load_check"] = {"skipped": f"the {ctx.launcher.name} launcher runs the steps on other nodes "
                                                "(hpcvar screen checks each node's load)"}
        return
    load = metadata.load_check(LOAD_CHECK_S)
    warn = metadata.load_warning(load, "before measuring")
    parent.info["load_check"] = {**(load or {}), "warning": warn}
    if warn:
        parent.warn(warn)
        if console is not None:
            console.print(f"[yellow]warning:[/] {warn}")
    parent.save()


LOAD_CHECK_S = 0.5


def _run_steps(ctx: BenchContext, parent: Run, chosen: list[Step], quick: bool, report: str | None,
               console, base: Run | None = None, expectations=None) -> dict:
    """The steps of a characterization into ``parent``; finishes it complete, or failed when a step failed."""
    import time

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from hpcvar import metadata
    from hpcvar.report.document import write_report

    parent.info.setdefault("steps", {})
    mark = metadata.LoadMark.now() if _here(ctx) else None
    sctx = StepContext(bench=_child_ctx(ctx, parent), parent=parent)
    show = bool(console is not None and getattr(console, "is_terminal", False))
    with Progress(TextColumn("characterize {task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=console, disable=not show) as bar:
        task = bar.add_task("", total=len(chosen))
        for step in chosen:
            bar.update(task, description=step.name)
            state = parent.info["steps"].get(step.name, {})
            if state.get("status") == "complete" and (parent.path / "steps" / state["run"] / "run.json").is_file():
                sctx.results[step.name] = Run.open(parent.path / "steps" / state["run"])
                bar.advance(task)
                continue
            why = _applies(step, ctx)
            if why:
                parent.info["steps"][step.name] = {"status": "skipped", "reason": why}
                parent.save()
                bar.advance(task)
                continue
            t0 = time.monotonic()
            try:
                child = step.run(sctx, quick)
                child.info["params"]["step"] = step.name
                child.save()
                sctx.results[step.name] = child
                parent.info["steps"][step.name] = {"status": "complete", "run": child.id,
                                                   "elapsed_s": round(time.monotonic() - t0, 1)}
            except HpcvarError as e:
                parent.info["steps"][step.name] = {"status": "failed", "error": e.render(),
                                                   "elapsed_s": round(time.monotonic() - t0, 1)}
                if console is not None:
                    console.print(f"[red]step {step.name} failed:[/] {e.render()}")
            parent.save()
            bar.advance(task)
    _record_load(parent, mark)
    children = parent.children()
    verdicts: list = []
    out = write_report(children, parent.path / "report.html", "hpcvar characterization", tops=[parent],
                       baseline=base, expectations=expectations, verdict_out=verdicts)
    if report:
        write_report(children, Path(report), "hpcvar characterization", tops=[parent], baseline=base,
                     expectations=expectations)
    steps = [{"name": s.name, **parent.info["steps"].get(s.name, {"status": "not run"})} for s in chosen]
    failed = any(s["status"] == "failed" for s in steps)
    answer = verdicts[0].answer
    result = {"run": str(parent.path), "report": str(report or out), "answer": answer.to_json(), "steps": steps,
              "load_check": parent.info.get("load_check"), "load": parent.info.get("load")}
    parent.finish("failed" if failed else "complete", result, exit_status=answer.exit_code)
    return result


def _record_load(parent: Run, mark) -> None:
    """Other processes' share of this machine's CPUs while the steps ran (``load`` in run.json), from ``mark``
    (metadata.LoadMark at the start; None where the steps run elsewhere)."""
    from hpcvar import metadata

    end = metadata.LoadMark.now() if mark is not None else None
    if mark is not None and end is not None:
        load = end.since(mark)
        parent.info["load"] = {**load, "warning": metadata.load_warning(load, "while the steps ran")}
        parent.save()


def _child_ctx(ctx: BenchContext, parent: Run) -> BenchContext:
    import dataclasses

    return dataclasses.replace(ctx, runs_dir=str(parent.steps_dir()), resume=None, progress=True,
                               within="characterize")
