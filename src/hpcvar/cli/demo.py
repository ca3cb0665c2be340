"""hpcvar demo: the main job on this machine, small enough for a laptop."""

from __future__ import annotations

import click

from hpcvar.cli.common import runs_dir_option


@click.command("demo")
@runs_dir_option
@click.pass_context
def cli(ctx, runs_dir):
    """Run the main job: a quick characterization of this machine.

    Same as 'hpcvar characterize --quick' on 2 local ranks (about 3 minutes on
    2 cores): every step is stored, a summary is printed and the path of the
    self-contained HTML report is shown; nothing is opened."""
    from hpcvar.cli import characterize

    args = ["--quick", "--np", "2"] + (["--runs-dir", runs_dir] if runs_dir else [])
    return ctx.invoke(characterize.cli, **characterize.cli.make_context("characterize", args).params)
