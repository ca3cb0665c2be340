"""hpcvar model."""

from __future__ import annotations

import click


@click.group("model")
def cli() -> None:
    """Bandwidth-sharing models: penalties, fitting, evaluation against measurements."""
