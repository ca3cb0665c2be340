"""The report a person acts on (issue 16): the verdict, judged headlines, plain numbers, relative figures,
legends off the data, and a report that never rewrites the runs it reads."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import numpy as np
import pytest

from hpcvar.report import plots, verdict
from hpcvar.report.document import plain, render_markdown, write_report
from hpcvar.report.sections import BAD, GOOD, INFO, SUSPECT
from hpcvar.results import Run
from tests.unit.test_compare_report import fake_latency_run


def _snapshot(path: Path) -> dict[str, str]:
    return {str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(path.rglob("*")) if p.is_file()}


def _characterization(runs_dir) -> Run:
    parent = Run.create("characterize", {"quick": True, "steps": ["latency", "sharing", "ace"]})
    child = fake_latency_run(1.0, 1)
    target = parent.steps_dir() / child.path.name
    child.path.rename(target)
    child = Run.open(target)
    child.info["params"]["step"] = "latency"
    child.save()
    parent.info["steps"] = {
        "latency": {"status": "complete", "run": child.id},
        "sharing": {"status": "skipped", "reason": "needs 3 nodes or more"},
        "ace": {"status": "failed", "error": "error: the MPI job did not finish (--timeout). Increase it"}}
    parent.finish("failed", {})
    return parent


def test_plain_numbers():
    assert plain(10483.2) == "10480" and plain(1.048e4) == "10480"
    assert plain(0.0000123456) == "0.00001235" and plain(2.0) == "2" and plain(7) == "7"
    assert plain(float("nan")) == "" and plain(None) == "" and plain(False) == "no" and plain(np.True_) == "yes"
    assert plain(float("inf")) == "inf" and plain("x") == "x"


def test_judgements_state_their_reference():
    assert verdict.judge_rate(24e6, 25e6, "the link")[0] == GOOD
    assert verdict.judge_rate(10e6, 25e6, "the link")[0] == BAD
    status, ref = verdict.judge_rate(40e6, 25e6, "the link")
    assert status == SUSPECT and "more than the link" in ref
    assert verdict.judge_rate(1e9, None, "no link known")[0] == INFO
    assert verdict.judge_error_pct(-4.0)[0] == GOOD and verdict.judge_error_pct(30.0)[0] == BAD
    assert verdict.judge_ci(-1.0, 2.0)[0] == SUSPECT  # spans zero
    assert "2 point" in verdict.judge_ci(1.0, 2.0, points=2)[1]
    assert "one replica" in verdict.judge_ci(1.0, 2.0, replicas=1)[1]
    assert verdict.judge_ci(1.0, 2.0, points=5, replicas=3) is None
    assert verdict.judge_noise_pct(0.2)[0] == GOOD and verdict.judge_noise_pct(9.0)[0] == BAD


def test_verdict_lists_every_step_with_its_reason(runs_dir, tmp_path):
    parent = _characterization(runs_dir)
    out = write_report(parent.children(), tmp_path / "r.html", tops=[parent])
    html = out.read_text()
    v = html[html.index('id="verdict"'):html.index("</section>")]
    assert "sharing" in v and "skipped" in v and "needs 3 nodes or more" in v
    assert "failed" in v and "did not finish" in v
    # the step's run is printed as an id that hpcvar takes back
    assert f"{parent.id}/steps/" in v
    assert "Steps: 1 of 3 complete" in v
    # the headlines are judged: the 8-byte latency against the timer's cost, which the fake run lacks
    assert 'class="finding-suspect"' in v and "timer" in v


def test_markdown_is_plain_and_portable(runs_dir, tmp_path):
    parent = _characterization(runs_dir)
    (tmp_path / "sub").mkdir()
    out = write_report(parent.children(), tmp_path / "sub" / "r.md", tops=[parent])
    text = out.read_text()
    assert "## Verdict" in text and "| sharing | skipped | needs 3 nodes or more |" in text
    links = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)
    assert links, text
    for link in links:
        assert not Path(link).is_absolute() and (out.parent / link).is_file(), link
    body = text.split("## Point-to-point latency", 1)[1]
    assert not re.search(r"\d\.\d+e[+-]\d", body), "exponent notation in the Markdown tables"
    assert "| nan" not in body and "False" not in body and "True" not in body


def test_report_never_rewrites_the_runs(runs_dir, tmp_path):
    run = fake_latency_run(1.0, 1)
    before = _snapshot(run.path)
    write_report([run], tmp_path / "r.html")
    write_report([run], tmp_path / "r.md")
    assert _snapshot(run.path) == before


def test_baseline_is_compared_and_overlaid(runs_dir, tmp_path):
    base, cur = fake_latency_run(1.0, 1), fake_latency_run(1.6, 2)
    html = write_report([cur], tmp_path / "r.html", baseline=base).read_text()
    v = html[html.index('id="verdict"'):html.index("</section>")]
    assert f"Against baseline {base.id}" in v and v.count("b-degraded") >= 2
    md = render_markdown([cur], "t", baseline=base)
    assert "2 metric(s) degraded" in md
    # the latency figure draws the baseline's medians (its label names the baseline run)
    with plots.baselines(verdict.pair_baseline([cur], base)):
        assert plots.baseline_for(cur).id == base.id


def test_a_legend_over_the_data_is_moved_off_it(tmp_path):
    from PIL import Image

    fig, ax = plots.figure()
    x = np.linspace(0, 1, 200)
    for k in range(12):  # a legend of 12 entries over lines that fill the axes
        ax.plot(x, x + 0.02 * k, label=f"series {k}")
    ax.legend(loc="center")
    fig.canvas.draw()
    assert plots.legend_overlap(fig) > 0
    png = plots.save(fig, tmp_path / "crowded")[0]
    assert Image.open(png).text["hpcvar-legend-overlap"] == "0"


def test_demo_defaults_do_not_warn_about_themselves(runs_dir):
    from types import SimpleNamespace

    from hpcvar.kinds.fanin.job import Fanin

    # fan-in's ranks sleep between MPI tests when they outnumber the cores (--wait auto): no stall to warn about
    assert Fanin().busy_polls(SimpleNamespace(wait="sleep:50")) is False
    assert Fanin().busy_polls(SimpleNamespace(wait="spin")) is True


@pytest.mark.parametrize("stem", ["noise_cpu0", "noise_spectrum_cpu1", "fanin-bandwidth",
                                  "fanin-runs-single-deep-any"])
def test_captions_say_what_a_figure_shows(stem):
    from hpcvar.kinds.fanin.views import fanin_caption
    from hpcvar.kinds.noise_record.views import noise_caption

    caption = noise_caption(stem) if stem.startswith("noise") else fanin_caption(stem)
    assert caption != stem and len(caption) > 40 and "_" not in caption


def test_report_command_takes_a_baseline(runs_dir, tmp_path):
    from tests.conftest import run_cli

    base, cur = fake_latency_run(1.0, 1), fake_latency_run(1.6, 2)
    out = tmp_path / "r.html"
    res = run_cli(["report", str(cur.path), "--baseline", str(base.path), "-o", str(out)])
    assert res.returncode == 0, res.stderr
    assert f"Against baseline {base.id}" in out.read_text()
    res = run_cli(["report", str(cur.path), "--baseline", str(tmp_path / "nowhere"), "-o", str(out)])
    assert res.returncode != 0 and "Traceback" not in res.stderr


def test_characterize_baseline_must_be_a_characterization(runs_dir):
    from tests.conftest import run_cli

    base = fake_latency_run(1.0, 1)
    res = run_cli(["characterize", "--quick", "--steps", "latency", "--baseline", str(base.path)])
    assert res.returncode == 2 and "not a characterization" in res.stderr and "--baseline" in res.stderr


# ---- the one-line answer (issue 31) ------------------------------------------------------------------------
def test_the_verdict_answers_in_one_line_first(runs_dir, tmp_path):
    """A failed step and a suspect latency (no timer cost recorded) make it UNRELIABLE, never DEGRADED; the
    answer is the first thing of the report's verdict, in HTML and Markdown."""
    parent = _characterization(runs_dir)
    vs: list = []
    out = write_report(parent.children(), tmp_path / "r.html", tops=[parent], verdict_out=vs)
    a = vs[0].answer
    assert a.status == "UNRELIABLE" and a.exit_code == 4
    assert "step ace failed" in a.line() and "timer's cost was not recorded" in a.line()
    html = out.read_text()
    assert html.index('id="answer"') < html.index('id="verdict-steps"') and "UNRELIABLE: " in html
    md = write_report(parent.children(), tmp_path / "r.md", tops=[parent]).read_text()
    assert md.split("## Verdict", 1)[1].lstrip().startswith("**UNRELIABLE: ")


def test_answer_rules_measurement_model_prediction():
    from hpcvar.report.sections import MEASURED, MODEL, PREDICTION, Headline, Section

    class R:  # the little of a run the answer reads
        def __init__(self, cmd="bench latency"):
            self.info, self.id = {"command": cmd, "params": {"step": cmd.split()[-1]}}, cmd

    def answer(*heads):
        v = verdict.Verdict()
        sections = [(R(), Section("s", list(heads)))]
        v.findings = [("x", h) for h in heads]
        return verdict.answer(v, [], sections)

    bad = Headline("bandwidth, 4MiB", "10 MB/s", "m", BAD, "40% of the link")
    assert answer(bad).status == "DEGRADED" and "latency: bandwidth, 4MiB 10 MB/s (40% of the link)" in \
        answer(bad).line()
    # a model that misleads or a large predicted slowdown judges no machine: alone they answer nothing, and an
    # answer resting on nothing judged is not OK; beside a measurement judged good they change nothing
    for head in (Headline("E_abs", "40%", "m", BAD, "r", role=MODEL),
                 Headline("slowdown", "12x", "m", BAD, "r", role=PREDICTION)):
        alone = answer(head)
        assert alone.status == "UNRELIABLE" and "nothing measured was judged against a reference (0 measurement(s) " \
            "without one, 1 model or prediction headline(s)" in alone.line(), alone.line()
        assert answer(head, Headline("bandwidth", "110 MB/s", "m", GOOD, "92% of the link")).status == "OK"
    only_info = answer(Headline("alignment", "inconclusive", "m", INFO, "too few detours"))
    assert only_info.status == "UNRELIABLE" and "(1 measurement(s) without one" in only_info.line()
    # measured (judged only against the timer) is neither good nor bad
    ok = answer(Headline("latency, 8B", "2 us", "m", MEASURED, "measured: the timer resolves it"))
    assert ok.status == "OK" and "1 measured" in ok.line()
    assert answer(bad, Headline("noise", "80%", "m", SUSPECT, "preempted")).status == "DEGRADED"
    assert answer(Headline("noise", "80%", "m", SUSPECT, "preempted")).status == "UNRELIABLE"


def test_a_bad_measurement_under_the_characterizations_load_is_unreliable():
    """The demo on a machine whose other processes used 80% of the CPUs said DEGRADED for ACE's busy-wait 7.7% off
    its request: a finding on a disturbed measurement makes the answer UNRELIABLE, the load first."""
    from hpcvar.report.sections import Headline, Section

    class R:
        def __init__(self, info):
            self.info, self.id = info, "r"

    bad = Headline("busy-wait accuracy at 1.85 ms requested", "median +7.659%", "m", BAD, "off by more than 1%")
    sections = [(R({"command": "bench ace", "params": {"step": "ace"}}), Section("s", [bad]))]
    warn = "while the steps ran, other processes used 80% of this machine's CPUs (over 10%): ..."
    for load, status in ((None, "DEGRADED"), ({"others_pct": 80.0, "warning": warn}, "UNRELIABLE")):
        top = R({"command": "characterize", "load": load})
        a = verdict.answer(verdict.Verdict(), [top], sections)
        assert a.status == status, a.line()
    assert a.line().startswith("UNRELIABLE: while the steps ran, other processes used 80%")
    assert "ace: busy-wait accuracy at 1.85 ms requested median +7.659%" in a.line() and "under that load" in a.line()


def test_a_prediction_on_a_suspect_recording_is_suspect(runs_dir, tmp_path):
    """The demo's case: jitSim replaying a recording whose collector was preempted (load, not OS noise) is
    suspect, never bad, whatever slowdown it predicts."""
    from hpcvar.kinds.sim_jitter.views import input_suspicion, section

    noise = Run.create("noise record", {"cpus": [0]})
    noise.finish("complete", {"cpus": [{"cpu": 0, "noise_fraction": 0.8}],
                              "attribution": {"window_s": 5.0, "thread_context_switches":
                                              {"0": {"nonvoluntary": 900, "voluntary": 0}}}})
    jit = Run.create("sim jitter", {"traces": [str(noise.path / "trace.jtr")]})
    jit.finish("complete", {"points": [{"config": "unsync", "tasks": 1 << 20, "slowdown": 12.08, "replicas": 3,
                                        "slowdown_ci": [11.0, 13.0], "total_s": 1.0}], "freq_hz": 1e9,
                            "work_cycles": 1e6, "phases_n": 10, "barrier": "tree"})
    assert "preempted 900 times" in input_suspicion(jit)
    h = section(jit).headlines[0]
    assert h.status == SUSPECT and "suspect" in h.reference and h.role == "prediction"


def test_a_prediction_on_a_loaded_characterizations_recording_is_suspect(runs_dir):
    """A 3-host testbed characterization under 28% of other processes' load: its multi-node recording keeps no
    preemption count, and jitSim's 1028% on it was 'bad'. The characterization's load makes it suspect."""
    from hpcvar.kinds.sim_jitter.views import section

    parent = Run.create("characterize", {"quick": True})
    parent.info["load"] = {"others_pct": 28.0, "steal_pct": 0.0, "warning": "while the steps ran, ..."}
    parent.save()
    noise = Run.create("noise record", {"nodes": 3}, runs_dir=parent.steps_dir())
    noise.finish("complete", {"nodes": ["h1", "h2", "h3"], "per_node": [{"host": "h1", "noise_fraction": [0.01]}]})
    jit = Run.create("sim jitter", {"traces": [str(noise.path)]}, runs_dir=parent.steps_dir())
    jit.finish("complete", {"points": [{"config": "x unsync", "tasks": 1 << 20, "slowdown": 10.28, "replicas": 3,
                                        "slowdown_ci": [10.0, 10.6], "total_s": 0.19}], "freq_hz": 1e9,
                            "work_cycles": 1e6, "phases_n": 10, "barrier": "tree"})
    h = section(jit).headlines[0]
    assert h.status == SUSPECT and "other processes used 28%" in h.reference, h.reference
    parent.info["load"] = {"others_pct": 2.0, "steal_pct": 0.0, "warning": None}
    parent.save()
    assert section(jit).headlines[0].status == BAD  # the same prediction on a quiet characterization


def test_a_noisy_cpu_beside_a_preempted_one_is_suspect(runs_dir):
    """Never a 'bad' built on suspect input: when the collector of one CPU was preempted (other processes ran),
    another CPU's high noise is suspect too, and the answer UNRELIABLE, not DEGRADED; without the preemption
    the same noise is bad."""
    from hpcvar.kinds.noise_record.views import section

    def recorded(preempted: int) -> Run:
        run = Run.create("noise record", {"cpus": [0, 1]})
        run.finish("complete", {"cpus": [{"cpu": 0, "noise_fraction": 0.002, "events_per_s": 900.0, "max_ns": 1e4,
                                          "periods": []},
                                         {"cpu": 1, "noise_fraction": 0.0548, "events_per_s": 19573.0,
                                          "max_ns": 1e4, "periods": []}],
                                "attribution": {"window_s": 5.0, "steal_s": {"0": 0.0, "1": 0.0},
                                                "thread_context_switches": {
                                                    "0": {"nonvoluntary": preempted, "voluntary": 0},
                                                    "1": {"nonvoluntary": 3, "voluntary": 0}}}})
        return run

    h = {x.label: x for x in section(recorded(143)).headlines}
    assert h["CPU 0 noise"].status == SUSPECT and "preempted 143 times" in h["CPU 0 noise"].reference
    assert h["CPU 1 noise"].status == SUSPECT, h["CPU 1 noise"]
    assert "other processes ran during the recording" in h["CPU 1 noise"].reference
    assert "over 5% of the CPU lost" in h["CPU 1 noise"].reference
    loaded = recorded(143)
    assert verdict.answer(verdict.Verdict(), [], [(loaded, section(loaded))]).status == "UNRELIABLE"
    quiet = {x.label: x for x in section(recorded(3)).headlines}
    assert quiet["CPU 1 noise"].status == BAD and quiet["CPU 0 noise"].status == GOOD
    idle = recorded(3)
    assert verdict.answer(verdict.Verdict(), [], [(idle, section(idle))]).status == "DEGRADED"


def _vm_recording(guest_irqs: int, short_us: float = 2.5, rate: float = 21000.0, in_vm: bool = True):
    """5 s on one CPU of a VM: ``rate`` short detours/s of ``short_us`` (the hypervisor's exits) plus 250
    ticks/s of 20 us, with ``guest_irqs`` interrupts counted by the guest on the CPU over the window."""
    import numpy as np

    from hpcvar.noise.trace import CpuTrace, JitterTrace

    freq, length_s = 1e9, 5.0
    n_short, n_tick = int(rate * length_s), int(250 * length_s)
    d = np.concatenate([np.full(n_short, short_us * 1e3), np.full(n_tick, 20e3)]).astype(np.int64)
    np.random.default_rng(1).shuffle(d)
    gap = np.full(d.size, (length_s * freq - d.sum()) / d.size).astype(np.int64)
    head = "           CPU0\n"
    proc = lambda n: {"interrupts": head + f"LOC: {n} Local timer interrupts\n",  # noqa: E731
                      "softirqs": head + f"TIMER: {n}\n", "stat": "cpu0 0 0 0 0 0 0 0 0 0 0\nctxt 10\n"}
    meta = {"proc_before": proc(1000), "proc_after": proc(1000 + guest_irqs), "window_mono_ns": int(5.01e9),
            "hypervisor": int(in_vm)}
    return JitterTrace(freq, [CpuTrace(0, d, gap, {"nonvoluntary_ctxt_switches": 2, "voluntary_ctxt_switches": 0,
                                                   "t_min_cycles": 7, "threshold_cycles": 100})], meta)


def test_detours_the_guest_did_not_count_are_the_hypervisors_not_a_degraded_os(runs_dir):
    """A CI VM lost 6.5 % of each CPU at 21,000 detours/s of 1-3 us while the guest counted 290 interrupts/s,
    and the demo answered DEGRADED on an idle machine. Each interrupt or context switch the guest counts explains
    at most one detour; the rest are the hypervisor's, their shortest ones a lower bound of its time. When that
    bound is what puts a VM's CPU over the 'bad' threshold, the CPU is suspect (UNRELIABLE), naming both shares;
    a guest that accounts for its detours, noise of the guest's own over the threshold, or bare metal stay bad."""
    from hpcvar.kinds.noise_record.views import hypervisor_suspicion, section
    from hpcvar.noise.analysis import analyze
    from hpcvar.noise.collector import json_summary

    def judged(trace):
        run = Run.create("noise record", {"cpus": [0]})
        res = json_summary(analyze(trace))
        run.finish("complete", res)
        return res, run, {x.label: x for x in section(run).headlines}["CPU 0 noise"]

    res, run, h = judged(_vm_recording(guest_irqs=1450))
    un = res["cpus"][0]["unexplained"]
    # 105,000 + 1,250 detours, 1,452 guest events: 104,798 unexplained, the shortest all 2.5 us ones
    assert un == {"guest_events": 1452, "events": 104798,
                  "lost_fraction_min": pytest.approx(104798 * 2.5e3 / 5e9, rel=1e-4)}
    assert res["cpus"][0]["noise_fraction"] == pytest.approx((105000 * 2.5e3 + 1250 * 20e3) / 5e9, rel=1e-3)
    assert h.status == SUSPECT, h
    assert "at least 5.2% of the CPU went to 20960 detours/s" in h.reference and "at most 0.51%" in h.reference
    assert verdict.answer(verdict.Verdict(), [], [(run, section(run))]).status == "UNRELIABLE"
    # the guest counted as many events as there were detours: its own noise, bad
    res, run, h = judged(_vm_recording(guest_irqs=106250))
    assert res["cpus"][0]["unexplained"]["events"] == 0 and h.status == BAD
    assert verdict.answer(verdict.Verdict(), [], [(run, section(run))]).status == "DEGRADED"
    # the same detours on bare metal: firmware, not a neighbour; stays bad
    _, _, h = judged(_vm_recording(guest_irqs=1450, in_vm=False))
    assert h.status == BAD
    # the guest's own share alone over 5 %: 250 ticks/s of 20 us is 0.5 %, so take the ticks to 300 us: 7.5 %
    t = _vm_recording(guest_irqs=1450)
    t.cpus[0].duration[t.cpus[0].duration == 20000] = 300000
    res, _, h = judged(t)
    assert h.status == BAD and hypervisor_suspicion(res, res["cpus"][0]) == ""


def test_a_recording_held_back_by_its_cgroups_cpu_quota_names_the_quota_not_other_processes(runs_dir):
    """On the testbed's h2 (--cpu-noise-of h2=1ms/10ms) the collector lost 12.9% of each CPU and was switched out
    86-104 times/s: the verdict said "other processes shared CPU 0, so this is load ... record on an idle machine"
    though nothing else ran. The collector now reads its cgroup's throttled time (cpu.stat) beside /proc: a
    recording throttled 1% of its CPU time or more is judged as measured (bad over 5%), with the quota named;
    the same switches without throttling, or a recording without the counter, stay suspect."""
    from hpcvar.kinds.noise_record.views import section
    from hpcvar.noise.analysis import analyze, throttle_cause
    from hpcvar.noise.collector import json_summary

    def judged(throttled_ns):
        t = _vm_recording(guest_irqs=106250, short_us=5.0, rate=21000.0)  # 10.5% + 0.5%, every detour counted
        t.cpus[0].meta["nonvoluntary_ctxt_switches"] = 450  # 90/s
        if throttled_ns is not None:
            t.meta["proc_before"]["cgroup_throttled_ns"] = 7e9
            t.meta["proc_after"]["cgroup_throttled_ns"] = 7e9 + throttled_ns
        run = Run.create("noise record", {"cpus": [0]})
        res = json.loads(json.dumps(json_summary(analyze(t))))  # as stored: CPUs as keys are text
        run.finish("complete", res)
        return res, run, {x.label: x for x in section(run).headlines}["CPU 0 noise"]

    res, run, h = judged(0.47e9)  # 9.4% of the 5.01 s window on one CPU
    assert res["attribution"]["cgroup_throttled_s"] == pytest.approx(0.47)
    assert h.status == BAD and "throttled by a CPU quota for 9.4% of the recorded CPU time" in h.reference, h
    assert "preempted" not in h.reference
    assert verdict.answer(verdict.Verdict(), [], [(run, section(run))]).status == "DEGRADED"
    for thr in (0.04e9, None):  # 0.8%: under THROTTLED_SHARE; None: an older collector, or cpu.stat not visible
        res, run, h = judged(thr)
        assert throttle_cause(res) == "" and h.status == SUSPECT and "preempted 450 times" in h.reference, h
        assert verdict.answer(verdict.Verdict(), [], [(run, section(run))]).status == "UNRELIABLE"
