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

    def bench_ctx(self, **over) -> BenchContext:
        import dataclasses

        return dataclasses.replace(self.bench, resume=None, **over)


def _latency(ctx: StepContext, quick: bool) -> Run:
    from hpcvar.bench.latency import Latency
    from hpcvar.bench.runner import run_benchmark

    sizes = [0, 8, 64, 1024, 8192, 65536, 1 << 20, 4 << 20] if quick else \
        [0, 1, 8, 64, 512, 1024, 4096, 8192, 32768, 65536, 262144, 1 << 20, 4 << 20, 16 << 20]
    params = {"sizes": sizes, "iters": 1000 if quick else 10000, "min_iters": 20, "warmup": 100,
              "time_per_size_s": 0.3 if quick else 2.0}
    run, _ = run_benchmark(Latency(), params, ctx.bench_ctx(np=2))
    return run


STEPS: list[Step] = [
    Step("latency", "Point-to-point latency and bandwidth", _latency, estimate_quick_s=5),
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
                         report: str | None = None, console=None) -> dict:
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
    sctx = StepContext(bench=_child_ctx(ctx, parent), parent=parent)
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
