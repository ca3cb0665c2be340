"""hpcvar report."""

from __future__ import annotations

import click


@click.group("report")
def cli() -> None:
    """Reports: one self-contained HTML file (or Markdown) from runs."""
