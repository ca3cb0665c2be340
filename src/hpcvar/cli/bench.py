"""hpcvar bench: the MPI benchmarks, one module hpcvar.cli.bench_<name> each (loaded when used)."""

from __future__ import annotations

import click

from hpcvar.cli.lazy import LazyGroup

BENCH_COMMANDS = {
    "latency": ("hpcvar.cli.bench_latency:cli", "Ping-pong latency and bandwidth between ranks 0 and 1."),
    "queues": ("hpcvar.cli.bench_queues:cli", "Latency under long MPI queues: posted receives and unexpected messages."),
    "ace": ("hpcvar.cli.bench_ace:cli",
            "Emulate applications: cycles of busy-wait compute and communication, predicted vs measured."),
    "sharing": ("hpcvar.cli.bench_sharing:cli",
                "Penalties of concurrent communications: the table of the paper's Figure 2 for this machine."),
    "fanin": ("hpcvar.cli.bench_fanin:cli", "Fan-in: large-buffer clients and chatter clients into one root."),
    "bsp": ("hpcvar.cli.bench_bsp:cli", "Bulk-synchronous phases: fixed CPU work, then a barrier, on every rank."),
}


@click.group("bench", cls=LazyGroup, lazy=BENCH_COMMANDS)
def cli() -> None:
    """Run MPI benchmarks; every sample is kept in a run directory (see 'hpcvar runs')."""
