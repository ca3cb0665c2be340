"""benchmarks/jitsim_nodes_validation.py's second table: the baseline recording's own prediction and the predictions
against no noise, each marked (out) when outside the measured interval."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def load():
    spec = importlib.util.spec_from_file_location("jitsim_nodes_validation",
                                                  ROOT / "benchmarks" / "jitsim_nodes_validation.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_report_vs_none_prints_the_baseline_recording_and_marks_the_interval(capsys):
    row = {"hosts": 4, "injection": "aligned", "measured_slowdown_ci": [0.107, 0.119],
           "baseline_recording_unsync": 0.107, "baseline_recording_sync": 0.063, "baseline_recording_measured": 0.047,
           "predicted_unsync_vs_none": 0.439, "predicted_sync_vs_none": 0.110, "predicted_measured_vs_none": 0.120}
    load().report_vs_none([row])
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert line == "| 4 | aligned | +10.7%, +6.3%, +4.7% | +43.9% (out) | +11.0% | +12.0% (out) |"


def test_barrier_hops_are_cpu_work_and_the_quantum_is_what_the_ranks_computed(monkeypatch, tmp_path):
    """The simulated barrier: the baseline's phase beyond its work over the tree's 2 x depth hops, all of it CPU work
    (S = R = half a hop, no wire time: on the testbed the "wire" is kernel work on the CPUs); the quantum: the
    median of the baseline's per-phase compute times, not the nominal W."""
    import pandas as pd

    mod = load()
    monkeypatch.setattr(mod, "unstopped", lambda run: ([2.43e-3, 2.45e-3], 0))
    assert mod.barrier_hop(["base"], 4, 2.1e-3) == ("42500ns", "0ns")  # (2.44 - 2.1) ms / (2 x 2 levels) / 2
    assert mod.barrier_hop(["base"], 2, 2.1e-3) == ("85000ns", "0ns")  # one level
    assert mod.barrier_hop(["b1", "b2"], 2, 2.1e-3) == ("85000ns", "0ns")  # the mean over every baseline run

    class FakeRun:
        def read_table(self, name):
            assert name == "bsp.phases"
            return pd.DataFrame({"compute_ns": [1.05e6, 1.06e6, 3.06e6, 1.07e6, 1.06e6]})

    import hpcvar.results as results

    monkeypatch.setattr(results.Run, "open", staticmethod(lambda path: FakeRun()))
    assert mod.work_per_rank_s(["base"]) == 1.06e-3
    assert mod.work_per_rank_s(["b1", "b2"]) == 1.06e-3  # the median over every baseline's phases


def test_each_round_is_measured_against_the_baselines_around_it():
    """Interleaved rounds: round r's injected time per phase over the mean of baselines r and r + 1. A machine that
    slows down steadily (baselines 2.0, 2.1, 2.2 ms) leaves a constant 10 % slowdown at 10 % in every round, where a
    ratio to the first baseline alone read 13 % and 18 %."""
    import pytest

    mod = load()
    assert mod.round_slowdowns([2.255, 2.365], [2.0, 2.1, 2.2]) == pytest.approx([0.10, 0.10])
    with pytest.raises(ValueError, match="2 rounds need 3 baselines"):
        mod.round_slowdowns([2.2, 2.3], [2.0, 2.1])
