"""hpcvar bench: the MPI benchmarks, one module hpcvar.cli.bench_<name> each (loaded when used)."""

from __future__ import annotations

import click

from hpcvar.cli.lazy import LazyGroup
from hpcvar.kinds import bench_commands

BENCH_COMMANDS = bench_commands()  # from the table of kinds (hpcvar.kinds)


@click.group("bench", cls=LazyGroup, lazy=BENCH_COMMANDS)
def cli() -> None:
    """Run MPI benchmarks; every sample is kept in a run directory (see 'hpcvar runs')."""
