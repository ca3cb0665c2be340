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

from hpcvar.bench.runner import BenchContext
from hpcvar.errors import HpcvarError
from hpcvar.results.store import Run


@dataclass
class Step:
    name: str
    title: str
    run: Callable[["StepContext", bool], Run]  # (context, quick) -> the step's run
    needs: set = field(default_factory=lambda: {"mpi"})  # "mpi", "root", "multinode"
    estimate_quick_s: float = 10.0


@dataclass
class StepContext:
    bench: BenchContext  # launcher, np, ... with runs_dir set to the steps directory
    parent: Run
    results: dict = field(default_factory=dict)  # name -> finished step run (for later steps)
    launch: list[str] = field(default_factory=list)  # the launch options of the command line

    def launch_args(self, np: int | None) -> list[str]:
        """The user's launch options, with --np replaced (None: the command's own default)."""
        out, skip = [], False
        for i, a in enumerate(self.launch):
            if skip:
                skip = False
                continue
            if a == "--np":
                skip = True
                continue
            out.append(a)
        return out + (["--np", str(np)] if np is not None else [])

    def bench_ctx(self, **over) -> BenchContext:
        import dataclasses

        return dataclasses.replace(self.bench, resume=None, **over)


def _latency(ctx: StepContext, quick: bool) -> Run:
    from hpcvar.bench.latency import Latency
    from hpcvar.bench.runner import run_benchmark

    sizes = [0, 8, 64, 1024, 8192, 65536, 1 << 20, 4 << 20] if quick else \
        [0, 1, 8, 64, 512, 1024, 4096, 8192, 32768, 65536, 262144, 1 << 20, 4 << 20, 16 << 20]
    params = {"sizes": sizes, "iters": 1000 if quick else 10000, "min_iters": 20, "warmup": 10 if quick else 100,
              "time_per_size_s": 0.3 if quick else 2.0}
    run, _ = run_benchmark(Latency(), params, ctx.bench_ctx(np=2))
    return run


def invoke(ctx: StepContext, words: list[str], launch: bool = True, np: int | None = 2) -> Run:
    """Run an hpcvar command in-process (its own validation and storage), its output
    captured; returns the run it stored in the characterization's steps directory."""
    import contextlib
    import io

    from hpcvar.cli import cli
    from hpcvar.results.store import list_runs

    steps_dir = ctx.bench.runs_dir
    before = {r.id for r in list_runs(steps_dir)}
    args = list(words)
    if launch:
        args += ctx.launch_args(np)
    args += ["--runs-dir", steps_dir, "--json"]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        cli.main(args=args, prog_name="hpcvar", standalone_mode=False)
    new = [r for r in list_runs(steps_dir) if r.id not in before]
    if not new:
        raise HpcvarError(f"'hpcvar {' '.join(words[:3])}' stored no run", None, "See its log above")
    return new[-1]


def _queues_posted(ctx: StepContext, quick: bool) -> Run:
    lengths = "0,250,500,1000" if quick else "0,250,500,1000,2000,4000"
    return invoke(ctx, ["bench", "queues", "posted", "--lengths", lengths, "--traversed", "0,50,100",
                        "--sizes", "8" if quick else "8,1KiB", "--iters", "200" if quick else "1000",
                        "--time-per-point", "150ms" if quick else "1s"])


def _queues_unexpected(ctx: StepContext, quick: bool) -> Run:
    lengths = "0,250,500,1000,2000" if quick else "0,250,500,1000,2000,4000,8000"
    return invoke(ctx, ["bench", "queues", "unexpected", "--lengths", lengths, "--sizes", "8",
                        "--iters", "200" if quick else "1000", "--time-per-point", "150ms" if quick else "1s"])


def _ace(ctx: StepContext, quick: bool) -> Run:
    shaped = ctx.bench.launcher.name == "testbed"  # a 1 MiB exchange costs ~80 ms at 200 Mbit/s
    cycles = (20 if shaped else 100) if quick else 1000
    return invoke(ctx, ["bench", "ace", "--ea", f"pattern=pairs,mode=blocking,cycles={cycles}",
                        "--sizes", "1KiB,1MiB" if quick else "1KiB,64KiB,1MiB",
                        "--loads", "20,50,80" if quick else "10,20,30,40,50,60,70,80"])


def _noise(ctx: StepContext, quick: bool) -> Run:
    return invoke(ctx, ["noise", "record", "--cpus", "all", "--duration", "5s" if quick else "60s"], launch=False)


def _jitter(ctx: StepContext, quick: bool) -> Run:
    noise = ctx.results.get("noise")
    if noise is None:
        raise HpcvarError("the jitter prediction needs the noise step's trace", "--steps",
                          "Run the noise step too (it records the trace)")
    trace = noise.path / "trace.jtr"
    words = ["sim", "jitter", "--trace", str(trace), "--tasks", "1..1M:x4" if quick else "1..1M:x2",
             "--quantum", "1ms", "--barrier", "tree", "--align", "unsync,sync,cosched", "--window", "10ms",
             "--phases", "10" if quick else "50", "--replicas", "3" if quick else "10"]
    lat = ctx.results.get("latency")
    if lat is not None:
        words += ["--latency-intra", f"run:{lat.path}", "--latency-inter", f"run:{lat.path}",
                  "--send-cycles", f"run:{lat.path}", "--recv-cycles", f"run:{lat.path}"]
    return invoke(ctx, words, launch=False)


def _fanin(ctx: StepContext, quick: bool) -> Run:
    """Fan-in with and without chatter; on the testbed one rank per host, sharing the root's link."""
    if ctx.bench.launcher.name == "testbed":
        words = ["--clients", "2", "--chatter", "0,1" if quick else "0,2", "--large", "4MiB", "--small", "64KiB",
                 "--duration", "2s" if quick else "5s"]
    else:
        words = ["--clients", "1", "--chatter", "0,1", "--large", "256KiB", "--small", "4KiB",
                 "--duration", "500ms" if quick else "3s"]
    if not quick:
        words += ["--queues", "single,dual", "--match", "any,exact", "--repeat", "3"]
    return invoke(ctx, ["bench", "fanin", *words], np=None)  # --np: what the largest point needs


# the paper's Figure 2 schemes (examples/schemes/ has them as files, with comments)
STANDARD_SCHEMES = {
    "fig2-2": "a: 0 -> 1; b: 0 -> 2",
    "fig2-3": "a: 0 -> 1; b: 0 -> 2; c: 0 -> 3",
    "fig2-4": "a: 0 -> 1; b: 0 -> 2; c: 0 -> 3; d: 1 -> 4",
    "star3-in": "a: 1 -> 0; b: 2 -> 0; c: 3 -> 0",
}


def _sharing(ctx: StepContext, quick: bool) -> Run:
    """The standard schemes, the gige fit on them, and each model's E_abs (fitted gige)."""
    from hpcvar.models.fit import Observation, fit_gige

    runs = []
    for name in ("fig2-2", "fig2-3") if quick else ("fig2-2", "fig2-3", "fig2-4", "star3-in"):
        runs.append(invoke(ctx, ["bench", "sharing", STANDARD_SCHEMES[name], "--reps", "2" if quick else "5"],
                           np=None))
    obs = []
    for r in runs:
        summ = r.read_table("sharing.summary").sort_values("comm_index")
        obs.append(Observation(r.id, list(zip(summ.src.astype(str), summ.dst.astype(str))), list(summ.comm),
                               [float(x) for x in summ.penalty]))
    fit = fit_gige(obs)
    for r in runs:
        r.info["gige_fit"] = fit["params"]
        r.info["params"]["step"] = "sharing"
        r.save()
    return runs[-1]


STEPS: list[Step] = [
    Step("latency", "Point-to-point latency and bandwidth", _latency, estimate_quick_s=5),
    Step("queues-posted", "Latency against posted-receive queue length", _queues_posted, estimate_quick_s=15),
    Step("queues-unexpected", "Latency against unexpected-queue length", _queues_unexpected, estimate_quick_s=10),
    Step("ace", "ACE: predicted vs measured run time over a load grid", _ace, estimate_quick_s=30),
    Step("noise", "OS jitter recorded on every core", _noise, needs=set(), estimate_quick_s=10),
    Step("jitter", "Jitter slowdown predicted up to 1M tasks", _jitter, needs=set(), estimate_quick_s=60),
    Step("sharing", "Bandwidth-sharing penalties and model errors", _sharing, needs={"mpi", "testbed"},
         estimate_quick_s=60),
    Step("fanin", "Fan-in bandwidth with and without chatter", _fanin, estimate_quick_s=15),
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
    if "testbed" in step.needs and ctx.launcher.name != "testbed":
        return "needs --launcher testbed (shaped links between hosts)"
    return None


def run_characterization(ctx: BenchContext, quick: bool, only: str | None = None, resume: str | None = None,
                         report: str | None = None, console=None, launch: list[str] | None = None) -> dict:
    import time

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from hpcvar import metadata
    from hpcvar.errors import UsageError
    from hpcvar.report.document import write_report
    from hpcvar.results.store import resolve_run

    chosen = STEPS
    if only:
        names = [n.strip() for n in only.split(",") if n.strip()]
        unknown = [n for n in names if n not in step_names()]
        if unknown:
            raise UsageError(f"unknown step(s) {', '.join(unknown)}", "--steps",
                             f"Choose from {', '.join(step_names())}")
        chosen = [s for s in STEPS if s.name in names]
    params = {"quick": quick, "steps": [s.name for s in chosen], "np": ctx.np, "launcher": ctx.launcher.name}
    if resume:
        parent = Run.open(resolve_run(resume, ctx.runs_dir))
        if parent.info.get("command") != "characterize":
            raise UsageError(f"run {parent.id} is not a characterization", "--resume", "Give a characterize run")
        parent.info["status"] = "running"
        parent.save()
    else:
        parent = Run.create("characterize", params, ctx.runs_dir, ctx.argv,
                            metadata.collect({"launcher": ctx.launcher.describe(), "np": ctx.np}))
    parent.info.setdefault("steps", {})
    sctx = StepContext(bench=_child_ctx(ctx, parent), parent=parent, launch=list(launch or []))
    show = bool(console is not None and getattr(console, "is_terminal", False))
    with Progress(TextColumn("characterize {task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=console, disable=not show) as bar:
        task = bar.add_task("", total=len(chosen))
        for step in chosen:
            bar.update(task, description=step.name)
            state = parent.info["steps"].get(step.name, {})
            if state.get("status") == "complete":
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
    children = parent.children()
    out = write_report(children, parent.path / "report.html", "hpcvar characterization")
    if report:
        write_report(children, report, "hpcvar characterization")
    steps = [{"name": s.name, **parent.info["steps"].get(s.name, {"status": "not run"})} for s in chosen]
    failed = any(s["status"] == "failed" for s in steps)
    result = {"run": str(parent.path), "report": str(report or out), "steps": steps}
    parent.finish("failed" if failed else "complete", result, exit_status=1 if failed else 0)
    return result


def _child_ctx(ctx: BenchContext, parent: Run) -> BenchContext:
    import dataclasses

    return dataclasses.replace(ctx, runs_dir=str(parent.steps_dir()), resume=None, progress=True)
