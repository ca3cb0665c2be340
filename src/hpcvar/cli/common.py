"""Shared pieces of the command line: parameter types with units, option sets, output.

Parameter types convert with hpcvar.units and raise UsageError naming the flag,
so every bad value ends at the one error boundary in hpcvar.cli.
"""

from __future__ import annotations

import contextlib
import functools
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from hpcvar import units
from hpcvar.results import dumps_standard

if TYPE_CHECKING:
    from rich.console import Console


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
FREQ = _UnitType(units.parse_freq, "frequency")


def _positive_time(text: str, flag: str) -> float:
    value = units.parse_time(text, flag)
    if value <= 0:
        from hpcvar.errors import UsageError

        raise UsageError(f"'{text}' is no time at all: it must be above zero", flag,
                         "Give a positive duration with its unit, e.g. 90s or 10m (or leave the flag out for its "
                         "default)")
    return value


POSITIVE_DURATION = _UnitType(_positive_time, "duration")


class FiniteFloat(click.FloatRange):
    """A number in a range that is a number: click's FloatRange lets 'nan' through any bound and 'inf' through
    an open end (``--beta inf``, ``--threshold nan`` were taken and gave nan results)."""

    def convert(self, value, param, ctx):
        import math

        rv = super().convert(value, param, ctx)
        if not math.isfinite(rv):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return rv  # a timeout, a period, a recording: 0 means nothing
RATE = _UnitType(units.parse_rate, "rate")


def _float(text: str, flag: str) -> float:
    try:
        return float(text)
    except ValueError:
        from hpcvar.errors import UsageError

        raise UsageError(f"'{text}' is not a number", flag, "Give a number such as 10 or 0.5") from None


def stderr_console() -> Console:
    from hpcvar.report.terminal import make_console

    return make_console(stderr=True)


def stdout_console() -> Console:
    from hpcvar.report.terminal import make_console

    return make_console()


def print_json(obj) -> None:
    sys.stdout.write(dumps_standard(obj) + "\n")


# ---- one vocabulary of flags (docs/cli.md): old names stay as hidden aliases ----------------------------------
class AliasOption(click.Option):
    """An option whose old names (``aliases``) still work but are not shown by --help."""

    def __init__(self, *args: Any, aliases: tuple[str, ...] = (), **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.aliases = set(aliases)

    def get_help_record(self, ctx):
        saved = self.opts, self.secondary_opts
        self.opts = [o for o in self.opts if o not in self.aliases]
        self.secondary_opts = [o for o in self.secondary_opts if o not in self.aliases]
        try:
            return super().get_help_record(ctx)
        finally:
            self.opts, self.secondary_opts = saved


DIALECT_HELP = ("TIT: the SimGrid version that wrote the trace (3.19, 3.25, 3.32, ...), or auto: each file's dialect "
                "from its lines (the datatype ids whose size changed between versions are then refused).")


def option(*decls: str, aliases: tuple[str, ...] = (), **kwargs: Any):
    """``click.option`` with hidden old names: ``option("--repeat", "repeat", aliases=("--reps",))``. An old
    name of the negative side of a boolean flag is given as ``" /--no-plot"``."""
    names = [a if a.startswith(" /") else a for a in aliases]
    hidden = tuple(a.strip(" /") for a in aliases)
    return click.option(*decls, *names, cls=AliasOption, aliases=hidden, **kwargs)


class _OutPath(click.ParamType):
    """An output file (-o/--out): its directory must exist and be writable; nothing is created silently."""

    name = "file"

    def convert(self, value, param, ctx):
        from hpcvar.errors import UsageError

        if not isinstance(value, str):
            return value
        flag = flag_name(param)
        p = Path(value)
        if p.is_dir():
            raise UsageError(f"'{value}' is a directory", flag, "Give a file name")
        parent = p.parent if str(p.parent) else Path(".")
        if not parent.is_dir():
            raise UsageError(f"the directory '{parent}' does not exist", flag,
                             f"Create it first (mkdir -p {parent}) or give another {flag}")
        import os

        if not os.access(parent, os.W_OK | os.X_OK) or (p.exists() and not os.access(p, os.W_OK)):
            raise UsageError(f"cannot write '{value}': permission denied", flag, f"Give a writable {flag}")
        return value


OUT_PATH = _OutPath()


@contextlib.contextmanager
def writing_out(path: Any, flag: str = "-o"):
    """Around the write of an output file the user named: a refused write (full disk, read-only, permission)
    is one error naming ``flag`` (``error: cannot write 'x.html': No space left on device (-o). ...``)."""
    from hpcvar.errors import ResultsError

    try:
        yield
    except ResultsError as e:
        if e.where != str(path):
            raise
        todo = (e.todo or "").replace("--runs-dir", flag)
        raise ResultsError(e.what.replace(f"cannot write {Path(path).name}", f"cannot write '{path}'"), flag,
                           todo) from None
    except OSError as e:
        if e.filename is not None and Path(e.filename).resolve() != Path(path).resolve():
            raise  # another file: the boundary names it
        raise ResultsError(f"cannot write '{path}': {e.strerror or e}", flag, f"Give another {flag}") from None

FORMATS = ("table", "csv", "md", "json")
_FORMAT_KEY = "hpcvar.format"


def current_format() -> str:
    """The --format of the running command (table when none)."""
    ctx = click.get_current_context(silent=True)
    return ctx.meta.get(_FORMAT_KEY, "table") if ctx is not None else "table"


def format_options(f=None, *, pass_json: bool = True, legacy: tuple[str, tuple[str, ...]] | None = None):
    """--format table|csv|md|json and --json (= --format json) on a command that shows results. The command
    receives ``as_json`` (True for json) when ``pass_json``; ``emit``, ``emit_run`` and ``emit_tables`` read the
    format itself (``current_format``). ``legacy = (dest, values)``: a command whose --format used to name its
    input format (now --from) still takes those values, passed to ``dest``."""

    def deco(fn):
        @functools.wraps(fn)
        def wrapper(*args, out_format, json_flag, **kw):
            fmt = "json" if json_flag else out_format
            if legacy and out_format in legacy[1]:
                kw[legacy[0]] = out_format
                fmt = "json" if json_flag else "table"
            click.get_current_context().meta[_FORMAT_KEY] = fmt
            if pass_json:
                kw["as_json"] = fmt == "json"
            return fn(*args, **kw)

        wrapper = click.option("--json", "json_flag", is_flag=True, help="The same as --format json.")(wrapper)
        choices = FORMATS + tuple(v for v in (legacy[1] if legacy else ()) if v not in FORMATS)
        wrapper = click.option("--format", "out_format", type=click.Choice(choices), default="table",
                               show_default=True, metavar="[" + "|".join(FORMATS) + "]",
                               help="Output: table (for people; whole and plain when piped), csv or md (the "
                                    "result's summary tables, units in the column names), json (everything).")(
            wrapper)
        return wrapper

    return deco(f) if f is not None else deco


class _RunsDir(click.ParamType):
    """--runs-dir: a directory that exists. The default store (./hpcvar-runs, or $HPCVAR_RUNS) is created on first
    use; a directory named on the command line is not (a typo would silently start a new, empty store)."""

    name = "directory"

    def convert(self, value, param, ctx):
        from hpcvar.errors import UsageError

        if not isinstance(value, str):
            return value
        p = Path(value)
        if p.is_dir():
            return value
        flag = flag_name(param)
        if p.exists():
            raise UsageError(f"'{value}' is not a directory", flag, "Give the directory that holds the runs")
        raise UsageError(f"the runs directory '{value}' does not exist", flag,
                         f"Check its spelling, or create it first (mkdir -p {shlex.quote(value)}); without "
                         f"{flag} runs go to $HPCVAR_RUNS or ./hpcvar-runs, created on first use")


RUNS_DIR = _RunsDir()


def runs_dir_option(f):
    return click.option("--runs-dir", type=RUNS_DIR, default=None,
                        help="Root of the results store: an existing directory (default: $HPCVAR_RUNS or "
                             "./hpcvar-runs, created on first use).")(f)


def output_options(f):
    """--format/--json and --runs-dir, on every command that reads or writes runs."""
    return runs_dir_option(format_options(f))


# ---- csv and md: the result's tables -------------------------------------------------------------------------
def _flat(d: dict, prefix: str = "") -> dict:
    import json

    out: dict = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(_flat(v, key + "."))
        elif isinstance(v, (list, tuple)):
            out[key] = json.dumps(v, default=str)
        else:
            out[key] = v
    return out


def result_tables(result: Any, name: str = "result") -> list[tuple[str, Any]]:
    """The tables of a result that is no stored run: each list of records in it is a table (named by its key);
    a result without one is one row of its (flattened) values."""
    import pandas as pd

    if isinstance(result, list):
        result = {name: result}
    tables = [(k, pd.DataFrame([_flat(x) for x in v])) for k, v in result.items()
              if isinstance(v, list) and v and all(isinstance(x, dict) for x in v)]
    return tables or [(name, pd.DataFrame([_flat(result)]))]


def run_tables(run) -> list[tuple[str, Any]]:
    """A stored run's summary tables (its kind's ``summary`` in hpcvar.kinds, read from the run), else the
    tables of its result."""
    from hpcvar.results.kinds import kind_of

    kind = kind_of(run.info.get("command"))
    names = [n for n in (kind.summary if kind else ()) if run.has_table(n)]
    if names:
        return [(n, run.read_table(n)) for n in names]
    return result_tables(run.info.get("result") or {}, run.info.get("command", "result").replace(" ", "_"))


def _md_cell(v: Any) -> str:
    import math

    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    text = repr(v) if isinstance(v, float) else str(v)
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def tables_text(tables: list[tuple[str, Any]], fmt: str) -> str:
    """csv: one table is plain CSV; several are each preceded by a '# name' line and separated by a blank line.
    md: each table under a '### name' heading. Numbers are written in full (they read back exactly)."""
    parts = []
    for name, df in tables:
        if fmt == "csv":
            body = df.to_csv(index=False, lineterminator="\n")
            parts.append(body if len(tables) == 1 else f"# {name}\n{body}")
        else:
            cols = [str(c) for c in df.columns]
            lines = [f"### {name}", "", "| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
            for row in df.itertuples(index=False):
                lines.append("| " + " | ".join(_md_cell(v.item() if hasattr(v, "item") else v) for v in row) + " |")
            parts.append("\n".join(lines) + "\n")
    return "\n".join(parts)


def emit_tables(tables: list[tuple[str, Any]]) -> None:
    sys.stdout.write(tables_text(tables, current_format()))


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
            click.option("--timeout", type=POSITIVE_DURATION, default=None,
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
    resume = kw.pop("resume")
    return BenchContext(launcher=launcher, np=kw.pop("np"), runs_dir=kw.get("runs_dir"),
                        timeout_s=kw.pop("timeout"), resume=resume, launcher_args=extra,
                        ranks_per_node=kw.pop("ranks_per_node"), timer=kw.pop("timer"),
                        console=stderr_console(), argv=argv or ["hpcvar", *sys.argv[1:]],
                        stored_params=bool(resume) and not measurement_flags_given())


# the options that say how and where to run and show, not what to measure: given with --resume, they leave the
# stored parameters in force
RUN_OPTIONS = frozenset({"launcher", "np", "ranks_per_node", "template", "launcher_args", "srun_mpi", "map_by",
                         "timeout", "resume", "timer", "json_flag", "out_format", "runs_dir", "plots", "plots_dir"})


def measurement_flags_given() -> list[str]:
    """The options of the running command given on its command line (or by environment) that set what is measured:
    with none, ``--resume RUN`` continues RUN with its stored parameters instead of the defaults."""
    from click.core import ParameterSource

    ctx = click.get_current_context(silent=True)
    if ctx is None:
        return []
    return [p.name for p in ctx.command.params if p.name and p.name not in RUN_OPTIONS
            and ctx.get_parameter_source(p.name) in (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT)]


def emit(result: Any, as_json: bool, render) -> None:
    """Print ``result`` as JSON, as its tables (--format csv/md) or through ``render(console, result)``: for
    output that is no stored run (model penalties, ace --predict-only); a stored run is printed by ``emit_run``."""
    fmt = "json" if as_json else current_format()
    if fmt == "json":
        print_json(result)
    elif fmt in ("csv", "md"):
        emit_tables(result_tables(result))
    else:
        render(stdout_console(), result)


def emit_run(run, as_json: bool) -> None:
    """A command's output once its run is stored, read back from its directory: its result
    (``run.info["result"]``) as JSON, its summary tables (csv, md), or its view through
    ``hpcvar.report.terminal.render_run``, the view ``hpcvar runs show`` ends with. The run's warnings are
    printed once: in the view, or on stderr beside machine-readable output (without the terminal toolkit)."""
    from hpcvar.results.store import Run

    fmt = "json" if as_json else current_format()
    stored = Run.open(run.path)
    if fmt == "table":
        from hpcvar.report.terminal import render_run

        render_run(stdout_console(), stored)
        return
    if fmt == "json":
        print_json(stored.info.get("result"))
    else:
        emit_tables(run_tables(stored))
    from hpcvar.report.runinfo import run_warnings

    for w in run_warnings(stored):
        click.echo(f"warning: {w}", err=True)


__all__ = [
    "DURATION", "FLOAT_LIST", "FREQ", "INT_LIST", "OUT_PATH", "POSITIVE_DURATION", "RATE", "SIZE", "SIZE_LIST",
    "bench_context", "emit",
    "emit_run", "emit_tables", "format_options", "launch_options", "option", "output_options", "print_json",
    "result_tables", "run_tables", "runs_dir_option", "stderr_console", "stdout_console", "tables_text",
    "writing_out",
]
