"""hpcvar sim: simulators (loaded when used)."""

from __future__ import annotations

import os

import click

from hpcvar.cli.lazy import LazyGroup

SIM_COMMANDS = {
    "jitter": ("hpcvar.cli.sim_jitter:cli",
               "Simulate N phases of (compute W, barrier) for many tasks on a jitter trace (jitSim)."),
    "app": ("hpcvar.cli.sim_app:cli",
            "Replay APP.trace on a simulated cluster: predicted time per task and per event, communication time, "
            "conflicts met, average penalty, and E_abs against the measured trace, for each mapping x model."),
}


@click.group("sim", cls=LazyGroup, lazy=SIM_COMMANDS)
def cli() -> None:
    """Simulate: OS jitter at scale (jitSim) and application replay."""
    # The simulators use no BLAS, and start no program that could. Loaded with numpy, OpenBLAS starts a thread
    # per CPU that spins for a while: about 50 ms of CPU, a fifth of a small simulation's process (issue 30).
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
