"""Real 2-rank runs of hpcvar bench queues: matching engines search linear lists.

The fits use --fit-stat min: on the shared 2-core CI host the ranks are
descheduled in many round trips, which moves medians by milliseconds; the
minimum over 100 iterations still sees the undisturbed cost (docs/queues.md).
"""

from __future__ import annotations

import json

import pytest

from hpcvar.results import Run, resolve_run
from tests.conftest import run_cli

pytestmark = pytest.mark.mpi

COMMON = ["--np", "2", "--iters", "100", "--min-iters", "100", "--warmup", "5", "--time-per-point", "0",
          "--fit-stat", "min", "--timeout", "120s", "--json"]


def test_posted_queue_traversal_costs_and_untraversed_entries_do_not(runs_dir):
    res = run_cli(["bench", "queues", "posted", "--lengths", "0,250,500,750,1000", "--traversed", "0,100",
                   *COMMON], check=True, timeout=200)
    out = json.loads(res.stdout)
    pts = {(p["length"], p["traversed_pct"]): p for p in out["points"]}
    assert len(pts) == 10
    base = out["baseline_ns"]
    full = pts[(1000, 100)]["min_ns"]
    none = pts[(1000, 0)]["min_ns"]
    # 1000 entries searched on each rank: clearly above the empty-queue baseline
    assert full > 2 * base, (base, full)
    lo, hi = out["slope_ci"]
    assert 0 < lo <= out["slope_ns_per_entry"] <= hi
    # 1000 entries behind the match: near the baseline (less than half the traversal's increase)
    assert none - base < 0.5 * (full - base), (base, none, full)
    run = Run.open(resolve_run("latest"))
    assert run.info["status"] == "complete"
    samples = run.read_table("queues_posted.samples")
    assert (samples.groupby(["length", "traversed_pct"]).size() == 100).all()  # every iteration kept
    assert (run.plots_dir() / "queues_posted_heatmap_8.png").is_file()
    assert (run.plots_dir() / "queues_posted_vs_entries.svg").is_file()


def test_unexpected_queue_grows_latency(runs_dir):
    res = run_cli(["bench", "queues", "unexpected", "--lengths", "0,500,1000,1500,2000", *COMMON],
                  check=True, timeout=200)
    out = json.loads(res.stdout)
    pts = {p["length"]: p for p in out["points"]}
    assert "traversed_pct" not in pts[0]
    assert pts[2000]["min_ns"] > out["baseline_ns"] + 1000  # > 1 us more with 2000 messages waiting
    lo, hi = out["slope_ci"]
    assert 0 < lo <= out["slope_ns_per_entry"] <= hi
    run = Run.open(resolve_run("latest"))
    assert run.read_table("queues_unexpected.fit")["fit_stat"].tolist() == ["min"]
    assert (run.plots_dir() / "queues_unexpected_vs_length.png").is_file()
    shown = run_cli(["runs", "show", run.id], check=True)
    assert "unexpected-message queue" in shown.stdout


def test_any_source_receives_are_searched_too(runs_dir):
    res = run_cli(["bench", "queues", "posted", "--any-source", "--lengths", "0,1000", "--traversed", "0,100",
                   *COMMON], check=True, timeout=200)
    out = json.loads(res.stdout)
    pts = {(p["length"], p["traversed_pct"]): p for p in out["points"]}
    assert out["any_source"] is True
    assert pts[(1000, 100)]["min_ns"] > 2 * out["baseline_ns"]
