"""hpcvar bench: the MPI benchmarks. Each lives in hpcvar.cli.bench_<name> and exposes ``cli``."""

from __future__ import annotations

import importlib

import click

BENCH_MODULES = ["latency", "sharing", "queues", "ace", "fanin", "bsp"]


@click.group("bench")
def cli() -> None:
    """Run MPI benchmarks; every sample is kept in a run directory (see 'hpcvar runs')."""


for _name in BENCH_MODULES:
    cli.add_command(importlib.import_module(f"hpcvar.cli.bench_{_name}").cli)
