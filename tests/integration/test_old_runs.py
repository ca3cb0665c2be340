"""A latency sweep interrupted under hpcvar 55a5545 (tests/data/runs_55a5545.tar.xz) resumes with today's code:
only the missing points are measured, the stored ones are kept, and the run ends complete and renders."""

from __future__ import annotations

import json

import pytest

from hpcvar.results import Run
from hpcvar.results.rawio import raw_files
from hpcvar.results.store import list_runs
from tests.conftest import run_cli
from tests.unit.test_old_runs import old_runs

pytestmark = pytest.mark.mpi


def test_an_interrupted_run_of_55a5545_resumes(tmp_path):
    root = old_runs(tmp_path)
    run = next(r for r in list_runs(root) if r.info["command"] == "bench latency" and r.status == "failed")
    before = run.read_table("latency.samples")
    done = sorted(before["size_bytes"].unique())
    assert 0 < len(done) < 4  # the archive's sweep stopped part way (0, 64MiB, 128MiB, 256MiB)
    res = run_cli([*run.info["argv"][1:run.info["argv"].index("--timeout")], "--timeout", "120s", "--resume",
                   str(run.path), "--runs-dir", str(root), "--json"], check=True)
    out = json.loads(res.stdout)
    assert [s["size"] for s in out["sizes"]] == [0, 64 << 20, 128 << 20, 256 << 20]
    again = Run.open(run.path)
    assert again.status == "complete" and again.info["result"] == out
    after = again.read_table("latency.samples")
    for size in done:  # the points stored in 55a5545's raw file are read back, not measured again
        kept, now = before[before["size_bytes"] == size], after[after["size_bytes"] == size]
        assert now["rtt_ns"].tolist() == kept["rtt_ns"].tolist()
    # one launch for the missing points (both raw files compressed once the tables are written: results.rawio)
    assert len(raw_files(run.path / "raw", "launch-*.raw")) == 2
    shown = run_cli(["runs", "show", str(run.path)], check=True).stdout
    assert shown.rstrip().endswith(f"stored in {run.path}") and "256MiB" in shown
