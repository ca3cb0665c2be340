"""A launch that runs past --timeout (issue #32): a message that says so, exit code 124, the points measured before
it kept and counted, the run stored 'failed' with the reason, and --resume continuing it."""

from __future__ import annotations

import json

import pytest

from hpcvar.results import Run
from tests.conftest import run_cli

pytestmark = [pytest.mark.mpi]

# 8 B takes milliseconds; 4 MiB has a 10 s budget (5000 round trips of about 2 ms), far past the 3 s timeout
ARGS = ["bench", "latency", "--np", "2", "--sizes", "8,4MiB", "--time-per-size", "10s", "--iters", "5000",
        "--min-iters", "10"]


@pytest.mark.timeout(300)
def test_a_timeout_says_so_keeps_the_points_and_resumes(tmp_path):
    runs = tmp_path / "runs"
    env = {"HPCVAR_RUNS": str(runs)}
    res = run_cli(ARGS + ["--timeout", "3s"], env=env, timeout=120)
    assert res.returncode == 124, res.stdout + res.stderr
    err = res.stderr
    assert "error: the MPI job ran past --timeout 3 s and was stopped (--timeout)" in err, err
    assert "1 of 2 points were stored in" in err and "--resume" in err and "Traceback" not in err, err
    run = Run.open(next(runs.iterdir()))
    assert run.info["status"] == "failed"
    assert run.info["error"]["kind"] == "LaunchTimeout" and "ran past --timeout" in run.info["error"]["what"]
    assert list(run.read_table("latency.summary")["size_bytes"]) == [8]  # the point measured before it
    shown = run_cli(["runs", "show", run.id], env=env, check=True).stdout
    assert "status: failed" in shown and "why: the MPI job ran past --timeout 3 s" in shown
    # other parameters than the run's are refused, naming them
    res = run_cli(ARGS[:5] + ["8,1MiB"] + ARGS[6:] + ["--resume", run.id], env=env, timeout=60)
    assert res.returncode == 2 and "differ from those of run" in res.stderr and "(sizes)" in res.stderr, res.stderr
    # resumed with --resume alone (and a timeout that fits): the stored parameters, not the flags' defaults
    # (issue #27), only the missing point measured, and the run ends complete
    res = run_cli(["bench", "latency", "--resume", run.id, "--timeout", "90s", "--json"], env=env, timeout=200)
    assert res.returncode == 0, res.stderr
    assert [s["size"] for s in json.loads(res.stdout)["sizes"]] == [8, 4194304]
    done = Run.open(run.path)
    assert done.info["status"] == "complete" and "error" not in done.info
    assert len(done.info["launches"]) == 2 and done.info["launches"][1]["points"] == 1


def test_a_timeout_of_zero_is_refused(tmp_path):
    res = run_cli(ARGS + ["--timeout", "0s"], env={"HPCVAR_RUNS": str(tmp_path / "runs")})
    assert res.returncode == 2 and "(--timeout)" in res.stderr and "above zero" in res.stderr, res.stderr
    assert not (tmp_path / "runs").exists()
