"""hpcvar noise."""

from __future__ import annotations

import click


@click.group("noise")
def cli() -> None:
    """Record, inject, synthesize, convert and analyse OS jitter traces."""
