"""Noise recorded on every testbed host at once (root): 4 traces on one time base, noise injected at one
instant everywhere reported as aligned, at shifted phases as not aligned; jitSim replays the recording with
the measured alignment. The same through Slurm's srun is in test_srun_testbed.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import best_of_quiet_attempts, run_cli
from tests.testbed.conftest import up_testbed
from tests.testbed.noise_nodes import ALIGNED, SHIFTED, record_with_injection, steal_disturbed

pytestmark = [pytest.mark.root, pytest.mark.mpi]


@pytest.fixture(scope="module")
def testbed(tmp_path_factory):
    with up_testbed(tmp_path_factory, "nz-", 4, "1gbit") as env:
        env = {**env, "HPCVAR_RUNS": str(tmp_path_factory.mktemp("nz-runs"))}
        yield env


def _record(env, phases):
    return record_with_injection(env, phases, ["--launcher", "testbed", "--min-detour", "500us", "--rt-prio", "20"])


def test_four_traces_on_one_time_base(testbed):
    out = best_of_quiet_attempts(lambda: _record(testbed, ALIGNED),
                                 lambda o: _check_verdict(o, "aligned"), what="aligned injection, testbed",
                                 disturbed=steal_disturbed)
    run = Path(out["run"])
    traces = sorted(p.name for p in (run / "traces").glob("*.jtr"))
    assert traces == ["nz-h1.jtr", "nz-h2.jtr", "nz-h3.jtr", "nz-h4.jtr"]
    assert out["nodes"] == ["nz-h1", "nz-h2", "nz-h3", "nz-h4"] and out["method"] == "timer"  # one machine
    # one clock here: the ping-pongs must find the offsets within their own precision
    sync = json.loads(run_cli(["runs", "show", str(run), "--json"], env=testbed, check=True).stdout)
    assert sync["alignment"]["verdict"] == "aligned"
    assert out["clock"]["precision_ns"] < 1e6 and abs(out["clock"]["max_drift_ppm"]) < 50
    print(f"testbed, aligned: clock precision {out['clock']['precision_ns'] / 1e3:.1f} us, excess "
          f"{[round(p['excess'], 2) for p in out['alignment']['pairs']]}")
    # jitSim takes the recording, with its measured alignment beside the paper's modes
    res = run_cli(["sim", "jitter", "--trace", str(run), "--tasks", "1,64", "--phases", "5", "--replicas", "2",
                   "--align", "unsync,measured", "--no-plots", "--json"], env=testbed, check=True)
    sim = json.loads(res.stdout)
    configs = {p["config"] for p in sim["points"]}
    assert any(c.endswith("measured") for c in configs) and any(c.endswith("unsync") for c in configs)


def _check_verdict(out: dict, want: str) -> None:
    a = out["alignment"]
    assert a["verdict"] == want, f"{a['verdict']} (wanted {want}): {a['pairs']}"


def test_shifted_phases_are_not_aligned(testbed):
    out = best_of_quiet_attempts(lambda: _record(testbed, SHIFTED),
                                 lambda o: _check_verdict(o, "not aligned"), what="shifted injection, testbed",
                                 disturbed=steal_disturbed)
    print(f"testbed, shifted: excess {[round(p['excess'], 2) for p in out['alignment']['pairs']]}")
