"""hpcvar sim."""

from __future__ import annotations

import click


@click.group("sim")
def cli() -> None:
    """Simulate: OS jitter at scale (jitSim) and application replay."""
