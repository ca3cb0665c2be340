"""hpcvar sim."""

from __future__ import annotations

import click


@click.group("sim")
def cli() -> None:
    """Simulate: OS jitter at scale (jitSim) and application replay."""

from hpcvar.cli.sim_app import cli as _app_cli  # noqa: E402  (hpcvar sim app)

cli.add_command(_app_cli)

from hpcvar.cli.sim_jitter import cli as _jitter_cli  # noqa: E402  (hpcvar sim jitter)

cli.add_command(_jitter_cli)
