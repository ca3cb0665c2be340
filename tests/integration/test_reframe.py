"""hpcvar's ReFrame test library (hpcvar.integrations.reframe) run by reframe-hpc from PyPI with ReFrame's local
scheduler: the performance variables are hpcvar's figures, references written by 'hpcvar export reframe-refs'
judge them (a bound the run exceeds fails the test in its performance phase), a characterization runs under it.
The Slurm scheduler runs it in tests/testbed/test_reframe_slurm.py."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import best_of_quiet_attempts

pytest.importorskip("reframe", reason="the test extra installs reframe-hpc")

LIBRARY = Path(__file__).resolve().parents[2] / "src" / "hpcvar" / "integrations" / "reframe.py"
HPCVAR = str(Path(sys.executable).parent / "hpcvar")
LOCAL = """site_configuration = {
    'systems': [{'name': 'hpcvarci', 'descr': 'hpcvar CI', 'hostnames': ['.*'],
                 'partitions': [{'name': 'default', 'scheduler': 'local', 'launcher': 'local',
                                 'environs': ['builtin']}]}],
    'environments': [{'name': 'builtin'}],
}
"""


def reframe(tmp: Path, config: str, *args: str, env: dict | None = None, timeout: float = 600):
    """Run reframe on the library with ``config``; returns (exit code, the test cases of its JSON report, output)."""
    tmp.mkdir(parents=True, exist_ok=True)
    cfg = tmp / "settings.py"
    cfg.write_text(config)
    report = tmp / "report.json"
    exe = shutil.which("reframe", path=str(Path(sys.executable).parent)) or "reframe"
    e = {**os.environ, "RFM_COLORIZE": "n", "HOME": str(tmp), **(env or {})}
    res = subprocess.run([exe, "-C", str(cfg), "-c", str(LIBRARY), "-S", f"hpcvar={HPCVAR}", "--prefix",
                          str(tmp / "rfm"), "--report-file", str(report), *args, "-r"], env=e, capture_output=True,
                         text=True, timeout=timeout, cwd=tmp)
    cases = json.loads(report.read_text())["runs"][0]["testcases"] if report.exists() else []
    return res.returncode, cases, res.stdout + res.stderr


def _perf(case: dict) -> dict:
    return {k.split(":")[-1]: v for k, v in case["perfvalues"].items()}


def test_node_noise_figures_and_references_from_hpcvar(tmp_path):
    rc, (case,), out = reframe(tmp_path / "a", LOCAL, "-n", "hpcvar_node_noise_check", "-S", "duration=1s",
                               "-S", "cpus=0")
    assert rc == 0 and case["result"] == "pass", out
    perf = _perf(case)
    assert set(perf) == {"noise_lost_pct_cpu0", "noise_longest_detour_us_cpu0", "noise_detours_per_s_cpu0"}
    # the values are hpcvar's own figures of the run the test stored
    kept = Path(case["outputdir"])
    refs = json.loads((kept / "hpcvar-perf.json").read_text())["reference"]["*"]
    assert perf["noise_lost_pct_cpu0"][0] == pytest.approx(refs["noise_lost_pct_cpu0"][0])
    assert perf["noise_lost_pct_cpu0"][4] == "%" and 0 <= perf["noise_lost_pct_cpu0"][0] < 100
    runs = kept / "hpcvar-runs"
    res = subprocess.run([HPCVAR, "runs", "list", "--runs-dir", str(runs), "--json"], capture_output=True, text=True)
    assert [r["command"] for r in json.loads(res.stdout)["runs"]] == ["noise record"]

    # references written by hpcvar export reframe-refs judge the next run: only the bad side is bounded
    (ref_run,) = json.loads(res.stdout)["runs"]
    good = tmp_path / "good.json"
    subprocess.run([HPCVAR, "export", "reframe-refs", ref_run["id"], "--runs-dir", str(runs), "--drop-label", "node",
                    "-o", str(good)], check=True)
    doc = json.loads(good.read_text())
    lost = doc["reference"]["*"]["noise_lost_pct_cpu0"]
    assert lost[1] is None and lost[2] >= 0 and lost[3] == "%"  # higher is worse: no lower bound
    # a reference far above any noise passes; one far below fails the test in its performance phase (the other
    # figures left unbounded: bounds from one run do not hold the run-to-run variation of a shared machine)
    doc["reference"]["*"] = {k: [v[0], None, None, v[3]] for k, v in doc["reference"]["*"].items()}
    doc["reference"]["*"]["noise_lost_pct_cpu0"] = [100.0, None, 0.0, "%"]
    good.write_text(json.dumps(doc))
    rc, (case,), out = reframe(tmp_path / "b", LOCAL, "-n", "hpcvar_node_noise_check", "-S", "duration=1s",
                               "-S", "cpus=0", "-S", f"references={good}")
    assert rc == 0 and case["result"] == "pass", out
    assert _perf(case)["noise_lost_pct_cpu0"][1] == 100.0  # the reference was applied
    bad = tmp_path / "bad.json"
    doc["reference"]["*"]["noise_lost_pct_cpu0"] = [1e-6, None, 0.0, "%"]
    bad.write_text(json.dumps(doc))
    rc, (case,), out = reframe(tmp_path / "c", LOCAL, "-n", "hpcvar_node_noise_check", "-S", "duration=1s",
                               "-S", "cpus=0", "-S", f"references={bad}")
    assert rc != 0 and case["result"] == "fail" and case["fail_phase"] == "performance", out
    assert "noise_lost_pct_cpu0" in (case["fail_reason"] or ""), case["fail_reason"]


def unreliable(result) -> str | None:
    """An attempt whose hpcvar answered UNRELIABLE (exit 4: other processes' load during the measurement) failed
    its sanity by design: disturbed, not a defect (for tests.conftest.best_of_quiet_attempts)."""
    return next(("hpcvar answered UNRELIABLE" for c in result[1] if "exited with 4" in (c["fail_reason"] or "")),
                None)


@pytest.mark.mpi
def test_characterize_under_reframe(tmp_path):
    attempt = iter(range(100))

    def measure():
        return reframe(tmp_path / f"try{next(attempt)}", LOCAL, "-n", "hpcvar_characterize_check",
                       "-S", "steps=latency")

    def passed(result):
        rc, cases, out = result
        assert rc == 0 and [c["result"] for c in cases] == ["pass"], out[-3000:]

    rc, (case,), out = best_of_quiet_attempts(measure, passed, disturbed=unreliable,
                                              what="a characterization under ReFrame")
    perf = _perf(case)
    assert any(k.startswith("latency_us_") and k.endswith("_8B_p50") for k in perf), sorted(perf)
    assert any(k.startswith("pingpong_bandwidth_MBps_") for k in perf), sorted(perf)


def test_an_unreliable_or_failed_hpcvar_fails_sanity(tmp_path):
    # a recording that cannot start (a CPU that does not exist): hpcvar exits 2, the test fails its sanity
    rc, (case,), out = reframe(tmp_path, LOCAL, "-n", "hpcvar_node_noise_check", "-S", "duration=1s",
                               "-S", "cpus=4095")
    assert rc != 0 and case["result"] == "fail" and case["fail_phase"] == "sanity", out
    assert "hpcvar exited with 2" in (case["fail_reason"] or ""), case["fail_reason"]


def test_the_library_does_not_load_into_hpcvar():
    """Nothing in hpcvar imports the ReFrame module (it needs reframe); the library is a file ReFrame loads."""
    code = "import sys, hpcvar.cli, hpcvar.export.reframe; assert 'reframe' not in sys.modules"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0
