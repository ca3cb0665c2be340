"""Real 2-rank runs of hpcvar bench bsp (1 ms quantum, 50 phases), checked through the stored tables."""

from __future__ import annotations

import json

import numpy as np
import pytest

from hpcvar.kinds.bsp.job import global_phases
from hpcvar.results import Run, resolve_run
from tests.conftest import best_of_quiet_attempts, run_cli

pytestmark = pytest.mark.mpi

W_NS = 1e6
# The work is a calibrated number of loop iterations (the fastest of 5 timed runs is at least W): a
# later run may go up to about 1% faster on a quiet VM (CPU frequency, the other vCPU's load); beyond 2% the run
# warns that the CPU's speed changed after its calibration, and the attempt counts as disturbed.
TOLERANCE = 0.02


@pytest.mark.parametrize("barrier", ["mpi", "tree"])
def test_bsp_tables(runs_dir, barrier):
    def measure() -> Run:
        res = run_cli(["bench", "bsp", "--np", "2", "--quantum", "1ms", "--phases", "50", "--warmup", "2",
                       "--repeat", "2", "--barrier", barrier, "--json"], check=True)
        out = json.loads(res.stdout)
        assert out["ranks"] == 2 and out["phases"] == 50 and len(out["reps"]) == 2
        assert out["work_iters"] > 0 and "slowdown" not in out
        return Run.open(resolve_run("latest"))

    def structure(run: Run) -> None:  # what no busy host can excuse
        assert run.info["status"] == "complete"
        ph = run.read_table("bsp.phases")
        assert len(ph) == 2 * 2 * 50
        assert sorted(ph["rep"].unique()) == [0, 1] and sorted(ph["rank"].unique()) == [0, 1]
        assert (ph["compute_ns"] == ph["compute_end_ns"] - ph["start_ns"]).all()
        assert (ph["end_ns"] >= ph["compute_end_ns"]).all()
        for _, g in ph.groupby(["rep", "rank"]):
            g = g.sort_values("phase")
            assert (g["start_ns"].to_numpy()[1:] >= g["end_ns"].to_numpy()[:-1]).all()
        # one clock: nobody leaves a phase's barrier before every rank has finished that phase's work
        for _, g in ph.groupby(["rep", "phase"]):
            assert g["end_ns"].min() >= g["compute_end_ns"].max()
        reps = run.read_table("bsp.reps")
        assert list(reps["rep"]) == [0, 1]
        for r in reps.itertuples():
            d = global_phases(ph[ph["rep"] == r.rep])
            assert d.size == 50 and r.total_ns == pytest.approx(d.sum())
            assert r.slowdown_vs_compute == pytest.approx(r.total_ns / (50 * W_NS) - 1)
            assert r.barrier == barrier and r.common_clock == 1
        assert (run.path / "plots" / "bsp-phases.png").is_file()

    def timing(run: Run) -> None:
        # every phase's work lasts at least the quantum (a detour only stretches it); the calibration is a
        # measurement too, so a calibration slowed by other jobs makes the work short: retried on a busy host
        ph = run.read_table("bsp.phases")
        assert (ph["compute_ns"] >= W_NS * (1 - TOLERANCE)).all(), ph["compute_ns"].min()
        assert np.median(ph["compute_ns"]) >= W_NS * 0.99
        for r in run.read_table("bsp.reps").itertuples():
            assert r.total_ns >= 50 * W_NS * (1 - TOLERANCE)

    def drifted(run: Run) -> str | None:
        # the run's own finding that the CPU's speed changed after its calibration (a VM whose hypervisor or SMT
        # sibling took less later: CI saw phases 2.6-4.5 % short in three attempts)
        return next((w for w in run.info.get("warnings") or [] if "faster than at the calibration" in w), None)

    best_of_quiet_attempts(measure, timing, always=structure, what=f"bsp phases ({barrier} barrier)",
                           disturbed=drifted)


def test_bsp_baseline_reuses_calibration(runs_dir):
    args = ["bench", "bsp", "--np", "2", "--quantum", "1ms", "--phases", "50", "--warmup", "2", "--repeat", "1",
            "--json"]
    first = json.loads(run_cli(args, check=True).stdout)
    second = json.loads(run_cli(args + ["--baseline", first["run"]], check=True).stdout)
    assert second["work_iters"] == first["work_iters"]
    assert second["baseline"]["per_phase_ns"] == pytest.approx(first["per_phase_ns"])
    r = second["reps"][0]
    assert r["slowdown"] == pytest.approx(r["per_phase_ns"] / first["per_phase_ns"] - 1)
    # a baseline of another workload is refused before launch
    bad = run_cli(["bench", "bsp", "--np", "2", "--quantum", "2ms", "--phases", "50", "--baseline", first["run"]])
    assert bad.returncode == 2 and "(--baseline)" in bad.stderr
