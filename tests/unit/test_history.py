"""hpcvar history's engine on synthetic series (change points, their confirmation, the run-to-run condition,
HPX's symbols) and its command line on stored runs (groups, windows, CSV for Otava, errors)."""

from __future__ import annotations

import csv
import datetime as dt
import io
import json

import numpy as np
import pandas as pd
import pytest

from hpcvar.history.changes import detect, symbol
from hpcvar.history.series import Group, Point, Series
from hpcvar.results.store import Run
from tests.conftest import run_cli


def _series(levels, name="m", n=400, spread=0.2, seed=1, higher_is_worse=True) -> Series:
    rng = np.random.default_rng(seed)
    s = Series(name, "ns", higher_is_worse)
    for i, lvl in enumerate(levels):
        x = rng.lognormal(np.log(lvl), spread, n)
        s.points.append(Point(f"r{i:02d}", f"2026-11-{i + 1:02d}T03:00:00Z", float(np.median(x)), 0, 0, n, x))
    return s


def _detect(*series) -> Group:
    g = Group(("h1", "bench latency"), [], list(series))
    detect(g)
    return g


def test_a_step_is_one_change_at_its_run_and_a_flat_series_none():
    rng = np.random.default_rng(7)
    jitter = 1 + rng.normal(0, 0.02, 12)
    step, flat = _series(1000 * jitter * np.r_[np.ones(6), 1.5 * np.ones(6)], "step"), _series(1000 * jitter, "flat")
    g = _detect(step, flat)
    (c,) = step.changes
    assert c.at == 6 and c.run == "r06" and c.verdict == "degraded" and c.before == (0, 6) and c.after == (6, 12)
    assert 40 < c.test["change_pct"] < 60 and c.ratio_lo > 0.3 and c.symbol in ("---", "??")
    assert step.segments == [(0, 6), (6, 12)] and flat.changes == [] and flat.segments == [(0, 12)]
    assert not (step.latest.confirmed or flat.latest.confirmed)
    assert g.series[1].latest.symbol in ("=", "(=)", "?", "(+)", "(-)", "+", "-")


def _zero_based(levels, name="screen h4 CPU time throttled", n=3, floor=1.0) -> Series:
    """A node's throttled share: exactly 0 on the nights without a quota (n node items a night); the floor of
    the screen's metric (1 percentage point)."""
    rng = np.random.default_rng(3)
    s = Series(name, "%", True, floor)
    for i, lvl in enumerate(levels):
        x = lvl * (1 + rng.normal(0, 0.1, n)) if lvl else np.zeros(n)
        s.points.append(Point(f"r{i:02d}", f"2026-11-{i + 1:02d}T03:00:00Z", float(np.median(x)), 0, 0, n, x))
    return s


def test_a_share_that_leaves_zero_is_a_change_and_one_that_stays_zero_is_none():
    """The throttled share of a node is 0 until a quota appears: the relative change from 0 is infinite (symbol
    ---), the change is found at its run and confirmed; a series of zeros has none, and its last run reads '='."""
    step, flat = _zero_based([0.0] * 6 + [2.5] * 6), _zero_based([0.0] * 12, "screen h1 CPU time throttled")
    _detect(step, flat)
    (c,) = step.changes
    assert c.at == 6 and c.verdict == "degraded" and c.symbol == "---" and c.ratio_lo == np.inf
    assert flat.changes == [] and flat.latest.verdict == "unchanged" and flat.latest.symbol == "="
    from hpcvar.history.views import change_text  # what a person reads: no '+inf%'

    assert change_text(c.test["change_pct"]) == "from 0" and change_text(12.34) == "+12.3%"
    last = _zero_based([0.0] * 8 + [3.0])  # the night the quota appears: the last run starts a change
    _detect(last)
    assert last.changes == [] and last.latest.confirmed and last.latest.verdict == "degraded"


def test_a_share_that_leaves_zero_by_less_than_its_floor_is_no_change():
    """0 then 0.05 %: infinitely more in relative terms, and no change that matters (the screen names a quota from
    1 %). Within the metric's floor: unchanged and '=', in the history and as the last run; the same series without
    a floor is a degradation (what history said before the floor), and 0 then 2.5 % still is one with it."""
    tiny, bare = _zero_based([0.0] * 6 + [0.05] * 6), _zero_based([0.0] * 6 + [0.05] * 6, "bare", floor=0.0)
    last = _zero_based([0.0] * 8 + [0.05], "last")
    _detect(tiny, bare, last)
    assert tiny.changes == [] and tiny.latest.symbol == "=" and not tiny.latest.confirmed
    assert not last.latest.confirmed and last.latest.symbol == "=" and last.latest.diff_hi <= 1.0
    (c,) = bare.changes
    assert c.verdict == "degraded" and c.symbol == "---"
    big = _zero_based([0.0] * 6 + [2.5] * 6)
    _detect(big)
    assert [c.verdict for c in big.changes] == ["degraded"] and big.changes[0].diff_lo > 1.0


def test_compare_keeps_a_move_within_the_floor_unchanged():
    from hpcvar.compare import test_samples, verdict

    row = test_samples(np.zeros(40), np.full(40, 0.05))
    assert row["change_pct"] == np.inf and row["p_value"] < 1e-6
    assert verdict(row, row["p_value"], True) == "degraded"  # no floor: the relative rule alone
    assert verdict(row, row["p_value"], True, floor=1.0) == "unchanged"
    assert verdict(test_samples(np.zeros(40), np.full(40, 3.0)), 1e-9, True, floor=1.0) == "degraded"


def test_bandwidth_up_is_better():
    s = _series([100e6] * 6 + [150e6] * 6, "bw", higher_is_worse=False)
    _detect(s)
    (c,) = s.changes
    assert c.verdict == "improved" and c.symbol in ("+++", "??")


def test_runs_that_differ_more_than_the_change_confirm_nothing():
    # compare's test on pooled samples sees 20% between two halves, but runs inside each half differ by 2x:
    # the change is within the run-to-run variation
    s = _series([1000, 2000, 1000, 2000, 1000, 2000, 1200, 2400, 1200, 2400, 1200, 2400], spread=0.05)
    _detect(s)
    assert s.changes == []


def test_the_last_run_starts_a_change():
    s = _series([1000] * 8 + [3000])
    _detect(s)
    assert s.changes == [] and s.latest.confirmed and s.latest.at == 8 and s.latest.before == (0, 8)
    assert s.latest.verdict == "degraded"


def test_the_last_run_starts_a_change_whatever_pelt_makes_of_the_runs_before():
    """CI: the window that ends with the first noisy run (7 runs, the 7th ~10x) found no change in its last run:
    PELT, with segments of at least 2 runs, put a change at the 6th, and the 7th was left untested. The last run
    is now never part of a candidate: it is tested against the runs since the last change."""
    rng = np.random.default_rng(3)
    for quiet in (1 + rng.normal(0, 0.1, 6), np.r_[1.0, 1.0, 1.0, 1.0, 1.2, 1.25]):
        s = _series(1000 * np.r_[quiet, 10.0], spread=0.1)
        _detect(s)
        assert s.latest is not None and s.latest.confirmed and s.latest.at == 6, (s.changes, s.latest)


def test_one_disturbed_run_in_the_middle_is_no_change():
    s = _series([1000] * 5 + [3000] + [1000] * 5)
    _detect(s)
    assert s.changes == [] and not s.latest.confirmed


@pytest.mark.parametrize("lo, hi, worse, sym", [
    (-0.005, 0.008, True, "="), (-0.015, 0.01, True, "(=)"), (-0.03, 0.04, True, "?"), (-0.02, 0.12, True, "??"),
    (0.002, 0.008, True, "(=)"), (0.02, 0.04, True, "-"), (0.06, 0.09, True, "--"), (0.12, 0.15, True, "---"),
    (-0.008, -0.001, True, "(=)"), (-0.04, -0.02, True, "+"), (-0.09, -0.06, True, "++"), (-0.2, -0.15, True, "+++"),
    (0.12, 0.15, False, "+++"), (-0.04, -0.02, False, "-"), (0.5, math_inf := float("inf"), True, "??"),
])
def test_symbols_follow_hpx(lo, hi, worse, sym):
    """The ladder of HPX's perftest/plot.py (the width first, then '=', '(=)', '?', then by how far the CI reaches;
    a CI inside +-2% is '(=)' before it can be '(-)' or '(+)', as in HPX)."""
    assert symbol(lo, hi, worse) == sym


def _stored(root, command, day, values, host="h1", unit_table="latency.samples"):
    """A bench latency run whose 8-byte samples are ``values``, started on 2026-11-``day``."""
    r = Run.create(command, {"sizes": [8]}, root, ["hpcvar"], {"host": host})
    r.write_table(unit_table, pd.DataFrame({"size_bytes": 8, "iter": np.arange(len(values)),
                                            "rtt_ns": 2 * np.asarray(values), "oneway_ns": np.asarray(values),
                                            "send_ns": np.nan}))
    r.info["started_utc"] = f"2026-11-{day:02d}T03:00:00Z"
    r.finish("complete", {"run": str(r.path)})
    return r


def test_the_command_line_groups_windows_and_writes_csv_for_otava(runs_dir, tmp_path):
    rng = np.random.default_rng(3)
    runs = [_stored(runs_dir, "bench latency", d, rng.lognormal(np.log(1000 if d < 8 else 1600), 0.1, 300))
            for d in range(1, 13)]
    _stored(runs_dir, "bench latency", 5, rng.lognormal(np.log(900), 0.1, 300), host="h2")  # another group
    res = run_cli(["history", "--json"])
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert [g["hosts"] for g in out["groups"]] == [["h1"], ["h2"]]
    (cp,) = out["groups"][0]["change_points"]
    assert cp["at"] == 8 and cp["run"] == runs[7].id and cp["metrics"][0]["metric"] == "latency one-way size=8B"
    # the window up to the 8th run: the last run starts the change (exit code 3)
    res = run_cli(["history", "--hosts", "h1", "--between", "2026-11-01", "2026-11-08T12:00", "--json"])
    assert res.returncode == 3 and json.loads(res.stdout)["last_run_starts_change"], res.stdout
    # CSV: one group only, one row per run, Otava's columns
    res = run_cli(["history", "--format", "csv"])
    assert res.returncode == 2 and "Choose one with --command and --hosts" in res.stderr
    res = run_cli(["history", "--hosts", "h1", "--format", "csv"])
    rows = list(csv.DictReader(io.StringIO(res.stdout)))
    assert list(rows[0])[:6] == ["time", "run", "command", "hosts", "status", "answer"]
    assert [r["run"] for r in rows] == [r.id for r in runs]
    assert float(rows[0]["latency one-way size=8B (ns)"]) == pytest.approx(float(np.median(
        runs[0].read_table("latency.samples")["oneway_ns"])))
    dt.datetime.fromisoformat(rows[0]["time"].replace("Z", "+00:00"))
    # the page
    page = tmp_path / "h.html"
    assert run_cli(["history", "-o", str(page)]).returncode == 0
    assert page.read_text().count("<figure>") == 2


def test_bad_windows_and_outputs_are_named(runs_dir):
    res = run_cli(["history", "--since", "7d", "--between", "14d", "7d"])
    assert res.returncode == 2 and "(--between)" in res.stderr
    res = run_cli(["history", "--between", "7d", "14d"])
    assert res.returncode == 2 and "is empty (--between)" in res.stderr
    res = run_cli(["history", "--since", "last tuesday"])
    assert res.returncode == 2 and "neither a date nor an age (--since)" in res.stderr
    res = run_cli(["history", "-o", "x.txt"])
    assert res.returncode == 2 and "cannot tell the format" in res.stderr
    res = run_cli(["history"])
    assert res.returncode == 0 and "no runs in this window" in res.stdout
    _stored(runs_dir, "bench latency", 1, np.arange(1.0, 50.0))
    res = run_cli(["history", "--metric", "bandwidth"])
    assert res.returncode == 2 and "matches bandwidth (--metric)" in res.stderr, res.stderr


def test_the_json_of_a_change_from_zero_is_standard_json():
    """A change from 0 is infinite in relative terms; what history -o and --json write is standard JSON (no
    Infinity, which jq 1.6 reads as 1.8e308 and JavaScript refuses): the relative CI is null, the CI of the move
    in the metric's unit stays a number."""
    import json

    from hpcvar.history.views import series_json
    from hpcvar.results import dumps, dumps_standard

    step = _zero_based([0.0] * 6 + [2.5] * 6)
    _detect(step)
    doc = series_json(step)
    assert "Infinity" in dumps(doc)  # run.json's writer, read back by Python as it was

    def refuse(name):
        raise ValueError(f"{name} is not standard JSON")

    (c,) = json.loads(dumps_standard(doc), parse_constant=refuse)["changes"]
    assert c["change_ci_pct"] == [None, None] and all(isinstance(v, float) and v > 1.0 for v in c["change_ci"])
