"""hpcvar's ReFrame test library under ReFrame's Slurm scheduler (root): the testbed with --slurm (3 namespace
nodes), the per-node noise test cloned onto every node by --distribute, a screen of a 3-node job, and a
characterization step started by srun inside its job. ReFrame's squeue flavour of its Slurm backend (the testbed's
Slurm keeps no accounting for sacct). Run under the machine-wide lock:
flock /tmp/hpcvar-root.lock .venv/bin/pytest tests/testbed/test_reframe_slurm.py
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from tests.conftest import best_of_quiet_attempts, run_cli
from tests.integration.test_reframe import HPCVAR, reframe, unreliable
from tests.testbed.conftest import up_testbed

pytest.importorskip("reframe", reason="the test extra installs reframe-hpc")
pytestmark = [pytest.mark.root, pytest.mark.mpi]

SLURM_TOOLS = ("slurmctld", "slurmd", "munged", "srun", "sbatch", "squeue", "sinfo", "scontrol")
NODES = ("rf-h1", "rf-h2", "rf-h3")
SLURM = """site_configuration = {
    'systems': [{'name': 'testbed', 'descr': 'hpcvar testbed Slurm', 'hostnames': ['.*'],
                 'partitions': [{'name': 'nodes', 'scheduler': 'squeue', 'launcher': 'srun',
                                 'environs': ['builtin'], 'max_jobs': 4}]}],
    'environments': [{'name': 'builtin'}],
}
"""
SCREEN = ["--rounds", "1", "--check", "0.2s", "--noise", "0.4s", "--kernel", "0.2s", "--bw-size", "1MiB",
          "--bw-iters", "3", "--lat-iters", "50", "--shm-iters", "100", "--timer-samples", "20", "--timeout", "150s",
          "--no-costs"]


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    missing = [t for t in SLURM_TOOLS if shutil.which(t) is None]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed: apt-get install slurmctld slurmd slurm-client munge "
                    "libpmix-dev")
    if os.geteuid() != 0:
        pytest.skip("needs root")
    with up_testbed(tmp_path_factory, "rf-", len(NODES), "200mbit", "--slurm") as env:
        res = run_cli(["testbed", "env", "--json"], env=env, check=True)
        yield {**env, **json.loads(res.stdout)}


def _runs_of(case: dict) -> list[dict]:
    res = subprocess.run([HPCVAR, "runs", "list", "--runs-dir", f"{case['outputdir']}/hpcvar-runs", "--json"],
                         capture_output=True, text=True, check=True)
    return json.loads(res.stdout)["runs"]


def test_node_noise_distributed_onto_every_node(slurm, tmp_path):
    rc, cases, out = reframe(tmp_path, SLURM, "-n", "hpcvar_node_noise_check", "--distribute=all",
                             "-S", "duration=1s", env=slurm)
    assert rc == 0 and len(cases) == len(NODES), out
    hosts = []
    for case in cases:
        assert case["result"] == "pass", out
        perf = {k.split(":")[-1] for k in case["perfvalues"]}
        assert {"noise_lost_pct_cpu0", "noise_lost_pct_cpu1"} <= perf, perf  # named without the node
        (run,) = _runs_of(case)
        hosts.append(run["host"])
    assert sorted(hosts) == list(NODES)  # each clone recorded on its own node


def _in_slurm(slurm, tmp_path, name: str, *options: str) -> dict:
    """One test of the library run by ReFrame under Slurm, its case once it passed; an attempt whose hpcvar
    answered UNRELIABLE under other processes' load is disturbed (the test skips when every attempt was)."""
    attempt = iter(range(100))

    def measure():
        return reframe(tmp_path / f"try{next(attempt)}", SLURM, "-n", name, *options, env=slurm, timeout=900)

    def ran(result):
        _, cases, out = result
        assert [c["name"] for c in cases] == [name], out

    def passed(result):
        rc, cases, out = result
        why = "; ".join(f"{c['result']} in {c['fail_phase']}: {c['fail_reason']}" for c in cases
                        if c["result"] != "pass")
        assert rc == 0 and not why, why

    _, (case,), _ = best_of_quiet_attempts(measure, passed, always=ran, disturbed=unreliable,
                                           what=f"{name} in a Slurm job under ReFrame")
    return case


def test_characterize_in_a_slurm_job_of_two_nodes(slurm, tmp_path):
    case = _in_slurm(slurm, tmp_path, "hpcvar_characterize_check", "-S", "num_tasks=2", "-S", "steps=latency")
    (run,) = _runs_of(case)
    assert run["command"] == "characterize"
    lat = {k.split(":")[-1] for k in case["perfvalues"]}
    pairs = [k for k in lat if k.startswith("latency_us_rf-h") and k.endswith("_8B_p50")]
    assert pairs and all("_to_" in k for k in pairs), sorted(lat)
    src, _, dst = pairs[0].removeprefix("latency_us_").removesuffix("_8B_p50").partition("_to_")
    assert src != dst, pairs  # srun, started by hpcvar inside the job, placed the two ranks on two nodes


def test_screen_in_a_slurm_job_of_three_nodes(slurm, tmp_path):
    case = _in_slurm(slurm, tmp_path, "hpcvar_screen_check", "-S", f"screen_options={','.join(SCREEN)}")
    screen = {k.split(":")[-1] for k in case["perfvalues"]}
    for a in NODES:  # every node's noise, every link's bandwidth, measured through srun inside the job
        assert f"node_noise_lost_pct_{a}" in screen, sorted(screen)
        assert any(k.startswith(f"link_bandwidth_MBps_{a}_to_") for k in screen), sorted(screen)
