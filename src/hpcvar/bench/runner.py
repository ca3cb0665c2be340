"""The one path every MPI benchmark takes:

    Params -> validate -> points -> argv -> launch (timeout, progress) -> raw files
           -> tidy tables (Parquet) -> summary tables (Parquet) -> result (JSON, from the tables) -> terminal table

A benchmark module supplies a ``Benchmark`` subclass and its ``Params``: one frozen dataclass whose fields
are the run's parameters, stored in ``run.json`` as the JSON object ``Params.to_json()`` gives (field
order, tuples as lists) and read back by ``Params.from_json()`` (which refuses unknown and missing keys).
Points are the units of resumption: each is written to the raw file by the native program as soon as it is
measured, so ``--resume RUN`` re-launches only what is missing.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

import pandas as pd

from hpcvar import metadata
from hpcvar._native import find_program
from hpcvar.errors import LaunchError, LaunchTimeout, UsageError
from hpcvar.launch import Launcher, LaunchSpec, oversubscription_warning
from hpcvar.results import RawFile, RawPoint, Run, read_raw, resolve_run, run_lifecycle
from hpcvar.results.context import JobContext
from hpcvar.results.params import Params
from hpcvar.results.rawio import compress_raw, raw_files
from hpcvar.units import format_time_ns


@dataclass
class BenchContext(JobContext):
    """A JobContext plus how to launch: launcher, ranks, limits. Built by the CLI."""

    launcher: Launcher
    np: int = 2
    timeout_s: float | None = None
    resume: str | None = None
    launcher_args: list[str] = field(default_factory=list)
    ranks_per_node: int | None = None
    timer: str | None = None
    # with resume: continue with the run's stored parameters (the command line set none of its own)
    stored_params: bool = False
    # rank 0 alone on its node where the launcher can place so (LaunchSpec.root_alone; characterize's fan-in)
    root_alone: bool = False
    # the command that runs this job as one of its steps ("characterize"): it chose the parameters and the
    # placement, so warnings name what that command can change, never the step's own flags
    within: str | None = None


P = TypeVar("P", bound=Params)


class Benchmark(ABC, Generic[P]):
    """One MPI benchmark: a native program plus the Python that reads its output; ``P`` is its Params."""

    name: str = ""  # "latency"
    program: str = ""  # "hv_latency"
    command: str = ""  # the run's command, when it is not "bench <name>" (screen)
    min_np: int = 2
    np_flag: str = "--np"  # the flag that sets the ranks, named by the remedies (screen: --ranks-per-node)
    any_source: bool = False  # receives with MPI_ANY_SOURCE from competing senders (see LaunchSpec)

    @abstractmethod
    def points(self, params: P) -> list[dict]:
        """The measured points, each a dict of the parameters that identify it (all str/int/float)."""

    @abstractmethod
    def argv(self, params: P, points: list[dict]) -> list[str]:
        """Arguments of the native program for these points (without --out / --timer)."""

    @abstractmethod
    def estimate_s(self, params: P, points: list[dict]) -> float:
        """A generous estimate of the job's duration (sets the default timeout)."""

    @abstractmethod
    def tables(self, raws: list[RawFile], params: P) -> dict[str, pd.DataFrame]:
        """Tidy tables (declared in results.schema) from every complete raw point."""

    @abstractmethod
    def result(self, tables: dict[str, pd.DataFrame], params: P) -> dict:
        """The JSON result printed by --json and kept in run.json, built from the declared tables (``tables``
        holds the tidy tables and the summaries): reshaped rows of summary tables plus the parameters, no
        statistic of its own."""

    def summaries(self, tables: dict[str, pd.DataFrame], params: P) -> dict[str, pd.DataFrame]:
        """Summary tables (declared in results.schema) derived from the complete tidy tables, stored with them
        once the run is complete and given to ``result`` (default: none; e.g. fanin.chatter_effect)."""
        return {}

    def validate(self, params: P, ctx: BenchContext) -> None:
        """Refuse bad parameters before launch (UsageError naming the flag)."""
        if ctx.np < self.min_np:
            raise UsageError(f"this benchmark needs at least {self.min_np} ranks, got {ctx.np}", self.np_flag,
                             f"Use {self.np_flag} {self.min_np} or more" if self.np_flag == "--np" else
                             f"Give more ranks ({self.np_flag})")

    def point_key(self, point: dict) -> str:
        return " ".join(f"{k}={point[k]}" for k in sorted(point))

    def raw_point_key(self, p: RawPoint) -> str:
        """The key of a raw point: the same fields as ``points`` produces, read from its #@point line."""
        return " ".join(f"{k}={p.params[k]}" for k in sorted(self.point_fields()))

    @abstractmethod
    def point_fields(self) -> list[str]:
        """Names of the fields of a point (as in points() and in the raw #@point line)."""

    def launches(self, params: P, pending: list[dict]) -> list[list[dict]]:
        """Split pending points into separate MPI jobs (default: one job)."""
        return [pending] if pending else []

    def env(self, params: P) -> dict[str, str]:
        """Extra environment for the ranks."""
        return {}

    def busy_polls(self, params: P) -> bool:
        """Whether the ranks busy-poll (MPI's own wait). When they sleep instead, more ranks than cores is no
        stall to warn about."""
        return True

    def warnings(self, tables: dict[str, pd.DataFrame], params: P, within: str | None = None) -> list[str]:
        """What the user must know about these measurements (kept in run.json and printed); ``within``: the
        command that ran the job as its step (BenchContext.within), whose flags the remedies must name."""
        return []


def _oversubscription(bench: Benchmark[P], params: P, ctx: BenchContext, run: Run) -> None:
    """More busy-polling ranks than cores: a warning with its remedy for a command the user gave; a step of
    ``ctx.within`` (characterize) chose its ranks and placement itself, so the fact is recorded
    (``cores_shared`` in run.json) and not warned about (docs/characterize.md)."""
    warn = oversubscription_warning(ctx.np, ctx.launcher, bench.np_flag) if bench.busy_polls(params) else None
    if warn and ctx.within:
        run.info["cores_shared"] = {"ranks": ctx.np, "cores": ctx.launcher.slots(), "chosen_by": ctx.within}
    elif warn:
        run.warn(warn)


MAX_PINGPONG_SIZE = 1 << 30  # 1 GiB: ping-pong benchmarks allocate one buffer of the largest size per rank


def check_sizes_and_iters(sizes: tuple[int, ...], iters: int, min_iters: int,
                          max_size: int = MAX_PINGPONG_SIZE) -> None:
    """The checks every ping-pong style benchmark shares: --sizes, --iters, --min-iters."""
    for s in sizes:
        if s < 0 or s > max_size:
            raise UsageError(f"message size {s} is outside [0, {max_size}] bytes", "--sizes",
                             "Give sizes up to 1GiB")
    if iters < 1:
        raise UsageError("--iters must be at least 1", "--iters", "Use --iters 1000")
    if min_iters > iters:
        raise UsageError(f"--min-iters {min_iters} is above --iters {iters}",
                         "--min-iters", "Lower --min-iters")


class _Progress:
    """Counts '#@point_end' markers in a growing raw file to drive a progress bar."""

    def __init__(self, bar, task, path: Path):
        self.bar, self.task, self.path, self.offset, self.done = bar, task, path, 0, 0
        self.total = next((t.total for t in bar.tasks if t.id == task), None)

    def __call__(self) -> None:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                chunk = f.read()
        except OSError:
            return
        # keep a partial marker for the next read
        cut = chunk.rfind(b"\n") + 1
        self.offset += cut
        n = chunk[:cut].count(b"#@point_end")
        if n:  # a kind may write more points than it was asked for (screen's rechecks): the bar stops at its total
            self.done += n
            self.bar.update(self.task, completed=min(self.done, self.total or self.done))


def _complete_keys(bench: Benchmark[Any], raws: list[RawFile]) -> set[str]:
    return {bench.raw_point_key(p) for r in raws for p in r.points}


def load_raws(run: Run) -> list[RawFile]:
    return [read_raw(p) for p in raw_files(run.path / "raw")]


def run_benchmark(bench: Benchmark[P], params: P, ctx: BenchContext,
                  after: Callable[[Run, dict], None] | None = None) -> tuple[Run, dict]:
    """Run (or resume) a benchmark; returns the run and its JSON result.

    ``run.json`` keeps ``params.to_json()``; a resumed run's stored parameters are read back with
    ``from_json`` of the same Params class and must equal ``params``. ``after(run, result)``: the job's own
    last step (e.g. the figures stored with the run; it may add keys to ``result``), run before the run is
    marked complete, so that its failure marks the run failed."""
    command = bench.command or f"bench {bench.name}"
    resumed = _resumed(bench, params, ctx, command) if ctx.resume else None
    if resumed is not None:
        run, params = resumed
    bench.validate(params, ctx)
    exe = find_program(bench.program, needs_mpi=True)
    points = bench.points(params)
    if resumed is not None:
        run.claim()
        run.save()
    else:
        meta = metadata.collect({"launcher": ctx.launcher.describe(), "np": ctx.np,
                                 "ranks_per_node": ctx.ranks_per_node})
        run = Run.create(command, params.to_json(), ctx.runs_dir, ctx.argv, meta)
    with run_lifecycle(run):  # complete on return; failed, or interrupted (Ctrl-C, SIGTERM), on any exception
        _oversubscription(bench, params, ctx, run)

        done = _complete_keys(bench, load_raws(run))
        pending = [p for p in points if bench.point_key(p) not in done]
        ticks0 = metadata.cpu_ticks()
        try:
            for batch in bench.launches(params, pending):
                _launch(bench, params, ctx, run, exe, batch)
        except (LaunchError, KeyboardInterrupt) as e:
            raws = load_raws(run)
            stored = len(_complete_keys(bench, raws))
            if stored:
                _write_tables(bench, run, raws, params)
            if isinstance(e, LaunchTimeout):
                _explain_timeout(e, ctx, run, stored, len(points))
            elif isinstance(e, LaunchError):
                e.todo = (e.todo or "") + (f"\n{stored} of {len(points)} points were stored in {run.path}; "
                                           f"add --resume {run.id} to the same command to continue")
            raise
        result = _results(bench, run, params, ticks0, ctx.within)
        if after is not None:
            after(run, result)
    return run, result


def _resumed(bench: Benchmark[P], params: P, ctx: BenchContext, command: str) -> tuple[Run, P]:
    """The run ``--resume`` names and the parameters to continue it with: its stored ones when the command line
    set none (``ctx.stored_params``), else the command line's, which must be the stored ones."""
    assert ctx.resume
    run = Run.open(resolve_run(ctx.resume, ctx.runs_dir))
    if run.info.get("command") != command:
        raise UsageError(f"run {run.id} is a '{run.info.get('command')}' run, not '{command}'", "--resume",
                         "Resume it with its own command")
    stored = run.info.get("params")
    step = stored.get("step") if isinstance(stored, dict) else None
    if step:  # characterize marks its step runs in their params (hpcvar.characterize)
        raise UsageError(f"run {run.id} is the '{step}' step of a characterization", "--resume",
                         "Resume the characterization itself (hpcvar characterize --resume RUN)")
    stored_params = type(params).from_json(stored, str(run.path / "run.json"))
    if ctx.stored_params:
        return run, stored_params
    if stored_params.to_json() != params.to_json():
        diff = [k for k, v in params.to_json().items() if stored_params.to_json().get(k) != v]
        raise UsageError(f"the parameters differ from those of run {run.id} ({', '.join(diff)})", "--resume",
                         f"Give --resume {run.id} alone (with launch options if you like) to continue with its own "
                         "parameters, or start a new run")
    return run, params


def _results(bench: Benchmark[P], run: Run, params: P, ticks0: Any, within: str | None = None) -> dict:
    """Every point measured: the tidy and summary tables, the result built from them (kept as
    ``run.info["result"]``) and the warnings about the measurements, in the run."""
    tables = _write_tables(bench, run, load_raws(run), params)
    for name, df in bench.summaries(tables, params).items():
        run.write_table(name, df)
        tables[name] = df
    result = bench.result(tables, params)
    result["run"] = str(run.path)
    result["steal_pct"] = metadata.steal_pct(ticks0)
    for warn in [*bench.warnings(tables, params, within), metadata.steal_warning(result["steal_pct"])]:
        if warn:
            run.warn(warn)
    run.info["result"] = result
    return result


def _explain_timeout(e: LaunchTimeout, ctx: BenchContext, run: Run, stored: int, total: int) -> None:
    """A launch stopped by its timeout: which timeout (the user's --timeout or the default), what was kept, and how
    to go on. The points measured before it are in the run, which --resume continues."""
    limit = format_time_ns(e.timeout_s * 1e9)
    e.what = (f"the MPI job ran past --timeout {limit} and was stopped" if ctx.timeout_s else
              f"the MPI job ran past its default timeout of {limit} (60 s + 3 x the estimated duration) and was "
              "stopped")
    last = (e.todo or "").partition("Last lines of stderr:")[2].strip()
    e.todo = (f"{stored} of {total} points were stored in {run.path}. Raise --timeout if the work is that large "
              f"(a hang often means ranks cannot reach each other), and add --resume {run.id} to the same command "
              f"to measure the rest. Last lines of stderr:\n{last or '(none)'}")


def _write_tables(bench: Benchmark[P], run: Run, raws: list[RawFile], params: P) -> dict:
    """The tidy tables from the raw files; then the raw files, whose every point is now in the tables, are stored
    compressed (hpcvar.results.rawio: about 4 bytes per sample instead of 30; --resume and the readers take
    either form)."""
    tables = bench.tables(raws, params)
    for name, df in tables.items():
        run.write_table(name, df)
    started = [r for r in raws if not r.unstarted]
    if started:
        run.info["metadata"]["native"] = {k: v for k, v in started[-1].meta.items() if not k.startswith("arg.")}
        run.save()
    for r in raws:
        compress_raw(r.path)
    return tables


def _launch(bench: Benchmark[P], params: P, ctx: BenchContext, run: Run, exe: Path, batch: list[dict]) -> None:
    k = len(raw_files(run.raw_dir(), "launch-*.raw")) + 1
    raw_path = run.raw_dir() / f"launch-{k:03d}.raw"
    args = bench.argv(params, batch) + ["--out", str(raw_path.resolve())]
    if ctx.timer:
        args += ["--timer", ctx.timer]
    timeout = ctx.timeout_s or (60.0 + 3.0 * bench.estimate_s(params, batch))
    spec = LaunchSpec(np=ctx.np, exe=exe, args=args, env=bench.env(params), timeout_s=timeout,
                      ranks_per_node=ctx.ranks_per_node, extra_args=ctx.launcher_args, any_source=bench.any_source,
                      root_alone=ctx.root_alone)
    spec.args += ctx.launcher.layout_args(spec)
    argv, _ = ctx.launcher.command(spec)
    run.info["launches"].append({"label": raw_path.stem, "argv": argv, "timeout_s": timeout, "points": len(batch)})
    run.save()
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    console = ctx.console
    show = bool(ctx.progress and console is not None and getattr(console, "is_terminal", False))
    label = bench.command or f"bench {bench.name}"
    with Progress(TextColumn(label), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=console,
                  disable=not show, transient=True) as bar:
        task = bar.add_task("points", total=len(batch))
        res = ctx.launcher.run(spec, run.raw_dir(), raw_path.stem, poll=_Progress(bar, task, raw_path))
    run.info["launches"][-1]["elapsed_s"] = round(res.elapsed_s, 3)
    run.save()
