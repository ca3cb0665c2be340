"""The hpcvar command line and its one error boundary.

Every failure ends here as ``error: <what> (<flag or file:line>). <what to do>``
on stderr, exit code 2 for usage errors and 1 for failures.
"""

from __future__ import annotations

import atexit
import os
import signal
import sys
import threading
from typing import NoReturn

import click

from hpcvar import __version__
from hpcvar.cli.lazy import LazyGroup
from hpcvar.errors import HpcvarError

# command name -> (module:attribute, short help); modules are imported only when their command runs
COMMANDS = {
    "bench": ("hpcvar.cli.bench:cli",
              "Run MPI benchmarks; every sample is kept in a run directory (see 'hpcvar runs')."),
    "noise": ("hpcvar.cli.noise:cli", "Record, inject, synthesize, convert and analyse OS jitter traces."),
    "sim": ("hpcvar.cli.sim:cli", "Simulate: OS jitter at scale (jitSim) and application replay."),
    "model": ("hpcvar.cli.model:cli", "Bandwidth-sharing models: penalties, fitting, evaluation against measurements."),
    "trace": ("hpcvar.cli.trace:cli", "Trace MPI applications (PMPI) and convert traces."),
    "testbed": ("hpcvar.cli.testbed:cli", "A virtual cluster of network namespaces with shaped links (needs root)."),
    "screen": ("hpcvar.cli.screen:cli", "Screen an allocation: which node, which link, is it OK?"),
    "expect": ("hpcvar.cli.expect:cli", "Write site expectations from a good run (a TOML file for --expect)."),
    "characterize": ("hpcvar.cli.characterize:cli", "Characterize this machine and predict what it means for "
                                                    "applications."),
    "report": ("hpcvar.cli.report:cli", "Write one self-contained HTML (or Markdown) report of RUNS."),
    "compare": ("hpcvar.cli.compare:cli", "Compare two runs and flag significant degradations."),
    "export": ("hpcvar.cli.export:cli", "Stored runs for Prometheus, ReFrame, Caliper/Thicket and Extra-P."),
    "history": ("hpcvar.cli.history:cli",
                "Series of stored runs, grouped by command and hosts, with the changes confirmed in them."),
    "runs": ("hpcvar.cli.runs:cli", "List, show and remove stored runs (run directories under --runs-dir)."),
    "info": ("hpcvar.cli.info:cli", "Show the MPI hpcvar was built with, the timers and the machine."),
    "demo": ("hpcvar.cli.demo:cli", "Run the main job: a quick characterization of this machine."),
}


@click.group(cls=LazyGroup, lazy=COMMANDS,
             context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="hpcvar")
def cli() -> None:
    """hpcvar: measure, model and predict how the interconnect and the OS make MPI
    applications slow and unpredictable.

    Start with 'hpcvar demo'; every command has --help.
    """



def _flag_of(e: click.ClickException) -> str | None:
    param = getattr(e, "param", None)
    if param is not None:
        from hpcvar.cli.common import flag_name

        return flag_name(param)
    return getattr(e, "param_hint", None)


def _os_error(e: OSError) -> str:
    """One line for a refused file operation that reached the boundary (no traceback)."""
    import errno

    name = f" '{e.filename}'" if e.filename else ""
    what = {errno.ENOENT: f"no such file or directory{name}", errno.EACCES: f"permission denied{name}",
            errno.ENOSPC: f"no space left on the device{name}", errno.EROFS: f"read-only file system{name}",
            errno.EISDIR: f"{name.strip()} is a directory", errno.ENOTDIR: f"not a directory{name}"}.get(
        e.errno or 0, f"{e.strerror or e}{name}")
    todo = {errno.ENOENT: "Check the path", errno.ENOSPC: "Free some space or write elsewhere",
            errno.EACCES: "Give a path you may write (or read)", errno.EROFS: "Write elsewhere"}.get(
        e.errno or 0, "Check the path and try again")
    return f"error: {what.strip()} ({e.filename or 'file'}). {todo}"


def _interrupted_text() -> str:
    """What Ctrl-C (or SIGTERM) leaves: the run it ended and, when it resumes, the flag that continues it."""
    from hpcvar.results.store import RESUMABLE, interrupted_run

    run = interrupted_run()
    if run is None:
        return "error: interrupted"
    if str(run.info.get("command", "")).startswith(RESUMABLE):
        return (f"error: interrupted. The finished points are stored in {run.path}; add --resume {run.id} to the same "
                "command to continue")
    return f"error: interrupted. What was recorded so far is stored in {run.path}"


def _terminated(signum, frame):
    """SIGTERM behaves like Ctrl-C: running jobs and helper programs are stopped, finished points kept."""
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> None:
    signal.signal(signal.SIGTERM, _terminated)
    try:
        rv = cli.main(args=argv, prog_name="hpcvar", standalone_mode=False)
    except HpcvarError as e:
        click.echo(e.render(), err=True)
        sys.exit(e.exit_code)
    except click.exceptions.NoSuchOption as e:
        hint = f"Did you mean {', '.join(e.possibilities)}?" if e.possibilities else "See --help"
        click.echo(f"error: no such option ({e.option_name}). {hint}", err=True)
        sys.exit(2)
    except click.MissingParameter as e:
        kind = e.param_type or (e.param.param_type_name if e.param is not None else "parameter")
        click.echo(f"error: missing {kind} ({_flag_of(e)}). See --help", err=True)
        sys.exit(2)
    except click.BadParameter as e:
        click.echo(f"error: {e.message} ({_flag_of(e)}). See --help for the accepted values", err=True)
        sys.exit(2)
    except click.UsageError as e:
        cmd = e.ctx.command_path if e.ctx else "hpcvar"
        click.echo(f"error: {e.message} ({cmd}). See '{cmd} --help'", err=True)
        sys.exit(2)
    except click.exceptions.Exit as e:
        sys.exit(e.exit_code)
    except (click.Abort, KeyboardInterrupt):
        click.echo(_interrupted_text(), err=True)
        sys.exit(130)
    except click.ClickException as e:
        click.echo(f"error: {e.format_message()}.", err=True)
        sys.exit(e.exit_code)
    except UnicodeDecodeError as e:
        # a file read as text that is not UTF-8 (the readers that know the file name say it themselves)
        click.echo(f"error: an input file is not UTF-8 text (byte 0x{e.object[e.start]:02x} at offset {e.start}). "
                   "Give a UTF-8 text file, or convert it (iconv -t UTF-8)", err=True)
        sys.exit(2)
    except OSError as e:
        click.echo(_os_error(e), err=True)
        sys.exit(2 if isinstance(e, (FileNotFoundError, IsADirectoryError, NotADirectoryError)) else 1)
    sys.exit(rv if isinstance(rv, int) else 0)


def entry() -> None:
    """The ``hpcvar`` program (console script and ``python -m hpcvar``): :func:`main`, then leave without tearing
    the interpreter down. Freeing every module (Arrow's and numpy's among them) took 0.05-0.1 s of each command
    after its work was done (issue 30: no fixed cost worth measuring). What a normal exit does that a program may
    rely on is done first: threads joined, ``atexit`` functions run, stdout and stderr flushed. An exception
    that is not an exit (a bug: its traceback) leaves the normal way."""
    if sys.argv[1:2] == ["sim"]:
        # numpy's OpenBLAS starts a thread per CPU at import, and each spins about 0.1 s waiting for work before
        # it sleeps: on 2 cores that took a core from a simulation's start (fan-in of 201k actions, 8 runs each:
        # median 0.56 s with one thread, 0.63 s without). The simulators use no BLAS and no 'sim' command starts
        # a program that could inherit the setting; a value the user set is kept.
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    try:
        main()
    except SystemExit as e:
        _leave(e.code)
    _leave(0)


def _leave(code: object) -> NoReturn:
    if code is None:
        code = 0
    elif not isinstance(code, int):  # sys.exit("message"): printed, status 1
        print(code, file=sys.stderr)
        code = 1
    shutdown = getattr(threading, "_shutdown", None)  # what Python's own exit calls: thread pools stopped, joined
    if shutdown is not None:
        shutdown()
    else:  # pragma: no cover - every CPython has it; join what would keep the process alive
        for t in threading.enumerate():
            if t is not threading.main_thread() and not t.daemon:
                t.join()
    atexit._run_exitfuncs()
    for f in (sys.stdout, sys.stderr):
        try:
            f.flush()
        except (OSError, ValueError):  # a reader that went away (hpcvar ... | head), or a closed stream
            pass
    os._exit(code)
