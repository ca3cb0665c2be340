"""Shared pieces of the command line: parameter types with units, option sets, output.

Parameter types convert with hpcvar.units and raise UsageError naming the flag,
so every bad value ends at the one error boundary in hpcvar.cli.
"""

from __future__ import annotations

import shlex
import sys

import click
from rich.console import Console

from hpcvar import units
from hpcvar.results import dumps


def flag_name(param: click.Parameter | None) -> str:
    if param is None:
        return "value"
    opts = [o for o in getattr(param, "opts", []) if o.startswith("--")]
    return opts[0] if opts else (param.human_readable_name.upper() if param.param_type_name == "argument"
                                 else param.opts[0])


class _UnitType(click.ParamType):
    def __init__(self, fn, name: str):
        self.fn, self.name = fn, name

    def convert(self, value, param, ctx):
        if not isinstance(value, str):
            return value
        return self.fn(value, flag_name(param))


SIZE = _UnitType(units.parse_size, "size")
SIZE_LIST = _UnitType(lambda v, f: units.parse_list(v, lambda x: units.parse_size(x, f), f), "sizes")
INT_LIST = _UnitType(lambda v, f: units.parse_list(v, lambda x: units.parse_int(x, f), f), "integers")
FLOAT_LIST = _UnitType(lambda v, f: units.parse_list(v, lambda x: _float(x, f), f), "numbers")
DURATION = _UnitType(units.parse_time, "duration")
RATE = _UnitType(units.parse_rate, "rate")


def _float(text: str, flag: str) -> float:
    try:
        return float(text)
    except ValueError:
        from hpcvar.errors import UsageError

        raise UsageError(f"'{text}' is not a number", flag, "Give a number such as 10 or 0.5") from None


def stderr_console() -> Console:
    return Console(stderr=True, highlight=False)


def stdout_console() -> Console:
    return Console(highlight=False)


def print_json(obj) -> None:
    sys.stdout.write(dumps(obj) + "\n")


def output_options(f):
    """--json and --runs-dir, on every command that reads or writes runs."""
    f = click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON on stdout.")(f)
    f = click.option("--runs-dir", type=click.Path(file_okay=False), default=None,
                     help="Root of the results store (default: $HPCVAR_RUNS or ./hpcvar-runs).")(f)
    return f


def launch_options(default_np: int | None = 2):
    """How MPI jobs are started; shared by every MPI command."""

    def deco(f):
        opts = [
            click.option("--launcher", type=click.Choice(["local", "srun", "template", "testbed"]), default="local",
                         show_default=True, help="How ranks are started: local mpiexec, Slurm srun, a command "
                                                 "--template, or the network-namespace testbed."),
            click.option("--np", type=click.IntRange(1, 1 << 20), default=default_np, show_default=True,
                         help="Number of MPI ranks."),
            click.option("--ranks-per-node", type=click.IntRange(1), default=None,
                         help="Ranks per node (srun --ntasks-per-node; testbed ranks per host)."),
            click.option("--template", default=None,
                         help="Launcher template for --launcher template, e.g. "
                              "'mpirun -np {np} --hostfile hosts {exe} {args}' (never run by a shell)."),
            click.option("--launcher-args", default="", help="Extra options for the launcher (split like a shell)."),
            click.option("--srun-mpi", default="auto", show_default=True, metavar="PLUGIN",
                         help="srun --mpi plugin for --launcher srun: auto picks the one the build's MPI speaks "
                              "(MPICH: pmi2, Open MPI: pmix); 'srun --mpi=list' shows what Slurm has."),
            click.option("--map-by", type=click.Choice(["host", "slot"]), default="slot", show_default=True,
                         help="Testbed placement: 'slot' fills a host before the next, 'host' round-robins."),
            click.option("--timeout", type=DURATION, default=None,
                         help="Stop the MPI job after this long (e.g. 90s, 10m); default scales with the work."),
            click.option("--resume", default=None, metavar="RUN",
                         help="Continue an interrupted run (its directory or name) with the same parameters."),
            click.option("--timer", type=click.Choice(["tsc", "mono", "wtime"]), default=None,
                         help="Clock of the timed loops: tsc (rdtsc, calibrated; default where invariant), "
                              "mono (clock_gettime), wtime (MPI_Wtime)."),
        ]
        for o in reversed(opts):
            f = o(f)
        return f

    return deco


def bench_context(kw: dict, argv: list[str] | None = None):
    """A BenchContext from the launch options in ``kw`` (removed from it)."""
    from hpcvar.bench.runner import BenchContext
    from hpcvar.launch import get_launcher

    name = kw.pop("launcher")
    lk = {}
    if name == "testbed":
        lk["map_by"] = kw.get("map_by")
        lk["ranks_per_host"] = kw.get("ranks_per_node")
    kw.pop("map_by", None)
    srun_mpi = kw.pop("srun_mpi", "auto")
    if name == "srun":
        lk["mpi"] = srun_mpi
    elif srun_mpi not in (None, "auto"):
        from hpcvar.errors import UsageError

        raise UsageError("--srun-mpi is for --launcher srun", "--srun-mpi", "Add --launcher srun or drop it")
    launcher = get_launcher(name, template=kw.pop("template"), **lk)
    try:
        extra = shlex.split(kw.pop("launcher_args") or "")
    except ValueError as e:
        from hpcvar.errors import UsageError

        raise UsageError(f"cannot split --launcher-args: {e}", "--launcher-args", "Check its quotes") from None
    return BenchContext(launcher=launcher, np=kw.pop("np"), runs_dir=kw.get("runs_dir"),
                        timeout_s=kw.pop("timeout"), resume=kw.pop("resume"), launcher_args=extra,
                        ranks_per_node=kw.pop("ranks_per_node"), timer=kw.pop("timer"),
                        console=stderr_console(), argv=argv or ["hpcvar", *sys.argv[1:]])


def emit(result: dict, as_json: bool, render) -> None:
    """Print ``result`` as JSON or through ``render(console, result)``: for output that is no stored run (model
    penalties, ace --predict-only); a command that stores a run prints it with ``emit_run``."""
    if as_json:
        print_json(result)
    else:
        render(stdout_console(), result)


def emit_run(run, result: dict, as_json: bool) -> None:
    """A command's output once its run is stored: ``result`` as JSON, or the run read back from its directory
    through its kind's renderer (``hpcvar.report.terminal.render_run``), the view ``hpcvar runs show`` ends with."""
    if as_json:
        print_json(result)
        return
    from hpcvar.report.terminal import render_run
    from hpcvar.results.store import Run

    render_run(stdout_console(), Run.open(run.path))


__all__ = ["DURATION", "FLOAT_LIST", "INT_LIST", "RATE", "SIZE", "SIZE_LIST", "bench_context", "emit", "emit_run",
           "launch_options", "output_options", "print_json", "stderr_console", "stdout_console"]
