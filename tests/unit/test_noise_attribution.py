"""Time-aligned attribution (noise record --attribute) on hand-made data: the alignment, the shares, the
tracefs text parser and pairing, and the errors without root / tracefs."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from hpcvar.errors import UsageError
from hpcvar.noise import ktrace, matching
from hpcvar.noise.trace import JitterTrace, cpu_trace_from_events


# ---- align / attribute --------------------------------------------------------------------------------------
def _pairs(ds, de, es, ee):
    d, e, ov = matching.align(ds, de, es, ee)
    return sorted(zip(d.tolist(), e.tolist(), ov.tolist(), strict=True))


def test_align_overlap_and_no_overlap():
    ds, de = [100, 300, 600], [200, 400, 700]
    # event 0 inside detour 0; event 1 between detours; event 2 straddles the start of detour 2
    assert _pairs(ds, de, [120, 450, 550], [150, 500, 620]) == [(0, 0, 30), (2, 2, 20)]


def test_align_two_events_in_one_detour_and_nesting():
    ds, de = [100, 300], [200, 400]
    # an irq nested in a softirq, both inside detour 1; the pairs come sorted by detour, then event start
    assert _pairs(ds, de, [310, 320], [390, 330]) == [(1, 0, 80), (1, 1, 10)]


def test_align_boundaries_are_closed():
    ds, de = [100], [200]
    # touching the start, touching the end, a point event on the end, one cycle outside on both sides
    assert _pairs(ds, de, [50, 200, 200, 201, 10], [100, 250, 200, 300, 99]) == [(0, 0, 0), (0, 1, 0), (0, 2, 0)]


def test_align_one_long_event_spans_several_detours():
    assert _pairs([0, 10, 20, 30], [5, 15, 25, 35], [12], [31]) == [(1, 0, 3), (2, 0, 5), (3, 0, 1)]


def test_align_empty_and_invalid_input():
    assert _pairs([], [], [1], [2]) == []
    assert _pairs([1], [2], [], []) == []
    with pytest.raises(ValueError):
        matching.align([10, 5], [11, 6], [0], [1])  # detours not sorted
    with pytest.raises(ValueError):
        matching.align([0], [1], [5], [4])  # an event ending before it starts


def test_attribute_sources_primary_and_weights():
    ds, de = np.array([100, 300, 600]), np.array([200, 400, 700])
    es, ee = np.array([110, 305, 350, 800]), np.array([130, 340, 352, 900])
    src = np.array(["local_timer", "softirq TIMER", "softirq RCU", "local_timer"])
    a = matching.attribute(ds, de, es, ee, src)
    assert a["sources"].tolist() == ["local_timer", "softirq TIMER + softirq RCU", "unattributed"]
    assert a["primary"].tolist() == ["local_timer", "softirq TIMER", "unattributed"]
    assert a["n_events"].tolist() == [1, 2, 0]
    assert a["event_matched"].tolist() == [True, True, True, False]
    w = a["shares"].set_index(["det", "source"])["weight"]
    assert w[(1, "softirq TIMER")] == pytest.approx(35 / 37) and w[(1, "softirq RCU")] == pytest.approx(2 / 37)
    assert w[(0, "local_timer")] == 1.0


def test_attribute_point_events_share_equally():
    a = matching.attribute([100], [200], [150, 150], [150, 150], ["sched_switch to a", "reschedule"])
    assert sorted(a["shares"]["weight"].tolist()) == [0.5, 0.5]


def test_match_trace_shares_sum_to_one_and_coverage():
    # detours (cycles): [10, 20) timer, [100, 104) unattributed, [200, 240) sched + timer, [900, 950) after
    # the last kernel record with losses: not covered
    c = cpu_trace_from_events(3, [10, 100, 200, 900], [10, 4, 40, 50], 1000, {"t_min_cycles": 0})
    tr = JitterTrace(1e9, [c])
    kev = pd.DataFrame({"cpu": 3, "source": ["local_timer", "sched_switch to kworker/3:1", "local_timer", "reschedule"],
                        "kind": ["vector", "sched", "vector", "vector"], "start_cycles": [12, 210, 205, 500],
                        "end_cycles": [18, 235, 210, 510], "complete": True})
    session = {"cpus": {"3": {"lost": 7, "last_cycles": 600, "records": 8}}}
    det, summ, out = matching.match_trace(tr, kev, session)
    assert det["sources"].tolist() == ["local_timer", "unattributed", "local_timer + sched_switch to kworker/3:1",
                                       "unattributed"]
    assert det["covered"].tolist() == [True, True, True, False]
    cpu = out["cpus"][0]
    assert cpu["covered_detours"] == 3 and cpu["attributed"] == 2
    assert cpu["unattributed_share"] == pytest.approx(1 / 3)
    assert cpu["lost_ns"] == pytest.approx(54.0)
    assert summ["lost_share"].sum() == pytest.approx(1.0)
    rows = summ.set_index("source")
    # detour 2 (40 ns): timer overlaps 5 cycles, sched 25 -> 40 * 5/30 and 40 * 25/30
    assert rows.loc["local_timer", "lost_ns"] == pytest.approx(10 + 40 * 5 / 30)
    assert rows.loc["sched_switch to kworker/3:1", "lost_ns"] == pytest.approx(40 * 25 / 30)
    assert rows.loc["local_timer", "detours"] == 2 and rows.loc["local_timer", "detour_share"] == pytest.approx(2 / 3)
    # a kernel event in the window that fell in no detour is counted, not matched
    assert rows.loc["reschedule", "kernel_events"] == 1 and rows.loc["reschedule", "kernel_events_in_detours"] == 0
    assert "lost 7" in out["warning"] and out["how"].startswith("matched")
    assert [k["attributed_share"] for k in cpu["classes"]] == pytest.approx([2 / 3])


# ---- the tracefs text and the pairing -----------------------------------------------------------------------
TEXT = """# tracer: nop
#
# entries-in-buffer/entries-written: 14/14   #P:2
#           TASK-PID     CPU#  |||||  TIMESTAMP  FUNCTION
#              | |         |   |||||     |         |
 hv_noise_collec-500     [001] d.h..      1000: local_timer_entry: vector=236
 hv_noise_collec-500     [001] d.h..      1100: local_timer_exit: vector=236
 hv_noise_collec-500     [001] ..s..      1110: softirq_entry: vec=1 [action=TIMER]
 hv_noise_collec-500     [001] d.h..      1120: irq_handler_entry: irq=24 name=virtio0-input.0
 hv_noise_collec-500     [001] d.h..      1130: irq_handler_exit: irq=24 ret=handled
 hv_noise_collec-500     [001] ..s..      1200: softirq_exit: vec=1 [action=TIMER]
 hv_noise_collec-500     [001] d..2.      1300: sched_switch: prev_comm=hv_noise_collec prev_pid=500 prev_prio=120 \
prev_state=R ==> next_comm=kworker/1:1 next_pid=77 next_prio=120
     kworker/1:1-77      [001] d..2.      1400: sched_switch: prev_comm=kworker/1:1 prev_pid=77 prev_prio=120 \
prev_state=I ==> next_comm=hv_noise_collec next_pid=500 next_prio=120
 hv_noise_collec-500     [001] d.h..      2000: local_timer_entry: vector=236
 hv_noise_collec-500     [001] d.h..      2500: local_timer_entry: vector=236
 hv_noise_collec-500     [001] d.h..      2600: local_timer_exit: vector=236
 hv_noise_collec-500     [001] d..2.      3000: sched_switch: prev_comm=hv_noise_collec prev_pid=500 prev_prio=120 \
prev_state=R ==> next_comm=Web Content next_pid=88 next_prio=120
 hv_noise_collec-500     [001] d.h..      3500: reschedule_entry: vector=253
 hv_noise_collec-500     [001] d.h..      3550: reschedule_exit: vector=253
 hv_noise_collec-500     [001] d.Z..      3600: nmi_handler: perf_event_nmi_handler() delta_ns: 40 handled: 1
""".replace("\\\n", "")


def test_parse_trace_reads_x86_tsc_records():
    recs = ktrace.parse_trace(TEXT)
    assert len(recs) == 15
    assert (recs[0].ts, recs[0].cpu, recs[0].name, recs[0].pid, recs[0].comm) == (1000, 1, "local_timer_entry", 500,
                                                                                 "hv_noise_collec")
    with pytest.raises(Exception, match="not in cycles"):
        ktrace.parse_trace("  bash-1 [000] d.h.. 12.345678: local_timer_entry: vector=236\n")


def test_kernel_intervals_pairs_nests_and_recovers_lost_ends():
    iv = ktrace.kernel_intervals(ktrace.parse_trace(TEXT), {500}, cycles_per_ns=2.0)
    got = [(x["source"], x["kind"], x["start"], x["end"], x["complete"]) for x in iv]
    assert got == [
        ("local_timer", "vector", 1000, 1100, True),
        ("softirq TIMER", "softirq", 1110, 1200, True),
        ("irq 24 virtio0-input.0", "irq", 1120, 1130, True),
        ("sched_switch to kworker/1:1", "sched", 1300, 1400, True),
        ("local_timer", "vector", 2000, 2000, False),  # its exit was lost: a point, never a span to 2600
        ("local_timer", "vector", 2500, 2600, True),
        # the switch back was lost: the collector's own context at 3500 shows it was running again
        ("sched_switch to Web Content", "sched", 3000, 3000, False),
        ("reschedule", "vector", 3500, 3550, True),
        ("nmi perf_event_nmi_handler", "nmi", 3520, 3600, True),
    ]


def test_kernel_intervals_by_comm_without_tids():
    iv = ktrace.kernel_intervals(ktrace.parse_trace(TEXT), None)
    assert ("sched_switch to kworker/1:1", 1300, 1400) in [(x["source"], x["start"], x["end"]) for x in iv]


def test_cpumask_and_stats():
    assert ktrace.cpumask_hex([0]) == "00000001"
    assert ktrace.cpumask_hex([1, 3]) == "0000000a"
    assert ktrace.cpumask_hex([0, 33]) == "00000002,00000001"
    st = ktrace.parse_stats("entries: 12\noverrun: 3\ncommit overrun: 1\nbytes: 99\noldest event ts: 5\n"
                            "now ts: 9\ndropped events: 4\nread events: 0\n")
    assert (st["entries"], st["overrun"], st["commit_overrun"], st["dropped"], st["lost"]) == (12, 3, 1, 4, 8)


def test_buffer_size_grows_with_duration_within_memory(monkeypatch):
    monkeypatch.setattr(ktrace, "_mem_available_kb", lambda: 64 << 20)  # 64 GiB
    assert ktrace.buffer_kb_for(2) == ktrace.MIN_BUFFER_KB
    assert ktrace.buffer_kb_for(60) == 60 * ktrace.BUFFER_KB_PER_S + 2048
    assert ktrace.buffer_kb_for(1e6) == ktrace.MAX_BUFFER_KB
    monkeypatch.setattr(ktrace, "_mem_available_kb", lambda: 1 << 20)  # 1 GiB: a quarter over 4 CPUs
    assert ktrace.buffer_kb_for(1e6, 4) == (1 << 20) // 16


# ---- no silent fallback -------------------------------------------------------------------------------------
def test_attribute_needs_root(monkeypatch):
    monkeypatch.setattr(ktrace.os, "geteuid", lambda: 1000)
    with pytest.raises(UsageError) as e:
        ktrace.require_tracefs()
    assert e.value.where == "--attribute" and "root" in e.value.todo


def test_attribute_needs_tracefs(monkeypatch):
    import subprocess

    monkeypatch.setattr(ktrace.os, "geteuid", lambda: 0)
    monkeypatch.setattr(ktrace, "tracefs_mounts", lambda *a: [])
    monkeypatch.setattr(ktrace.subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(
        a[0], 32, "", "mount: permission denied"))
    with pytest.raises(UsageError) as e:
        ktrace.require_tracefs()
    assert e.value.where == "--attribute" and "mount -t tracefs nodev /sys/kernel/tracing" in e.value.todo
    assert "permission denied" in e.value.what


def test_cli_attribute_without_root_fails_naming_the_flag(monkeypatch, capsys, runs_dir):
    from hpcvar.cli import main

    monkeypatch.setattr(ktrace.os, "geteuid", lambda: 1000)
    with pytest.raises(SystemExit) as e:
        main(["noise", "record", "--cpus", "0", "--duration", "1s", "--attribute"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and "(--attribute)" in err and "Run as root" in err
    assert not runs_dir.exists() or not any(runs_dir.iterdir())  # nothing was recorded
