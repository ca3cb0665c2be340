"""hpcvar bench: the MPI benchmarks, one module hpcvar.cli.bench_<name> each (loaded when used)."""

from __future__ import annotations

import click

from hpcvar.cli.lazy import LazyGroup
from hpcvar.results.kinds import bench_commands


def command_ref(kind_cli: str) -> str:
    """A kind's ``cli`` entry (relative to this package, e.g. ``bench_latency:cli``) as the ``module:attribute``
    the lazy group imports: the table of kinds never names ``hpcvar.cli`` itself (library code never imports
    the command line)."""
    return f"hpcvar.cli.{kind_cli}"


# from the table of kinds (hpcvar.kinds)
BENCH_COMMANDS = {name: (command_ref(ref), short) for name, (ref, short) in bench_commands().items()}


@click.group("bench", cls=LazyGroup, lazy=BENCH_COMMANDS)
def cli() -> None:
    """Run MPI benchmarks; every sample is kept in a run directory (see 'hpcvar runs')."""
