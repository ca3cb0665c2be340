"""Jitter traces: the (d, g) rule, formats and their round trips, bad input, synthesis, periodicity."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from hpcvar.errors import InputFileError, UsageError
from hpcvar.noise import analysis, collector
from hpcvar.noise.formats import load_trace, read_jtr, save_trace, sniff_format
from hpcvar.noise.trace import CpuTrace, JitterTrace, cpu_trace_from_events, recorded_starts
from tests.conftest import run_cli


def _trace(cpus=2, seed=3) -> JitterTrace:
    comps = [collector.parse_component("periodic:250Hz:5us", "x"), collector.parse_component("poisson:50/s:40us", "x")]
    return collector.synth(comps, 2.0, cpus, 2.4e9, seed)


def _same(a: JitterTrace, b: JitterTrace) -> None:
    assert a.freq_hz == b.freq_hz
    assert [c.cpu for c in a.cpus] == [c.cpu for c in b.cpus]
    for x, y in zip(a.cpus, b.cpus, strict=True):
        np.testing.assert_array_equal(x.duration, y.duration)
        np.testing.assert_array_equal(x.gap, y.gap)
        assert x.meta.get("lead_in_cycles", 0) == y.meta.get("lead_in_cycles", 0)


def test_wrap_rule_preserves_length_and_starts():
    c = cpu_trace_from_events(0, [10, 50, 90], [5, 10, 3], 100)
    assert c.duration.tolist() == [5, 10, 3]
    assert c.gap.tolist() == [35, 30, 7 + 10]  # last gap: tail 7 + lead-in 10
    assert c.length == 100
    assert recorded_starts(c).tolist() == [10, 50, 90]
    with pytest.raises(ValueError):
        cpu_trace_from_events(0, [10, 12], [5, 1], 100)  # overlap


@pytest.mark.parametrize("ext", ["jtr", "txt", "csv"])
def test_round_trip_all_cpus(tmp_path, ext):
    t = _trace()
    p = tmp_path / f"t.{ext}"
    save_trace(t, p)
    _same(t, load_trace(p))


def test_round_trip_loggopsim_one_cpu(tmp_path):
    t = _trace()
    p = tmp_path / "t.noise"
    save_trace(t, p, cpu_index=1)
    assert not p.read_text().endswith("\n")  # LogGOPSim reads a final empty line as an event
    u = load_trace(p)
    _same(JitterTrace(t.freq_hz, [t.cpus[1]]), u)
    with pytest.raises(UsageError, match="one CPU"):
        save_trace(t, tmp_path / "all.noise")


def test_sniffing_without_extension(tmp_path):
    t = _trace(1)
    for fmt in ("jtr", "text", "csv", "loggopsim"):
        p = tmp_path / f"trace_{fmt}"
        save_trace(t, p, fmt)
        assert sniff_format(p) == fmt
        _same(t, load_trace(p))


def test_jtr_bad_input_names_file_and_byte(tmp_path):
    t = _trace(1)
    p = tmp_path / "t.jtr"
    save_trace(t, p)
    raw = p.read_bytes()
    (tmp_path / "short.jtr").write_bytes(raw[:-5])
    with pytest.raises(InputFileError, match="truncated") as e:
        read_jtr(tmp_path / "short.jtr")
    assert "short.jtr:byte" in e.value.where
    bad = bytearray(raw)
    bad[8:12] = struct.pack("<I", 7)
    (tmp_path / "v7.jtr").write_bytes(bytes(bad))
    with pytest.raises(InputFileError, match="version 7") as e:
        read_jtr(tmp_path / "v7.jtr")
    assert e.value.where.endswith("v7.jtr:byte 8")
    neg = t.cpus[0]
    neg.duration[3] = -4
    save_trace(t, tmp_path / "neg.jtr")
    with pytest.raises(InputFileError, match="negative duration -4 at CPU 0 event 3"):
        read_jtr(tmp_path / "neg.jtr")
    (tmp_path / "junk.jtr").write_bytes(b"not a trace at all, really not" * 2)
    with pytest.raises(InputFileError, match="bad magic"):
        read_jtr(tmp_path / "junk.jtr")


@pytest.mark.parametrize("body,line,what", [
    ("# freq_hz 1e9\n10 20\n10 x\n", 3, "not two integers"),
    ("# freq_hz 1e9\n10 20\n\n-1 5\n", 4, "negative duration"),
    ("# freq_hz 1e9\n1 2 3\n", 2, "not two integers"),
])
def test_text_bad_lines_name_file_and_line(tmp_path, body, line, what):
    p = tmp_path / "t.txt"
    p.write_text(body)
    with pytest.raises(InputFileError, match=what) as e:
        load_trace(p)
    assert e.value.where == f"{p}:{line}"


def test_text_needs_a_frequency(tmp_path):
    p = tmp_path / "t.txt"
    p.write_text("10 20\n")
    with pytest.raises(UsageError, match="frequency"):
        load_trace(p)
    assert load_trace(p, freq_hz=2e9).freq_hz == 2e9


def test_loggopsim_and_csv_bad_lines(tmp_path):
    p = tmp_path / "n.noise"
    p.write_text("100\t5\n50\t5\n")
    with pytest.raises(InputFileError, match="before the previous") as e:
        load_trace(p)
    assert e.value.where == f"{p}:2"
    q = tmp_path / "n.csv"
    q.write_text("# freq_hz=1e9\ncpu,duration_cycles,gap_cycles\n0,5,10\n0,-5,10\n")
    with pytest.raises(InputFileError, match="negative") as e:
        load_trace(q)
    assert e.value.where == f"{q}:4"


def test_cli_convert_reports_file_and_line(tmp_path):
    p = tmp_path / "bad.txt"
    p.write_text("# freq_hz 1e9\n5 5\n5 five\n")
    res = run_cli(["noise", "convert", str(p), str(tmp_path / "o.jtr")])
    assert res.returncode == 2
    assert f"({p}:3)" in res.stderr and res.stderr.startswith("error:")


def test_synth_merges_overlaps_and_keeps_length():
    comps = [collector.parse_component("periodic:100Hz:4ms", "x"),
             collector.parse_component("periodic:100Hz:2ms:3ms", "x")]
    t = collector.synth(comps, 1.0, 1, 1e9, 1)
    c = t.cpus[0]
    assert c.length == 10**9
    assert c.events == 100
    assert (c.duration == 5_000_000).all()  # [0, 4) and [3, 5) ms merge into [0, 5) ms


def test_cli_synth_and_report_json(tmp_path):
    p = tmp_path / "s.jtr"
    run_cli(["noise", "synth", str(p), "--periodic", "250Hz:5us", "--poisson", "100/s:20us", "--length", "4s",
             "--cpus", "2", "--freq", "2GHz"], check=True)
    res = run_cli(["noise", "report", str(p), "--json", "--plots", str(tmp_path / "plots")], check=True)
    import json

    out = json.loads(res.stdout)
    for c in out["cpus"]:
        for k in ("cpu", "t_min_ns", "events", "events_per_s", "noise_fraction", "max_ns", "p50_ns", "p99_ns",
                  "periods"):
            assert k in c
        assert abs(c["periods"][0]["hz"] - 250.0) < 0.5
        assert c["events_per_s"] == pytest.approx(350, rel=0.1)
    assert (tmp_path / "plots" / "noise_spectrum_cpu1.svg").is_file()


def test_periodic_sources_names_the_fundamental():
    comps = [collector.parse_component("periodic:250Hz:3us", "x"),
             collector.parse_component("periodic:60Hz:50us:1ms", "x"),
             collector.parse_component("poisson:200/s:2us", "x")]
    t = collector.synth(comps, 4.0, 1, 1e9, 7)
    c = t.cpus[0]
    f, p = analysis.spectrum(t, c)
    src = analysis.periodic_sources(f, p, 5, c.events)
    hz = [s["hz"] for s in src]
    assert abs(hz[0] - 250.0) < 0.3  # not 500 Hz or another harmonic
    assert any(abs(h - 60.0) < 0.3 for h in hz)
    st = analysis.cpu_stats(t, c)
    assert st["noise_fraction"] == pytest.approx(c.duration.sum() / c.length)


def test_parse_interrupts_rows():
    text = ("           CPU0       CPU1\n  1:   5   7   IO-APIC 1-edge i8042\nLOC:  100  200   Local timer interrupts\n"
            "ERR:          0\n")
    rows = analysis.parse_interrupts(text)
    assert rows["LOC (Local timer interrupts)"] == [100, 200]
    assert rows["1 (IO-APIC 1-edge i8042)"] == [5, 7]
    assert rows["ERR"] == [0, 0]


def test_bad_component_and_cpus():
    with pytest.raises(UsageError, match="not a noise component"):
        collector.parse_component("periodic:250Hz", "--periodic")
    with pytest.raises(UsageError, match="as long as the period"):
        collector.parse_component("periodic:1kHz:2ms", "--periodic")
    with pytest.raises(UsageError, match="not available"):
        collector.parse_cpus("4096")


def test_harmonics_are_folded_into_their_source_not_listed():
    """Issue #27: a 250 Hz tick was reported with 'sources' at 4750 and 4250.9 Hz, its 19th and 17th harmonics."""
    found = [{"hz": 4750.0, "strength": 0.8}, {"hz": 250.02, "strength": 0.5}, {"hz": 4250.9, "strength": 0.4},
             {"hz": 61.3, "strength": 0.3}, {"hz": 1003.0, "strength": 0.2}]
    out = analysis.fold_harmonics(found, df=0.25)
    assert [s["hz"] for s in out] == [250.02, 61.3, 1003.0]  # 1003 Hz is no multiple of 250 or 61.3 Hz
    assert sorted(out[0]["folded_hz"]) == [4250.9, 4750.0]
    # the timer method's sampling grid (200 us: 5 kHz) is the sampler's, not a source
    grid = analysis.fold_harmonics([{"hz": 5000.0, "strength": 0.9}, {"hz": 61.3, "strength": 0.3}], 0.25, 5000.0)
    assert [s["hz"] for s in grid] == [61.3]
    # CI lost an injected 100 Hz source in a 3.5 s recording (tolerance 0.86 Hz): a weak low-frequency source's
    # comb (3.98 Hz: 25 x 3.98 = 99.5 Hz) is too dense to tell a harmonic from a coincidence
    low = analysis.fold_harmonics([{"hz": 100.0, "strength": 0.9}, {"hz": 3.98, "strength": 0.3}], 1 / 3.5)
    assert [s["hz"] for s in low] == [100.0, 3.98]


def _no_overlap(starts: np.ndarray, durations: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    o = np.argsort(starts, kind="stable")
    starts, durations = starts[o], durations[o]
    keep, end = np.ones(starts.size, dtype=bool), -1
    for i in range(starts.size):
        keep[i] = starts[i] > end
        end = starts[i] + durations[i] if keep[i] else end
    return starts[keep], durations[keep]


def test_a_train_whose_durations_straddle_a_class_edge_is_one_source_at_its_frequency():
    """CI recorded an injected 100 Hz x 1 ms train whose bursts held the 250 Hz tick every other time (0.98 and
    1.02 ms): each decade class held every other burst, a 50 Hz train, which took 100 Hz, and even the tick, as
    its harmonics. The decade centred on 1 ms holds the whole train; the 50 Hz is that train in part."""
    rng = np.random.default_rng(1)
    length = int(3.5e9)
    bursts = np.arange(5_000_000, length - 2 * 10**6, 10_000_000)
    burst_ns = np.where(np.arange(bursts.size) % 2 == 0, 1_020_000, 980_000) + rng.integers(-5000, 5000, bursts.size)
    tick = np.arange(0, length - 10**6, 4_000_000) + rng.integers(0, 2000, length // 4_000_000 - 0)
    other = rng.integers(0, length - 10**6, 3000)
    starts, durations = _no_overlap(np.concatenate([bursts, tick, other]).astype(np.int64), np.concatenate(
        [burst_ns, np.full(tick.size, 3000), np.full(other.size, 800)]).astype(np.int64))
    c = cpu_trace_from_events(0, starts, durations, length)
    sources = analysis.sources_by_class(JitterTrace(1e9, [c], {}), c)
    hz = sorted(round(s["hz"]) for s in sources)
    assert hz == [100, 250], [(round(s["hz"], 2), s["class_ns"], s.get("folded_hz")) for s in sources]
    train = next(s for s in sources if round(s["hz"]) == 100)
    assert [round(x) for x in train["partial_hz"]] == [50] and train["class_ns"][0] < 1e6 < train["class_ns"][1]
    # fold_harmonics alone: a train of its own is no harmonic; a weak peak of a busy class still is
    found = [{"hz": 50.0, "strength": 0.97, "class_ns": [1e5, 1e6], "class_events": 175},
             {"hz": 100.0, "strength": 0.97, "class_ns": [3.2e5, 3.2e6], "class_events": 350},
             {"hz": 1000.0, "strength": 0.09, "class_ns": [0.0, None], "class_events": 4000}]
    out = analysis.fold_harmonics(found, df=1 / 3.5)
    assert [s["hz"] for s in out] == [100.0] and out[0]["folded_hz"] == [1000.0] and out[0]["partial_hz"] == [50.0]
    # the same two in classes that do not overlap (2 ms bursts at 50 Hz, 0.5 ms at 100 Hz) are two sources
    apart = [found[0] | {"class_ns": [1e6, 1e7]}, found[1] | {"class_ns": [1e5, 1e6]}]
    assert [s["hz"] for s in analysis.fold_harmonics(apart, df=1 / 3.5)] == [50.0, 100.0]


def test_a_tick_seen_on_a_sampling_grid_is_one_source():
    """A 250 Hz tick whose detours are seen on a 200 us grid (the timer method's): its spectrum peaks at 1000,
    1250, 2500 and 5000 Hz too; the report names one source, the tick."""
    rng = np.random.default_rng(0)
    length = 4 * 10**9
    tick = np.arange(0, length - 10**6, 4_000_000)
    tick = tick + rng.integers(0, 20_000, size=tick.size)
    other = rng.integers(0, length - 10**6, 2000)
    starts = np.unique(np.ceil(np.concatenate([tick, other]) / 200_000).astype(np.int64) * 200_000)
    c = cpu_trace_from_events(0, starts, np.full(starts.size, 150_000), length)
    t = JitterTrace(1e9, [c], {"method": "timer", "interval_ns": 200000})
    hz = [s["hz"] for s in analysis.sources_by_class(t, c)]
    assert len(hz) == 1 and abs(hz[0] - 250.0) < 0.3, hz


def _host_train_and_tick(seed: int = 5) -> tuple[JitterTrace, CpuTrace]:
    """2 s: a 1 kHz train of 20 us detours (a hypervisor's), the 250 Hz tick of 20 us 0.4 ms after every 4th of
    them, and 3000 random 0.8 us ones: the tick is in the same duration class as the faster train."""
    rng = np.random.default_rng(seed)
    length = 2 * 10**9
    host = np.arange(100_000, length - 10**6, 1_000_000) + rng.integers(0, 2000, 1999)
    tick = np.arange(400_000, length - 10**6, 4_000_000) + rng.integers(0, 2000, 500)
    other = rng.integers(0, length - 10**6, 3000)
    starts, durations = _no_overlap(np.concatenate([host, tick, other]).astype(np.int64), np.concatenate(
        [np.full(host.size + tick.size, 20_000), np.full(other.size, 800)]).astype(np.int64))
    c = cpu_trace_from_events(0, starts, durations, length)
    return JitterTrace(1e9, [c], {}), c


def test_the_tick_beside_a_faster_host_train_is_named_not_folded_into_it():
    """CI, 2026-11-28: a host interrupting the VM at 1 kHz; the 250 Hz tick, found beside it in the same class,
    was listed as that train 'seen in part' and the tick check said the tick was missing."""
    t, c = _host_train_and_tick()
    blind = analysis.sources_by_class(t, c)  # without the kernel's tick: the old reading
    assert [round(s["hz"]) for s in blind if s["hz"] > 10] == [1000]
    assert 250 in [round(x) for x in blind[0]["partial_hz"]]
    sources = analysis.sources_by_class(t, c, tick_hz=250)
    assert sorted(round(s["hz"]) for s in sources if s["hz"] > 10) == [250, 1000], sources
    tick = next(s for s in sources if round(s["hz"]) == 250)
    assert tick["class_ns"] == [1e4, 1e5] and "partial_hz" not in tick
    f, p = analysis.spectrum(t, c)
    assert analysis.tick_check(f, p, sources, 250)["as_fundamental"]
    assert not analysis.tick_check(f, p, blind, 250)["found"]


def test_the_tick_is_no_harmonic_of_a_weak_slow_source():
    """CI, 2026-11-28: a 62.7 Hz source of strength 0.01 took the 250 Hz tick (0.23) as its 4th harmonic (2 s:
    the tolerance, 3 frequency bins, is 1.5 Hz)."""
    found = [{"hz": 250.01, "strength": 0.23, "class_ns": [1e4, 1e5], "class_events": 2274},
             {"hz": 62.7, "strength": 0.01, "class_ns": [0.0, 1e3], "class_events": 2549}]
    assert [s["hz"] for s in analysis.fold_harmonics(found, df=0.5)] == [62.7]  # the old reading
    kept = analysis.fold_harmonics(found, df=0.5, tick_hz=250)
    assert [s["hz"] for s in kept] == [250.01, 62.7] and "folded_hz" not in kept[1]


def test_straddle_classes_touch_their_neighbours_exactly():
    """1e3 * sqrt(10) and 1e4 / sqrt(10) differ in the last bit: the class 0.32-3.2 us and 3.2-32 us overlapped by
    that much, and a 1 kHz train of the first took a 250 Hz source of the second as a part of it (CI, 2026-11-28)."""
    s = analysis.STRADDLE_CLASSES_NS
    assert all(a[1] == b[0] for a, b in zip(s[:-1], s[1:], strict=False))
    assert [round(lo) for lo, _ in s] == [316, 3162, 31623, 316228]
    train = {"hz": 1000.0, "strength": 0.83, "class_ns": list(s[0]), "class_events": 1300}
    other = {"hz": 250.0, "strength": 0.19, "class_ns": list(s[1]), "class_events": 1936}
    out = analysis.fold_harmonics([train, other], df=0.5)
    assert [x["hz"] for x in out] == [1000.0, 250.0] and "partial_hz" not in out[0]


def test_local_peaks_are_scipys_find_peaks_with_height_and_distance_two():
    """The periodogram's peaks without importing scipy.signal (1.2 s): the same indices as find_peaks, flat tops
    and the ends of the array included."""
    from scipy.signal import find_peaks

    rng = np.random.default_rng(7)
    cases = [np.array(v, dtype=float) for v in ([], [1], [1, 2], [1, 2, 1], [2, 2, 2], [1, 3, 3, 1], [1, 3, 3, 3, 1],
                                                 [3, 1, 3], [1, 2, 2, 3, 1], [0, 5, 5, 0, 5, 0])]
    cases += [rng.integers(0, 4, size=int(n)).astype(float) for n in rng.integers(3, 200, size=300)]
    cases += [rng.exponential(size=5000)]
    for x in cases:
        for h in (0.0, 1.0, 2.5, float(np.median(x)) if x.size else 0.0):
            expected = find_peaks(x, height=h, distance=2)[0] if x.size else np.empty(0, dtype=np.intp)
            assert analysis.local_peaks(x, h).tolist() == expected.tolist(), (x.tolist()[:40], h)
