"""hpcvar history on real runs (issue 26): a dozen short noise recordings, the 7th and later under injected noise,
give one change at the 7th with its symbol; a dozen without injection give none."""

from __future__ import annotations

import csv
import io
import json
import shutil
import statistics
import subprocess
import sys
import time

import pytest

from tests.conftest import best_of_quiet_attempts, realtime_allowed, run_cli, wait_for_child

# 0.5 s on CPU 0 with the collector SCHED_FIFO: other users' processes cannot preempt it (the machine is shared),
# the injector (SCHED_FIFO 50) can
RECORD = ["noise", "record", "--cpus", "0", "--duration", "0.5s", "--rt-prio", "10", "--no-plots", "--json"]
FRACTION = "noise cpu0 fraction lost per 100 ms"
# Quiet recordings of this shared VM lose 0.7-1.7% of CPU 0, and small sustained shifts (-21% over three runs) are
# real changes of its kernel noise that compare's 10% would report: both series are judged at 50% (the injected
# noise multiplies the fraction lost by about ten)
THRESHOLD = ["--threshold", "50"]

pytestmark = pytest.mark.skipif(not realtime_allowed(), reason=(
    "the recordings and the injected noise need SCHED_FIFO (root, CAP_SYS_NICE or an RLIMIT_RTPRIO)"))


def _record(runs, n: int) -> None:
    for _ in range(n):
        run_cli(RECORD + ["--runs-dir", str(runs)], check=True, timeout=120)


def _history(runs, *extra):
    res = run_cli(["history", "--runs-dir", str(runs), "--json", *THRESHOLD, *extra], timeout=120)
    assert res.returncode in (0, 3), res.stdout + res.stderr
    return res.returncode, json.loads(res.stdout)


def _quiet(runs):
    shutil.rmtree(runs, ignore_errors=True)
    runs.mkdir()
    _record(runs, 12)
    return _history(runs)


def _no_change(result) -> None:
    rc, res = result
    (g,) = res["groups"]
    assert len(g["runs"]) == 12
    assert g["change_points"] == [], g["change_points"]
    assert rc == 0 and not res["last_run_starts_change"], g["last_run_changes"]


def test_one_change_at_the_seventh_run_under_injected_noise_and_none_without(tmp_path):
    quiet = tmp_path / "quiet"
    _, res = best_of_quiet_attempts(lambda: _quiet(quiet), _no_change, what="twelve recordings without injection")
    assert [s["metric"] for s in res["groups"][0]["series"]] == [FRACTION]  # the headline metric of noise record

    noisy = tmp_path / "noisy"
    page = tmp_path / "history.html"

    def measure():
        shutil.rmtree(noisy, ignore_errors=True)
        noisy.mkdir()
        for d in sorted(p for p in quiet.iterdir() if (p / "run.json").is_file())[:6]:
            shutil.copytree(d, noisy / d.name)
        # 1 ms taken every 10 ms on CPU 0 (10%: the recordings lost about 1% before)
        inject = subprocess.Popen([sys.executable, "-m", "hpcvar", "noise", "inject", "--cpus", "0", "--period",
                                   "10ms", "--burn", "1ms", "--duration", "300s"], stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE, text=True)
        try:
            wait_for_child(inject)
            _record(noisy, 1)
            # run.json's start is to the second and a 0.5 s recording can start within the second of the one
            # before: the window that ends at the 8th's start below must hold the 7th
            time.sleep(1.1)
            _record(noisy, 5)
        finally:
            inject.terminate()
            inject.wait(timeout=30)
        return _history(noisy, "-o", str(page))  # the JSON, and the page written by the same call

    def one_change_at_the_seventh(result) -> None:
        # a burst of the shared VM in one of the injected runs made a second change point once (CI, 2026-11-29)
        (g,) = result[1]["groups"]
        assert [c["at"] for c in g["change_points"]] == [7], [(c["at"], c["metrics"]) for c in g["change_points"]]

    rc, res = best_of_quiet_attempts(measure, one_change_at_the_seventh, what="six recordings under injected noise")
    (g,) = res["groups"]
    (cp,) = g["change_points"]
    assert cp["at"] == 7 and cp["run"] == g["runs"][6]["run"]
    (moved,) = cp["metrics"]
    # the injected 10% on a quiet level of 0.7-1.7% (earlier sessions) or 2.4-3.6% (a VM of 2026-11-28 whose host took
    # more of it: +259% in two CI runs): the level at least doubles on any host whose own noise is under 10%
    assert moved["metric"] == FRACTION and moved["verdict"] == "degraded" and moved["change_pct"] > 100
    # HPX's symbols: worse, or '??' (a CI wider than 10%): a change of several times its level is known roughly
    assert moved["symbol"] in ("-", "--", "---", "??"), moved
    assert rc == 0 and not res["last_run_starts_change"]  # the 12th run is no new change

    # the window that ends with the 7th run: the last run starts the change (exit code 3 for cron)
    eighth = g["runs"][7]["started_utc"]
    rc7, res7 = _history(noisy, "--between", g["runs"][0]["started_utc"], eighth)
    assert [r["run"] for r in res7["groups"][0]["runs"]] == [r["run"] for r in g["runs"][:7]]
    assert rc7 == 3 and res7["last_run_starts_change"]
    assert [c["metric"] for c in res7["groups"][0]["last_run_changes"]] == [FRACTION]

    # the CSV Otava reads: a time column, attributes, one numeric column per metric (and its CI)
    out = run_cli(["history", "--runs-dir", str(noisy), "--format", "csv", *THRESHOLD], timeout=120).stdout
    rows = list(csv.DictReader(io.StringIO(out)))
    assert [r["run"] for r in rows] == [r["run"] for r in g["runs"]]
    values = [float(r[f"{FRACTION}"]) for r in rows]
    (series,) = g["series"]
    assert values == [p["median"] for p in series["points"]]  # the CSV holds the figures the JSON gives
    # the level moved: judged on the medians of each side (one quiet 0.5 s recording of this shared VM can lose 5%
    # of its CPU to a burst of the host's: CI, 2026-11-28; the injected noise takes about 10%: at least twice)
    assert statistics.median(values[6:]) > 2 * statistics.median(values[:6]), values
    # the page: self-contained, the change and its symbol on it
    html = page.read_text()
    assert "data:image/png;base64," in html and "<script" not in html and "src=\"http" not in html
    assert g["runs"][6]["run"] in html and f'<td class="sym">{moved["symbol"]}</td>' in html
