"""The main job end to end: characterize --quick (what make demo runs), resume, and compare
flagging a degradation made with the noise injector."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from hpcvar.results import Run
from tests.conftest import best_of_quiet_attempts, realtime_allowed, run_cli, wait_for_child

pytestmark = pytest.mark.mpi


@pytest.mark.timeout(900)
def test_demo_is_a_complete_quick_characterization(runs_dir):
    def answer(res):
        # the answer comes first: OK, or UNRELIABLE with its reason (other jobs' load on this machine, a preempted
        # collector); never DEGRADED on an idle machine, and never a "bad" built on suspect input (issue 31)
        first = res.stdout.splitlines()[0] if res.stdout else ""
        assert (res.returncode, first[:3]) == (0, "OK:") or (res.returncode == 4 and first.startswith(
            "UNRELIABLE: ") and len(first) > 20), res.stdout + res.stderr

    def not_idle(res):
        # the demo's own finding that other processes ran during a measurement: the machine was not idle (one CI
        # run: CPU 0's collector preempted 143 times while CPU 1 lost 5.5 % at 19,573 detours/s, DEGRADED)
        first = res.stdout.splitlines()[0] if res.stdout else ""
        return "the machine was not idle during the demo" if "other processes shared CPU" in first else None

    res = best_of_quiet_attempts(lambda: run_cli(["demo"], timeout=900), answer, tries=2, disturbed=not_idle,
                                 what="the demo's answer")
    first = res.stdout.splitlines()[0]
    run_path = re.search(r"characterization stored in (\S+)", res.stdout).group(1)
    report = re.search(r"report: (\S+)", res.stdout).group(1)
    run = Run.open(run_path)
    steps = run.info["steps"]
    expected = {"latency", "queues-posted", "queues-unexpected", "ace", "noise", "jitter", "fanin"}
    assert {n for n, s in steps.items() if s["status"] == "complete"} == expected, steps
    assert steps["sharing"]["status"] == "skipped" and "testbed" in steps["sharing"]["reason"]
    assert steps["screen"]["status"] == "skipped" and "3 nodes" in steps["screen"]["reason"]
    children = {c.info["params"]["step"]: c for c in run.children()}
    assert set(children) == expected
    assert all(c.info["status"] == "complete" for c in children.values())
    html = open(report).read()
    # one section per step, figures inlined, headline numbers at the top
    for title in ("Point-to-point latency", "posted-receive queue", "unexpected-message queue", "ACE",
                  "OS jitter", "Fan-in"):
        assert title.lower() in html.lower(), title
    assert html.count("data:image/png;base64,") >= 10
    assert html.index("Summary") < html.index("Point-to-point latency")
    # the demo does not warn about its own defaults (fan-in's ranks sleep when they outnumber the cores)
    assert "ranks share" not in res.stdout + res.stderr
    # the report in a real browser: the verdict first, every step listed (skipped ones with their reason),
    # every headline judged, and no figure whose legend covers its data
    from pathlib import Path

    from tests.integration.test_report_browser import CHROMIUM, legend_overlaps, open_in_chromium

    if CHROMIUM is None:
        pytest.skip("needs Debian's chromium for the browser part (apt-get install chromium)")
    seen = open_in_chromium(Path(report))
    assert seen["verdict_visible"] and seen["verdict_top"] < seen["first_section_top"]
    rows = {r[0]: r for r in seen["steps"]}
    assert set(rows) == expected | {"sharing", "screen"}, rows
    assert rows["sharing"][1] == "skipped" and "needs 3 nodes" in rows["sharing"][2]
    assert all(rows[s][1] == "complete" and rows[s][3].startswith(run.id + "/steps/") for s in expected)
    assert seen["findings"] >= 10 and "Headlines:" in seen["verdict_text"]
    lines = [x for x in seen["verdict_text"].splitlines() if x.strip()]
    assert lines[0] == "Verdict" and lines[1].startswith(first.split(":")[0]), seen["verdict_text"][:300]
    assert seen["errors"] == [] and seen["broken"] == []
    assert all(u.startswith(("file:", "data:")) for u in seen["requests"])
    overlaps = legend_overlaps(seen["images"])
    assert len(overlaps) >= 10 and all(v == "0" for v in overlaps.values()), overlaps
    # every measured step gives compare raw-sample metrics; a run compared with itself is unchanged
    from hpcvar.compare import compare_runs, metrics_of

    metrics = metrics_of(run)
    for step in ("latency", "queues-posted", "queues-unexpected", "ace", "noise", "fanin"):
        assert any(name.startswith(f"{step}: ") for name in metrics), step
    same = compare_runs(run, run)
    assert same["degraded"] == [] and same["improved"] == []


def _answered(res) -> dict:
    """A characterization's JSON; its exit code is its answer's (0 OK, 3 DEGRADED, 4 UNRELIABLE: other jobs' load
    on a shared machine makes a quick one UNRELIABLE), anything else is a failure."""
    assert res.returncode in (0, 3, 4), res.stdout + res.stderr
    out = json.loads(res.stdout)
    assert out["answer"]["exit_code"] == res.returncode, out["answer"]
    return out


def test_characterize_resume_runs_only_missing_steps(runs_dir):
    args = ["characterize", "--quick", "--steps", "latency,queues-unexpected", "--json"]
    first = _answered(run_cli(args))
    run = Run.open(first["run"])
    kept = run.info["steps"]["latency"]["run"]
    # forget the second step, as if the characterization had been interrupted there
    lost = run.info["steps"].pop("queues-unexpected")["run"]
    import shutil

    shutil.rmtree(run.path / "steps" / lost)
    run.info["status"] = "interrupted"
    run.save()
    again = _answered(run_cli(args + ["--resume", run.id]))
    assert again["run"] == first["run"]
    info = Run.open(run.path).info
    assert info["steps"]["latency"]["run"] == kept  # not measured again
    assert info["steps"]["queues-unexpected"]["status"] == "complete"
    assert info["status"] == "complete"
    assert len(list((run.path / "steps").iterdir())) == 2


def test_compare_same_machine_unchanged_and_injected_noise_degraded(runs_dir):
    if not realtime_allowed():
        pytest.skip("the injected noise needs SCHED_FIFO (root, CAP_SYS_NICE or an RLIMIT_RTPRIO): without it the "
                    "burner shares the CPUs fairly with the ranks and delays no round trip")
    # 4 MiB round trips of about 1 ms: 200 of them span about 0.2 s
    lat = ["bench", "latency", "--np", "2", "--sizes", "4MiB", "--iters", "200", "--min-iters", "200",
           "--time-per-size", "60s", "--json"]

    def two_runs():
        return [json.loads(run_cli(lat, check=True).stdout)["run"] for _ in range(2)]

    def unchanged(pair):
        res = run_cli(["compare", *pair, "--threshold", "25", "--json"])
        assert res.returncode == 0 and json.loads(res.stdout)["degraded"] == [], res.stdout + res.stderr

    # two back-to-back runs on this shared VM have differed by 11% (4 MiB copies through shared memory:
    # 493 vs 547 us in one CI run), so "unchanged" is judged at 25%; the injected noise below is far above
    # it. A host whose hypervisor takes the CPUs doubled it once (530 vs 1110 us): best of 3 quiet attempts
    base, _ = best_of_quiet_attempts(two_runs, unchanged, what="two back-to-back 4 MiB latency runs")
    # 3 ms of noise every 4 ms on both CPUs while measuring: no 1 ms round trip fits between two
    # bursts (with shorter bursts the free windows hold whole round trips and the median does not move)
    inject = subprocess.Popen([sys.executable, "-m", "hpcvar", "noise", "inject", "--cpus", "all", "--period", "4ms",
                               "--burn", "3ms", "--time", "120s"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              text=True)
    try:
        wait_for_child(inject)
        noisy = json.loads(run_cli(lat, check=True).stdout)["run"]
    finally:
        inject.terminate()
        inject.wait(timeout=30)
    res = run_cli(["compare", base, noisy, "--json"])
    assert res.returncode == 3, res.stdout + res.stderr
    out = json.loads(res.stdout)
    assert out["degraded"] == ["latency one-way size=4MiB"]
    print("injected noise: change", out["metrics"][0]["change_pct"])
    assert out["metrics"][0]["change_pct"] > 25, out["metrics"][0]
