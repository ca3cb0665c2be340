"""hpcvar testbed."""

from __future__ import annotations

import click


@click.group("testbed")
def cli() -> None:
    """A virtual cluster of network namespaces with shaped links (needs root)."""
