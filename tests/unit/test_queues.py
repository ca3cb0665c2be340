"""bench queues: the slope fit, the raw -> tables -> JSON path, and input refused before launch."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sps

from hpcvar.kinds.queues.job import (
    MAX_POSTED_LENGTH,
    MAX_UNEXPECTED_LENGTH,
    PostedParams,
    PostedQueue,
    UnexpectedParams,
    UnexpectedQueue,
    fit_slope,
    traversed_entries,
)
from hpcvar.results import read_raw
from tests.conftest import run_cli


def test_traversed_entries_rounds_half_up_like_the_native_program():
    assert traversed_entries(1000, 100) == 1000
    assert traversed_entries(1000, 0) == 0
    assert traversed_entries(3, 50) == 2  # 1.5 -> 2
    assert traversed_entries(10, 33) == 3  # 3.3 -> 3
    assert traversed_entries(0, 100) == 0


def test_fit_recovers_slope_and_its_t_interval():
    x = np.array([0, 0, 250, 500, 750, 1000, 1000], dtype=float)
    noise = np.array([3.0, -2.0, 1.0, -4.0, 2.0, 0.5, -0.5])
    y = 1800.0 + 7.0 * x + noise
    f = fit_slope(y, x)
    assert f["slope"] == pytest.approx(7.0, abs=0.02)
    assert f["intercept"] == pytest.approx(1800.0, abs=5)
    assert f["dof"] == 5
    # the interval is slope +- t(0.975, dof) * se, se from the OLS covariance
    X = np.column_stack([np.ones_like(x), x])
    resid = y - X @ np.linalg.lstsq(X, y, rcond=None)[0]
    se = np.sqrt(resid @ resid / 5 * np.linalg.inv(X.T @ X)[1, 1])
    half = sps.t.ppf(0.975, 5) * se
    assert f["slope_ci"][0] == pytest.approx(f["slope"] - half)
    assert f["slope_ci"][1] == pytest.approx(f["slope"] + half)
    assert f["slope_ci"][0] > 0


def test_fit_separates_untraversed_entries_when_the_sweep_varies_them():
    # lengths 0, 500, 1000 x traversed 0, 100: 7 ns per traversed entry, 1 ns per untraversed one
    pts = [(n, traversed_entries(n, p)) for n in (0, 500, 1000) for p in (0, 100)]
    entries = np.array([e for _, e in pts], dtype=float)
    untrav = np.array([n - e for n, e in pts], dtype=float)
    y = 2000 + 7.0 * entries + 1.0 * untrav + np.array([1.0, -1.0, 2.0, -2.0, 0.5, -0.5])
    f = fit_slope(y, entries, untrav)
    assert f["slope"] == pytest.approx(7.0, abs=0.05)
    assert f["slope2"] == pytest.approx(1.0, abs=0.05)
    # a simple fit would mix both effects
    assert fit_slope(y, entries)["slope"] != pytest.approx(7.0, abs=0.05)


def test_fit_without_variation_or_dof_gives_no_interval():
    f = fit_slope([1.0, 2.0, 3.0], [5, 5, 5])
    assert np.isnan(f["slope"])
    f = fit_slope([1.0, 2.0], [0, 10])  # two points, two parameters: no residual
    assert f["slope"] == pytest.approx(0.1)
    assert np.isnan(f["slope_ci"][0])
    # a collinear second regressor is dropped
    f = fit_slope([1.0, 2.0, 3.1, 4.0], [0, 1, 2, 3], [0, 2, 4, 6])
    assert np.isnan(f["slope2"]) and f["slope"] == pytest.approx(1.0, abs=0.1)


RAW_POSTED = """#@hpcvar_raw=1
#@program=hv_queues
#@columns=iter,rtt_ns
#@point mode=posted length=0 traversed=100 entries=0 size=8 any_source=0 iters=3
0,4000
1,4200
2,3800
#@point_end rows=3
#@point mode=posted length=100 traversed=100 entries=100 size=8 any_source=0 iters=3
0,5400
1,5600
2,5000
#@point_end rows=3
#@point mode=posted length=200 traversed=100 entries=200 size=8 any_source=0 iters=3
0,8000
1,7600
2,8400
#@point_end rows=3
#@point mode=posted length=200 traversed=0 entries=0 size=8 any_source=0 iters=3
0,4100
1,4300
2,3900
#@point_end rows=3
"""


def test_posted_tables_and_json_from_a_raw_file(tmp_path):
    p = tmp_path / "launch-001.raw"
    p.write_text(RAW_POSTED)
    bench = PostedQueue()
    params = PostedParams(lengths=(0, 100, 200), traversed=(0, 100), sizes=(8,), any_source=False, iters=1000,
                          min_iters=20, warmup=10, time_per_point_s=1.0, pin=True, fit_stat="median")
    tables = bench.tables([read_raw(p)], params)
    samples = tables["queues_posted.samples"]
    assert len(samples) == 12 and (samples["oneway_ns"] * 2 == samples["rtt_ns"]).all()
    summ = tables["queues_posted.summary"]
    assert list(summ["untraversed"]) == [0, 0, 200, 0]  # sorted by length, then traversed
    out = bench.result(tables, params)
    assert set(out) >= {"points", "slope_ns_per_entry", "slope_ci", "baseline_ns"}
    assert {"length", "traversed_pct", "size", "median_ns", "p99_ns"} <= set(out["points"][0])
    assert out["baseline_ns"] == pytest.approx(2000.0)  # median of the length-0 one-way samples
    # medians (one-way): 2000 at 0 entries, 2700 at 100, 4000 at 200; untraversed 200 -> 2050
    assert out["slope_ns_per_entry"] == pytest.approx(10.0, rel=0.1)
    assert out["slope_ci"][0] < out["slope_ns_per_entry"] < out["slope_ci"][1]
    assert out["fit_stat"] == "median" and out["fit_size"] == 8


def test_unexpected_json_has_no_traversed_pct(tmp_path):
    text = RAW_POSTED.replace("mode=posted", "mode=unexpected").replace(" traversed=100 entries=0", "")
    text = text.replace(" traversed=100 entries=100", "").replace(" traversed=100 entries=200", "")
    text = text.replace(" traversed=0 entries=0", "").replace(" any_source=0", "")
    text = text.replace("length=200 size=8 iters=3\n0,4100", "length=300 size=8 iters=3\n0,4100")
    p = tmp_path / "launch-001.raw"
    p.write_text(text)
    bench = UnexpectedQueue()
    params = UnexpectedParams(lengths=(0, 100, 200, 300), sizes=(8,), iters=1000, min_iters=20, warmup=10,
                              time_per_point_s=1.0, pin=True, fit_stat="min")
    tables = bench.tables([read_raw(p)], params)
    out = bench.result(tables, params)
    assert all("traversed_pct" not in pt for pt in out["points"])
    assert [pt["length"] for pt in out["points"]] == [0, 100, 200, 300]
    assert out["baseline_ns"] == pytest.approx(1900.0)  # min of the length-0 one-way samples
    assert out["fit_stat"] == "min"


@pytest.mark.parametrize("args, flag, words", [
    (["posted", "--lengths", "-5"], "--lengths", f"-5 is outside [0, {MAX_POSTED_LENGTH}]"),
    (["posted", "--lengths", "10001"], "--lengths", f"[0, {MAX_POSTED_LENGTH}]"),
    (["posted", "--traversed", "150"], "--traversed", "150 is outside [0, 100]"),
    (["posted", "--traversed", "-1"], "--traversed", "outside [0, 100]"),
    (["posted", "--lengths", "ten"], "--lengths", "'ten' is not an integer"),
    (["unexpected", "--lengths", f"{MAX_UNEXPECTED_LENGTH + 1}"], "--lengths",
     f"unexpected-queue length {MAX_UNEXPECTED_LENGTH + 1} is outside [0, {MAX_UNEXPECTED_LENGTH}]"),
    (["unexpected", "--lengths", "-1"], "--lengths", "outside [0,"),
    (["posted", "--lengths", "10000", "--sizes", "1GiB"], "--lengths", "available on this host"),
])
def test_bad_input_is_refused_before_launch(runs_dir, args, flag, words):
    res = run_cli(["bench", "queues", *args, "--np", "2"], timeout=60)
    assert res.returncode == 2, res.stderr
    assert res.stderr.startswith("error: ")
    assert f"({flag})" in res.stderr and words in res.stderr
    assert not runs_dir.exists() or not any(runs_dir.iterdir())  # nothing was launched or stored


def test_one_rank_is_refused(runs_dir):
    res = run_cli(["bench", "queues", "unexpected", "--np", "1"], timeout=60)
    assert res.returncode == 2 and "(--np)" in res.stderr
