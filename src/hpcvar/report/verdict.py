"""The verdict at the top of a report: what ran, what did not and why, and what each headline means.

A person opening a report first wants to know whether the machine is fine. The verdict answers with three
lists, built from the stored runs only:

- the steps of each characterization: complete, failed (with the error) or skipped (with the reason);
- every headline, judged ``good`` / ``bad`` / ``suspect`` / ``info`` against the reference it names (the
  judgements are made by each kind's section, with the helpers and thresholds below);
- with ``--baseline RUN``: every metric that degraded or improved against the baseline, by the ``hpcvar compare``
  machinery (Mann-Whitney U, Holm, Cliff's delta; see hpcvar.compare).

The thresholds are stated, not hidden: each is printed beside the value it judged.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from hpcvar.answer import Answer, decide
from hpcvar.report.sections import BAD, GOOD, INFO, MEASURED, MEASUREMENT, STATUSES, SUSPECT, Headline

# A transfer reaching this share of the link's rate uses the link well: TCP over a tbf-shaped link reaches
# 95-98% here (docs/testbed.md), real NICs 90-97% of their line rate at 4 MiB. Below HALF_OF_LINK something
# other than the link limits the transfer (CPU, a wrong transport, contention).
NEAR_LINK = 0.80
HALF_OF_LINK = 0.50
# More than the link's rate cannot have crossed the link: the measurement bypassed it (shared memory) or the
# rate given is wrong. 5% covers the tbf burst and the timer.
ABOVE_LINK = 1.05
# A latency under this many timer reads is dominated by the timer itself.
TIMER_READS = 10
# Model and prediction errors (ACE run time, sharing E_abs, replay E_abs): within 10% a model is good enough to
# size a machine or a job; beyond 25% it misleads. Vienne et al. report errors of this order for their models.
MODEL_GOOD_PCT = 10.0
MODEL_BAD_PCT = 25.0
# ACE's compute phase is a calibrated busy-wait: its median per cycle should be within 1% of the request.
BUSY_WAIT_GOOD_PCT = 1.0
# CPU time lost to OS noise: under 1% a node is quiet for bulk-synchronous codes; above 5% noise alone costs
# more than most tuning gains (Petrini et al.'s ASCI Q case was of this order).
NOISE_GOOD_PCT = 1.0
NOISE_BAD_PCT = 5.0
# Predicted slowdowns from jitter: above 10% at scale the noise matters for the application's grain.
SLOWDOWN_BAD_PCT = 10.0
# Fairness between identical clients (Jain's index, 1 = equal shares).
JAIN_GOOD = 0.95


def link_rate(run) -> tuple[float | None, str]:
    """The rate (bytes/s) of the slowest link a run's traffic crossed, when hpcvar knows it, and its name.

    Known on the testbed (the shaped rate of each host's link); on one node there is no link (shared
    memory); elsewhere hpcvar cannot know a network's rate."""
    meta = run.info.get("metadata") or {}
    hosts = [h for h in str((meta.get("native") or {}).get("hosts") or "").split(",") if h]
    if hosts and len(set(hosts)) == 1:
        return None, "all ranks on one node (shared memory): no link crossed"
    tb = (meta.get("launcher") or {}).get("testbed") or {}
    rates = [h.get("rate_bps") for h in tb.get("hosts") or [] if h.get("rate_bps")]
    if rates:
        r = min(rates)
        return r / 8.0, f"the testbed's shaped link ({r / 1e6:g} Mbit/s)"
    return None, "no link rate is known for this path (hpcvar knows it on the testbed only)"


def judge_rate(value_bps: float, limit_bps: float | None, limit_text: str) -> tuple[str, str]:
    """A measured rate (bytes/s) against a link's rate (bytes/s): (status, reference text)."""
    if not limit_bps or not math.isfinite(value_bps):
        return INFO, limit_text
    share = value_bps / limit_bps
    ref = f"{100 * share:.0f}% of {limit_text}"
    if share > ABOVE_LINK:
        return SUSPECT, ref + ": more than the link can carry (did the transfer bypass the link?)"
    if share >= NEAR_LINK:
        return GOOD, ref + f" (good from {100 * NEAR_LINK:.0f}%)"
    if share < HALF_OF_LINK:
        return BAD, ref + f" (bad under {100 * HALF_OF_LINK:.0f}%)"
    return INFO, ref


def judge_error_pct(err_pct: float, what: str = "error") -> tuple[str, str]:
    """A model or prediction error in percent (absolute value taken)."""
    if not math.isfinite(err_pct):
        return SUSPECT, f"the {what} is not a number"
    e = abs(err_pct)
    if e <= MODEL_GOOD_PCT:
        return GOOD, f"{what} within {MODEL_GOOD_PCT:g}%"
    if e > MODEL_BAD_PCT:
        return BAD, f"{what} above {MODEL_BAD_PCT:g}%: the model misleads here"
    return INFO, f"{what} between {MODEL_GOOD_PCT:g}% and {MODEL_BAD_PCT:g}%"


def judge_noise_pct(lost_pct: float) -> tuple[str, str]:
    if lost_pct < NOISE_GOOD_PCT:
        return GOOD, f"under {NOISE_GOOD_PCT:g}% of the CPU lost: a quiet node"
    if lost_pct > NOISE_BAD_PCT:
        return BAD, f"over {NOISE_BAD_PCT:g}% of the CPU lost to detours"
    return INFO, f"between {NOISE_GOOD_PCT:g}% and {NOISE_BAD_PCT:g}% of the CPU lost"


def judge_ci(lo: float | None, hi: float | None, points: int | None = None,
             replicas: int | None = None, impossible_below: float | None = None,
             replicas_flag: str = "--replicas") -> tuple[str, str] | None:
    """Why an estimate with this CI is suspect (None when it is not): a CI spanning zero, a fit of fewer than
    3 points, an "interval" from one replica, a CI reaching below ``impossible_below`` (a value the quantity
    cannot take, e.g. a slowdown from added noise under 0: the interval was computed on the wrong scale)."""
    if points is not None and points < 3:
        return SUSPECT, f"a fit of {points} point(s): no uncertainty can be estimated; measure more points"
    if replicas is not None and replicas < 2:
        return SUSPECT, f"one replica: the interval is not an interval; use {replicas_flag} 2 or more"
    if lo is None or hi is None or not (math.isfinite(lo) and math.isfinite(hi)):
        return SUSPECT, "no confidence interval could be computed"
    if impossible_below is not None and lo < impossible_below:
        return SUSPECT, (f"the 95% CI reaches {lo:.3g}, below {impossible_below:g}, a value this quantity cannot "
                         "take: the interval is not to be trusted")
    if lo < 0 < hi:
        return SUSPECT, "the 95% CI spans zero: no effect is measurable at this precision"
    return None


@dataclass
class StepLine:
    characterization: str  # the characterize run's id
    name: str
    status: str  # complete | failed | skipped | not run | interrupted | missing (its run directory is gone)
    detail: str = ""  # the reason of a skip, the error of a failure
    run: str = ""  # the step's run, as an id hpcvar accepts back (parent/steps/child)


@dataclass
class Verdict:
    steps: list[StepLine] = field(default_factory=list)
    findings: list[tuple[str, Headline]] = field(default_factory=list)  # (run id, headline), worst first
    baseline: dict | None = None  # hpcvar.compare result against --baseline
    baseline_error: str = ""
    checks: list[dict] = field(default_factory=list)  # expectations judged (hpcvar.expect.judge)
    expect_path: str = ""
    answer: Answer = field(default_factory=lambda: decide([], [], ""))  # the one line: OK / DEGRADED / UNRELIABLE

    def counts(self) -> dict[str, int]:
        out = {s: 0 for s in STATUSES}
        for _, h in self.findings:
            out[h.status] = out.get(h.status, 0) + 1
        return out

    def summary(self) -> str:
        """One sentence: how many headlines need attention, how many steps did not run."""
        c = self.counts()
        parts = []
        if c[BAD]:
            parts.append(f"{c[BAD]} bad")
        if c[SUSPECT]:
            parts.append(f"{c[SUSPECT]} suspect")
        parts.append(f"{c[GOOD]} good")
        if c[MEASURED]:
            parts.append(f"{c[MEASURED]} measured")
        if c[INFO]:
            parts.append(f"{c[INFO]} without a reference")
        text = "Headlines: " + ", ".join(parts) + "."
        notrun = [s for s in self.steps if s.status != "complete"]
        if self.steps:
            text += f" Steps: {len(self.steps) - len(notrun)} of {len(self.steps)} complete"
            text += (", " + ", ".join(f"{s.name} {s.status}" for s in notrun) + ".") if notrun else "."
        if self.baseline is not None:
            text += (f" Against the baseline: {len(self.baseline['degraded'])} metric(s) degraded, "
                     f"{len(self.baseline['improved'])} improved.")
        return text


def step_lines(parent) -> list[StepLine]:
    """The steps a characterization was asked for, each with its outcome."""
    info = parent.info
    states = info.get("steps") or {}
    names = list((info.get("params") or {}).get("steps") or states)
    out = []
    for name in names:
        st = states.get(name) or {}
        status = st.get("status") or ("interrupted" if info.get("status") == "interrupted" else "not run")
        detail = st.get("reason") or st.get("error") or ""
        run = f"{parent.id}/steps/{st['run']}" if st.get("run") else ""
        if st.get("run") and not (parent.path / "steps" / st["run"] / "run.json").is_file():
            status, detail = "missing", (f"its run steps/{st['run']} is gone (deleted or moved): the report has no "
                                         f"section for it; measure it again with 'hpcvar characterize --resume "
                                         f"{parent.id}'")
        out.append(StepLine(parent.id, name, status, detail, run))
    return out


def pair_baseline(runs: list, baseline) -> dict:
    """{run path: its baseline counterpart}: a characterization's steps by step name, other runs by command."""
    if baseline is None:
        return {}
    cands = baseline.children() if baseline.info.get("command") == "characterize" else [baseline]

    def key(r):
        return (r.info.get("params") or {}).get("step") or r.info.get("command")

    by_key: dict = {}
    for c in cands:
        by_key.setdefault(key(c), c)
    return {str(r.path): by_key[key(r)] for r in runs if key(r) in by_key}


def build(tops: list, sections: list, baseline=None, expectations=None) -> Verdict:
    """``tops``: the runs the report was asked for (characterizations not expanded); ``sections``: the
    (run, Section) pairs of the report; ``baseline``: a Run to compare the first top run against;
    ``expectations``: site expectations (hpcvar.expect) every run's observations are judged against."""
    v = Verdict()
    for top in tops:
        if top.info.get("command") == "characterize":
            v.steps.extend(step_lines(top))
    order = {s: i for i, s in enumerate(STATUSES)}
    found = [(run.id, h) for run, sec in sections for h in sec.headlines]
    v.findings = sorted(found, key=lambda rh: order.get(rh[1].status, len(order)))
    if baseline is not None and tops:
        from hpcvar.compare import compare_runs
        from hpcvar.errors import HpcvarError

        try:
            v.baseline = compare_runs(baseline, tops[0], force=True)
            v.baseline["baseline_id"] = baseline.id
        except HpcvarError as e:
            v.baseline_error = e.render()
    if expectations is not None:
        from hpcvar import expect

        v.expect_path = expectations.path
        v.checks = [c for top in tops for c in expect.judge(expectations, expect.observations_of(top),
                                                            _partition(top))]
    v.answer = answer(v, tops, sections)
    return v


def _partition(run) -> str | None:
    return (run.info.get("params") or {}).get("partition") or \
        ((run.info.get("metadata") or {}).get("launcher") or {}).get("slurm_partition")


def _label(run) -> str:
    return str((run.info.get("params") or {}).get("step") or run.info.get("command") or run.id)


def _section_answers(sections: list, loaded: bool = False) -> tuple[list[str], list[str]]:
    """What the runs' sections say: a screen's own answer, the measurements judged bad (findings) or suspect
    (reasons); models and predictions judge no machine. ``loaded``: other processes or the hypervisor took the
    CPUs while the steps ran (the characterization's load warning), so a measurement judged bad rests on a
    disturbed measurement: a reason, never a finding (a screen judges each item's load itself)."""
    findings: list[str] = []
    reasons: list[str] = []
    for run, sec in sections:
        label = _label(run)
        if run.info.get("command") == "screen":
            a = Answer.from_json((run.info.get("result") or {}).get("answer") or {})
            findings += [f"{label}: {f}" for f in a.findings]
            reasons += [f"{label}: {r}" for r in a.reasons]
            continue
        for h in sec.headlines:
            if h.role == MEASUREMENT and h.status == BAD:
                (reasons if loaded else findings).append(
                    f"{label}: {h.label} {h.value} ({h.reference})" + (", measured under that load" if loaded else ""))
            elif h.role == MEASUREMENT and h.status == SUSPECT:
                reasons.append(f"{label}: {h.label}: {h.reference}")
    return findings, reasons


def answer(v: Verdict, tops: list, sections: list) -> Answer:
    """The one line (hpcvar.answer): a bad measurement makes it DEGRADED, a suspect one UNRELIABLE; models'
    errors and predictions are reported but judge no machine, and a prediction on suspect input is suspect
    (its section says so). Screens answer for themselves; failed steps, load during the run, degradations
    against the baseline and failed expectations count too."""
    from hpcvar.expect import failure_text

    load = [w for w in ((top.info.get("load") or {}).get("warning") for top in tops) if w]
    findings, reasons = _section_answers(sections, loaded=bool(load))
    reasons += [f"step {s.name} {s.status}" + (f": {s.detail}" if s.detail else "") for s in v.steps
                if s.status in ("failed", "interrupted", "not run", "missing")]
    reasons = load + reasons
    if v.baseline is not None:
        findings += [f"{r['metric']}: median {r['baseline_median']:.4g} -> {r['current_median']:.4g} {r['unit']} "
                     f"({r['change_pct']:+.0f}%) against baseline {v.baseline['baseline_id']}"
                     for r in v.baseline["metrics"] if r["verdict"] == "degraded"]
    failed = [c for c in v.checks if c["status"] == "failed"]
    findings += [failure_text(c) for c in failed if c["valid"]]
    reasons += [f"{failure_text(c)}, but {c['why']}" for c in failed if not c["valid"]]
    c = v.counts()
    basis = f"{c[GOOD]} headline(s) good and {c[MEASURED]} measured against their references, none bad or suspect"
    if v.baseline is not None:
        basis += f"; nothing degraded against baseline {v.baseline['baseline_id']}"
    if v.checks:
        basis += f"; {len(v.checks) - len(failed)} of {len(v.checks)} expectations met ({v.expect_path})"
    if not findings and not reasons:
        reasons = _nothing_judged(v, sections)
    return decide(findings, reasons, basis)


def _nothing_judged(v: Verdict, sections: list) -> list[str]:
    """Why an answer would be an OK resting on nothing ([] when something was judged): no measurement of the
    machine was judged good or measured against a reference, and there is no screen, baseline or expectation.
    An inconclusive multi-node noise recording (every headline without a reference), or a report of models
    and predictions only, once answered "OK: 0 headline(s) good and 0 measured"."""
    if v.baseline is not None or v.checks or any(run.info.get("command") == "screen" for run, _ in sections):
        return []
    heads = [h for _, sec in sections for h in sec.headlines]
    if any(h.role == MEASUREMENT and h.status in (GOOD, MEASURED) for h in heads):
        return []
    other = sum(h.role != MEASUREMENT for h in heads)
    return [f"nothing measured was judged against a reference ({len(heads) - other} measurement(s) without one, "
            f"{other} model or prediction headline(s), which judge no machine): give --expect FILE (hpcvar expect) "
            "or --baseline RUN, or measure with hpcvar characterize or hpcvar screen"]
