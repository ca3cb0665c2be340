"""hpcvar trace."""

from __future__ import annotations

import click


@click.group("trace")
def cli() -> None:
    """Trace MPI applications (PMPI) and convert traces."""
