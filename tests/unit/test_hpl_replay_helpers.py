"""benchmarks/hpl_replay.py's reading of a trace: the compute in wall clock and CPU time per task."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from hpcvar.traces.parquet import Trace, make_events, read_parquet, write_parquet
from tests.unit.test_replay_traces import PINGPONG

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def hpl_replay():
    spec = importlib.util.spec_from_file_location("hpl_replay", ROOT / "benchmarks" / "hpl_replay.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_descheduled_is_the_wall_clock_compute_less_its_polls_and_cpu_time(tmp_path, hpl_replay):
    """Task 0 computes 1000 ns before its send, 200 of them polling and 500 on the CPU: 300 ns descheduled. Task 1
    computes 500 ns before its receive and 2000 before its send, all on the CPU: none."""
    rows = [dict(r, poll_ns=0, cpu_ns=0) for r in PINGPONG]
    rows[1] = dict(rows[1], poll_ns=200, cpu_ns=500)
    rows[5] = dict(rows[5], cpu_ns=500)
    rows[6] = dict(rows[6], cpu_ns=2000)
    p = write_parquet(Trace(make_events(rows), 2), tmp_path / "t.trace")
    d = hpl_replay.descheduled(read_parquet(p))
    assert d["wall"] == pytest.approx([800e-9, 2500e-9])
    assert d["cpu"] == pytest.approx([500e-9, 2500e-9])
    assert d["descheduled"] == pytest.approx([300e-9, 0.0], abs=1e-15)


def test_floor_is_the_least_mean_e_abs_of_tasks_ending_together(hpl_replay):
    """Hand-worked: tasks computing 0 s, measured 1 and 2 s in MPI. Ending together at T, they predict T and T;
    the mean E_abs (|T - 1| / 1 + |T - 2| / 2) / 2 is least at T = 1: 25 % (T = 2 gives 50 %, T = 1.5 37.5 %).
    Compute that accounts for the whole spread (the measured spans equal) leaves no floor."""
    assert hpl_replay.floor([0.0, 0.0], [1.0, 2.0]) == pytest.approx(25.0)
    assert hpl_replay.floor([0.7, 0.5, 0.2], [1.0, 1.2, 1.5]) == pytest.approx(0.0, abs=1e-9)


def test_floor_matches_a_search_over_the_common_end(hpl_replay):
    """On random tasks the floor equals the least mean E_abs over a fine grid of common ends T (never above it, and
    within the grid's step of it)."""
    import numpy as np

    rng = np.random.default_rng(7)
    for _ in range(50):
        n = int(rng.integers(1, 9))
        compute, meas = rng.uniform(0.1, 1.0, n), rng.uniform(0.2, 1.5, n)
        a = compute + meas
        grid = np.linspace(a.min(), a.max(), 4001)
        best = min(float(np.mean(np.abs(t - compute - meas) / meas)) * 100 for t in grid)
        f = hpl_replay.floor(list(compute), list(meas))
        assert f <= best + 1e-9
        assert f >= best - 100 * (a.max() - a.min()) / 4000 / meas.min()
