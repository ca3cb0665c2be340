"""The collector and the injector on this machine (short real recordings; the machine may be loaded)."""

from __future__ import annotations

import json
import subprocess
import time

import numpy as np
import pytest

from hpcvar._native import find_program
from hpcvar.errors import MissingToolError
from hpcvar.noise import analysis, collector
from hpcvar.noise.formats import read_jtr
from hpcvar.noise.trace import recorded_starts
from hpcvar.results import Run
from tests.conftest import run_cli


def _have_tools() -> bool:
    try:
        find_program("hv_noise_collect")
        find_program("hv_noise_inject")
        return True
    except MissingToolError:
        return False


pytestmark = pytest.mark.skipif(not _have_tools(), reason="hv_noise_collect/hv_noise_inject are not built")


def test_record_two_seconds_end_to_end(runs_dir):
    res = run_cli(["noise", "record", "--cpus", "all", "--duration", "2s", "--json", "--no-plots"], timeout=120,
                  check=True)
    out = json.loads(res.stdout)
    run = Run.open(out["run"])
    assert run.info["status"] == "complete"
    for name in ("noise.summary", "noise.periods", "noise.sources"):
        assert run.has_table(name)
    trace = read_jtr(run.path / "trace.jtr")
    assert trace.meta["invariant_tsc"] == 1 and trace.meta["proc_before"]["interrupts"]
    for c, t in zip(out["cpus"], trace.cpus):
        for k in ("cpu", "t_min_ns", "events", "events_per_s", "noise_fraction", "max_ns", "p50_ns", "p99_ns",
                  "periods"):
            assert k in c
        assert 0 < c["t_min_ns"] < 50
        assert c["events"] > 0 and 0 <= c["noise_fraction"] < 1
        assert t.length == t.meta["recorded_cycles"]  # the (d, g) rule keeps the recorded length
        assert abs(c["length_s"] - 2.0) < 0.2
    hz = analysis.kernel_hz()
    if hz is None:
        pytest.skip("CONFIG_HZ is unknown here (no /proc/config.gz or /boot/config-*)")
    # the tick is a fundamental or harmonic of a periodic source on at least one CPU
    assert any(c["tick"]["found"] for c in out["cpus"]), [c["periods"] for c in out["cpus"]]


def test_injector_is_recovered_by_the_collector(tmp_path):
    cpu = 1 if 1 in collector.parse_cpus("all") else 0
    period_ns, burn_ns = 10e6, 1e6
    inj = subprocess.Popen(collector.InjectSpec([cpu], 3.5, period_ns, burn_ns, rt_prio=50).argv(),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(0.3)
        # the collector at a lower real-time priority: other users' processes cannot hide the bursts
        collector.collect([cpu], 2.0, tmp_path / "t.jtr", max_rate=100000, rt_prio=10)
        out, _ = inj.communicate(timeout=30)
    finally:
        if inj.poll() is None:
            inj.kill()
            inj.wait()
    rep = collector.parse_inject_result(out)
    if not rep[0]["realtime"]:
        pytest.skip("SCHED_FIFO is not allowed here: the injector cannot promise its bursts")
    t = read_jtr(tmp_path / "t.jtr")
    c = t.cpus[0]
    ns = 1e9 / t.freq_hz
    d, s = c.duration * ns, recorded_starts(c) * ns
    near = (d > 0.75 * burn_ns) & (d < 1.5 * burn_ns)  # events near the injected duration only
    rate = near.sum() / (c.length * ns / 1e9)
    assert rate == pytest.approx(1e9 / period_ns, rel=0.10)
    assert np.median(d[near]) == pytest.approx(burn_ns, rel=0.10)
    assert np.median(np.diff(s[near])) == pytest.approx(period_ns, rel=0.10)
    assert any(abs(src["hz"] - 100.0) < 1.0 for src in analysis.sources_by_class(t, c))
