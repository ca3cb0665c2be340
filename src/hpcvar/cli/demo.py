"""hpcvar demo: the main job on this machine, small enough for a laptop."""

from __future__ import annotations

import click

from hpcvar.cli import bench_latency


@click.command("demo")
@click.option("--runs-dir", type=click.Path(file_okay=False), default=None,
              help="Root of the results store (default: $HPCVAR_RUNS or ./hpcvar-runs).")
@click.pass_context
def cli(ctx, runs_dir):
    """Run the main job on 2 local ranks: ping-pong latency and bandwidth over
    0 B .. 4 MiB, stored as a run; prints the summary table."""
    args = ["--np", "2", "--sizes", "0,8,64,1KiB,64KiB,1MiB,4MiB", "--time-per-size", "500ms"]
    if runs_dir:
        args += ["--runs-dir", runs_dir]
    ctx.invoke(bench_latency.cli, **bench_latency.cli.make_context("latency", args).params)
