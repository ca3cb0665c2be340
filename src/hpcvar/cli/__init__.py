"""The hpcvar command line and its one error boundary.

Every failure ends here as ``error: <what> (<flag or file:line>). <what to do>``
on stderr, exit code 2 for usage errors and 1 for failures.
"""

from __future__ import annotations

import importlib
import sys

import click

from hpcvar import __version__
from hpcvar.errors import HpcvarError

# command modules, each exposing ``cli`` (a click command or group)
COMMAND_MODULES = ["bench", "noise", "sim", "model", "trace", "testbed", "characterize", "report", "compare", "runs",
                   "info", "demo"]


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="hpcvar")
def cli() -> None:
    """hpcvar: measure, model and predict how the interconnect and the OS make MPI
    applications slow and unpredictable.

    Start with 'hpcvar demo'; every command has --help.
    """


for _name in COMMAND_MODULES:
    cli.add_command(importlib.import_module(f"hpcvar.cli.{_name}").cli)


def _flag_of(e: click.ClickException) -> str | None:
    param = getattr(e, "param", None)
    if param is not None:
        from hpcvar.cli.common import flag_name

        return flag_name(param)
    return getattr(e, "param_hint", None)


def main(argv: list[str] | None = None) -> None:
    try:
        rv = cli.main(args=argv, prog_name="hpcvar", standalone_mode=False)
    except HpcvarError as e:
        click.echo(e.render(), err=True)
        sys.exit(e.exit_code)
    except click.exceptions.NoSuchOption as e:
        hint = f"Did you mean {', '.join(e.possibilities)}?" if e.possibilities else "See --help"
        click.echo(f"error: no such option ({e.option_name}). {hint}", err=True)
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
        click.echo("error: interrupted. Finished points are stored; --resume RUN continues", err=True)
        sys.exit(130)
    except click.ClickException as e:
        click.echo(f"error: {e.format_message()}.", err=True)
        sys.exit(e.exit_code)
    sys.exit(rv if isinstance(rv, int) else 0)
