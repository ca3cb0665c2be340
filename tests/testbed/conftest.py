"""Shared by the testbed tests (root): bring a testbed up for a module and always take it down."""

from __future__ import annotations

import contextlib
import os

from tests.conftest import run_cli


@contextlib.contextmanager
def up_testbed(tmp_path_factory, prefix: str, hosts: int = 4, rate: str = "200mbit", *extra: str):
    """Yields the environment ({"HPCVAR_TESTBED_STATE": ...}) of a fresh testbed with its own prefix."""
    state = tmp_path_factory.mktemp("tb") / "state.json"
    env = {"HPCVAR_TESTBED_STATE": str(state)}
    # owned by this pytest process: a killed test session (CI's time limit, kill -9) leaves no testbed behind
    run_cli(["testbed", "up", "--hosts", str(hosts), "--rate", rate, "--prefix", prefix, "--owner-pid",
             str(os.getpid()), *extra], env=env, check=True, timeout=120)
    try:
        yield env
    finally:
        run_cli(["testbed", "down"], env=env, timeout=120)
