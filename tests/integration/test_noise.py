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
from tests.conftest import best_of_quiet_attempts, hpcvar_cmd, run_cli


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
    for c, t in zip(out["cpus"], trace.cpus, strict=True):
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


def _noise_cpu() -> int:
    return 1 if 1 in collector.parse_cpus("all") else 0


def _record_while_injecting(inject_argv: list[str], cpu: int, path, duration_s: float = 2.0,
                            ready: str | None = None, **collect_kw) -> tuple[str, object]:
    """Start the injector, record ``duration_s`` on ``cpu`` with the collector at a lower real-time priority
    (other users' processes cannot hide the bursts); returns the injector's stdout and the trace. With
    ``ready``, recording starts once the injector's stderr shows that text (the CLI's start-up takes
    seconds on a loaded machine), else 0.3 s after the start."""
    import select

    inj = subprocess.Popen(inject_argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        if ready:
            deadline, seen = time.monotonic() + 60, ""
            while ready not in seen and time.monotonic() < deadline and inj.poll() is None:
                if select.select([inj.stderr], [], [], 0.5)[0]:
                    seen += inj.stderr.readline()
            assert ready in seen, f"the injector did not start: {seen}"
        time.sleep(0.3)
        collector.collect([cpu], duration_s, path, max_rate=100000, rt_prio=10, **collect_kw)
        out, err = inj.communicate(timeout=60)
    finally:
        if inj.poll() is None:
            inj.kill()
            inj.wait()
    assert inj.returncode == 0, err
    return out, read_jtr(path)


def _assert_duration_recovered(median_ns: float, burn_ns: float) -> None:
    """Within 10% (the issue's bound). The injector ends each burst at its due time + the burst (its wake-up
    latency counts in the burst), so what is left over is the switch back: +1-2% here. Before that rule the
    wake-up latency came on top: +6-8% here and +12.7% on one CI machine."""
    assert median_ns == pytest.approx(burn_ns, rel=0.10), (
        f"median recorded detour {median_ns / 1e3:.1f} us for an injected burst of {burn_ns / 1e3:.1f} us")


def _recovered(t, burn_ns: float) -> dict:
    """Rate, median duration and median period of the recorded events near the injected duration."""
    c = t.cpus[0]
    ns = 1e9 / t.freq_hz
    d, s = c.duration * ns, recorded_starts(c) * ns
    near = (d > 0.75 * burn_ns) & (d < 1.5 * burn_ns)  # events near the injected duration only
    return {"rate": near.sum() / (c.length * ns / 1e9), "duration_ns": float(np.median(d[near])),
            "period_ns": float(np.median(np.diff(s[near])))}


def _assert_recovered(t, period_ns: float, burn_ns: float) -> None:
    """Rate, duration and period within 10% (the issue's bound), and the period found as a source."""
    r = _recovered(t, burn_ns)
    assert r["rate"] == pytest.approx(1e9 / period_ns, rel=0.10), r
    _assert_duration_recovered(r["duration_ns"], burn_ns)
    assert r["period_ns"] == pytest.approx(period_ns, rel=0.10), r
    sources = analysis.sources_by_class(t, t.cpus[0])
    # CI once found it only as a 50 Hz source's harmonic: the bursts that held a tick were just over 1 ms, the
    # others just under (tests/unit/test_noise_formats.py, a train that straddles a class edge)
    assert any(abs(src["hz"] - 100.0) < 1.0 for src in sources), \
        [(round(src["hz"], 2), src["class_ns"], src.get("folded_hz"), src.get("partial_hz")) for src in sources]


def test_injector_is_recovered_by_the_collector(tmp_path):
    cpu = _noise_cpu()
    period_ns, burn_ns = 10e6, 1e6

    def measure():
        out, t = _record_while_injecting(collector.InjectSpec([cpu], 3.5, period_ns, burn_ns, rt_prio=50).argv(),
                                         cpu, tmp_path / "t.jtr")
        rep = collector.parse_inject_result(out)
        if not rep[0]["realtime"]:
            pytest.skip("SCHED_FIFO is not allowed here: the injector cannot promise its bursts")
        return rep, t

    def recovered(m):
        rep, t = m
        assert 0 <= rep[0]["late_ns_p50"] < burn_ns and rep[0]["overruns"] < rep[0]["bursts"] / 2, rep
        _assert_recovered(t, period_ns, burn_ns)

    # timings on a shared VM: time the hypervisor takes shows up as longer detours (tests/conftest.py)
    best_of_quiet_attempts(measure, recovered, what="100 Hz x 1 ms injected and recorded")


def test_timer_method_records_each_burst_with_its_length(tmp_path):
    """The timer method sleeps between deadlines, so it sees a burst at the first deadline the burst covers, never
    when it began. Recorded from that deadline, a detour was short by half an interval on average (1.89 ms for the
    testbed's 2 ms bursts at 200 us); recorded from the midpoint of the previous wake-up and the deadline, it is
    right on average, provided the deadlines do not fall at the same point of every burst: with a period (10 ms) a
    multiple of the interval (400 us) they did, and every burst of a recording was off by the same amount, up to
    200 us (20%) either way. Dithered deadlines spread that error over the bursts: their recorded lengths vary by
    about the interval (an IQR near 150 us, against under 20 us on a fixed grid), and their mean is right (0.99-1.02
    ms in three recordings here)."""
    cpu = _noise_cpu()
    period_ns, burn_ns, interval_ns = 10e6, 1e6, 400e3

    def measure():
        out, t = _record_while_injecting(collector.InjectSpec([cpu], 3.5, period_ns, burn_ns, rt_prio=50).argv(),
                                         cpu, tmp_path / "t.jtr", method="timer", interval_ns=interval_ns)
        if not collector.parse_inject_result(out)[0]["realtime"]:
            pytest.skip("SCHED_FIFO is not allowed here: the injector cannot promise its bursts")
        return t

    def recovered(t):
        r = _recovered(t, burn_ns)
        assert r["rate"] == pytest.approx(1e9 / period_ns, rel=0.10), r
        d = t.cpus[0].duration * 1e9 / t.freq_hz
        d = d[(d > 0.5 * burn_ns) & (d < 1.5 * burn_ns)]
        _assert_duration_recovered(float(d.mean()), burn_ns)  # the mean: each burst is off by up to an interval
        q1, q3 = np.percentile(d, [25, 75])
        assert q3 - q1 > 0.25 * interval_ns, f"IQR {(q3 - q1) / 1e3:.0f} us: the deadlines are not dithered"
        assert t.meta["method"] == "timer" and t.meta["detour_start"] == "midpoint"
        assert t.meta["deadlines"] == "dithered"

    best_of_quiet_attempts(measure, recovered, what="bursts recorded by the timer method")


def test_replayed_trace_is_recovered_by_the_collector(tmp_path):
    """hpcvar noise synth a 100 Hz x 1 ms trace, hpcvar noise inject --trace it on one CPU while recording there:
    the recorded detours recover its period and duration."""
    cpu = _noise_cpu()
    period_ns, burn_ns = 10e6, 1e6
    synth = tmp_path / "p.jtr"
    run_cli(["noise", "synth", str(synth), "--periodic", "100Hz:1ms", "--length", "1s"], timeout=120, check=True)
    argv = hpcvar_cmd() + ["noise", "inject", "--cpus", str(cpu), "--trace", str(synth), "--time", "3.5s", "--json"]

    def measure():
        out, t = _record_while_injecting(argv, cpu, tmp_path / "t.jtr", ready="replaying")
        rep = json.loads(out)["cpus"]
        if not rep[0]["realtime"]:
            pytest.skip("SCHED_FIFO is not allowed here: the injector cannot promise its bursts")
        return rep, t

    def looped(m):
        assert m[0][0]["bursts"] >= 300  # 100/s over 3.5 s, the 1 s trace looped

    best_of_quiet_attempts(measure, lambda m: _assert_recovered(m[1], period_ns, burn_ns), always=looped,
                           what="a 100 Hz x 1 ms trace replayed and recorded")
