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
