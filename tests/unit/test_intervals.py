"""One sample or replica has no interval: every view that prints a 95% CI prints "n = 1" instead (issue #27)."""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

from rich.console import Console

from hpcvar.history.views import _ci_text
from hpcvar.kinds.bsp.views import render as bsp_render
from hpcvar.kinds.bsp.views import section as bsp_section
from hpcvar.kinds.latency.views import _median_ci
from hpcvar.kinds.sharing.views import render as sharing_render
from hpcvar.units import format_interval, format_time_ns

NAN = float("nan")


def test_format_interval():
    pct = "{:.2f}%".format
    assert format_interval(0.1, 0.2, 5, pct) == "0.10%, 0.20%"
    assert format_interval(0.15, 0.15, 1, pct) == "n = 1"  # the "0.15%..0.15%" of one replica
    assert format_interval(NAN, NAN, 1, pct) == "n = 1"
    assert format_interval(NAN, 0.2, 4, pct) == "-"
    assert format_interval(0.1, 0.2, None, pct, "..") == "0.10%..0.20%"


def _bsp_run(repeat: int):
    one = {"rep": 0, "total_ns": 1e6, "per_phase_ns": 1e5, "slowdown_vs_compute": 0.0015, "slowdown": 0.01,
           "phase_p50_ns": 1e5, "phase_p99_ns": 1e5, "phase_max_ns": 1e5, "compute_mean_ns": 1e5,
           "wait_mean_ns": 1.0, "cpu_changes": 0}
    ci = [0.0015, 0.0015] if repeat == 1 else [0.001, 0.002]
    res = {"ranks": 2, "quantum_ns": 1e5, "phases": 10, "barrier": "mpi", "arity": None, "repeat": repeat,
           "reps": [one] * repeat, "work_iters": 100, "slowdown_vs_compute": 0.0015, "slowdown_vs_compute_ci": ci,
           "slowdown": 0.01, "slowdown_ci": ci, "baseline": {"run": "/r/base", "per_phase_ns": 1e5}}
    return SimpleNamespace(info={"result": res}, path=Path("/nonexistent"))


def test_bsp_one_repetition_has_no_interval():
    con = Console(record=True, width=300)
    bsp_render(con, _bsp_run(1))
    text = con.export_text()
    assert "95% CI (n = 1)" in text and "+0.15, +0.15" not in text
    sec = bsp_section(_bsp_run(1))
    assert all("n = 1" in h.value for h in sec.headlines)
    con = Console(record=True, width=300)
    bsp_render(con, _bsp_run(3))
    assert "95% CI [+0.10, +0.20]%" in con.export_text()


def test_sharing_one_rep_has_no_interval():
    comm = {"name": "a", "src": "0", "dst": "1", "size_bytes": 1 << 20, "t_ns": 1e6, "penalty": 1.92,
            "penalty_ci": [1.92, 1.92], "penalty_min": 1.92, "penalty_max": 1.92, "n": 1}
    run = SimpleNamespace(info={"result": {"t_ref_ns": 5e5, "reps": 1, "communications": [comm]}})
    con = Console(record=True, width=300)
    sharing_render(con, run)
    text = con.export_text()
    assert "n = 1" in text and "1.92-1.92" not in text


def test_history_and_latency_one_sample():
    assert _ci_text({"ci_lo": 5.0, "ci_hi": 5.0, "n": 1}, "ns") == "n = 1"
    assert _ci_text({"ci_lo": 5.0, "ci_hi": 6.0, "n": 9}, "ns") == f"{format_time_ns(5.0)} .. {format_time_ns(6.0)}"
    row = SimpleNamespace(median_ci_lo_ns=2000.0, median_ci_hi_ns=2000.0, n=1)
    assert _median_ci(row) == "(n = 1)"
    row = SimpleNamespace(median_ci_lo_ns=2000.0, median_ci_hi_ns=2500.0, n=100)
    assert _median_ci(row) == f"[{format_time_ns(2000.0)}, {format_time_ns(2500.0)}]"
    assert not math.isnan(row.n)


def test_an_interval_crossing_an_impossible_value_is_flagged():
    from hpcvar.report.sections import SUSPECT
    from hpcvar.report.verdict import judge_ci

    flag = judge_ci(-0.02, 0.05, replicas=5, impossible_below=0.0)
    assert flag is not None and flag[0] == SUSPECT and "cannot take" in flag[1]
    assert judge_ci(0.0, 0.05, replicas=5, impossible_below=0.0) is None
    assert "spans zero" in judge_ci(-0.02, 0.05, replicas=5)[1]  # a change may be negative: no bound, no flag
