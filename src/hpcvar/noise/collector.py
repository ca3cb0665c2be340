"""Front end of the native collector and injector, synthetic traces, and the stored noise run.

``record`` runs hv_noise_collect (one pinned thread per CPU), stores the .jtr in a run directory with
the tables ``noise.summary``, ``noise.periods``, ``noise.sources`` and the plots. ``collect_attributed``
runs it inside a private tracefs instance (``--attribute``); ``kernel_events``, ``tracing_overhead`` and
``add_matched`` turn that into the matched attribution (hpcvar.noise.matching). ``inject`` runs
hv_noise_inject. ``synth`` makes periodic / Poisson / mixed traces (events merged where they overlap).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from hpcvar._native import find_program
from hpcvar.errors import LaunchError, UsageError
from hpcvar.launch.guard import popen_guard
from hpcvar.noise.trace import JitterTrace, cpu_trace_from_events, recorded_starts
from hpcvar.units import parse_time

DEFAULT_MAX_RATE = 200000.0  # buffer budget: events per second per CPU


def parse_cpus(text: str, flag: str = "--cpus") -> list[int]:
    """'all', '1', '0,1', '0-3' -> sorted CPUs available to this process."""
    avail = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))
    if text.strip() == "all":
        return avail
    out: set[int] = set()
    for part in text.split(","):
        m = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", part)
        if not m:
            raise UsageError(f"'{text}' is not a CPU list", flag, "Give e.g. 0,1 or 0-3 or all")
        lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
        if hi < lo:
            raise UsageError(f"CPU range '{part.strip()}' goes down", flag, "Write ranges as low-high, e.g. 0-3")
        if hi > max(avail):  # before the range is built: 0-99999999999 would fill the memory
            raise UsageError(f"CPU {hi} is not available here (available: {','.join(map(str, avail))})", flag,
                             "Choose CPUs from that list")
        out.update(range(lo, hi + 1))
    bad = sorted(c for c in out if c not in avail)
    if bad:
        raise UsageError(f"CPU {bad[0]} is not available here (available: {','.join(map(str, avail))})", flag,
                         "Choose CPUs from that list")
    return sorted(out)


def _run(argv: list[str], timeout_s: float, what: str) -> subprocess.CompletedProcess:
    try:
        # the program ends with this hpcvar process, kill -9 included (hpcvar.launch.guard)
        res = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, **popen_guard())
    except subprocess.TimeoutExpired:
        raise LaunchError(f"{what} did not finish within {timeout_s:.0f} s", None,
                          "The machine may be overloaded; try a shorter --duration") from None
    if res.returncode != 0:
        msg = (res.stderr.strip().splitlines() or [f"exit code {res.returncode}"])[-1]
        raise LaunchError(f"{what} failed: {msg}", None, "See the message above; check --cpus and permissions")
    return res


def collect(cpus: list[int], duration_s: float, out: Path, threshold_ns: float = 0.0,
            max_rate: float = DEFAULT_MAX_RATE, argv: list[str] | None = None,
            rt_prio: int = 0, method: str = "spin", interval_ns: float = 200_000) -> subprocess.CompletedProcess:
    """Run hv_noise_collect; the .jtr is written atomically to ``out``."""
    exe = find_program("hv_noise_collect")
    max_events = int(duration_s * max_rate) + 4096
    cmd = [str(exe), "--cpus", ",".join(map(str, cpus)), "--duration", repr(float(duration_s)),
           "--threshold-ns", repr(float(threshold_ns)), "--max-events", str(max_events), "--out", str(out),
           "--rt-prio", str(rt_prio)]
    if method != "spin":
        cmd += ["--method", method, "--interval-ns", repr(float(interval_ns))]
    if argv:
        cmd += ["--argv", shlex.join(argv)]
    return _run(cmd, duration_s * 1.5 + 60, "the collector (hv_noise_collect)")


REFERENCE_S = 0.5  # untraced reference recording of --attribute (tracing overhead)


@dataclass
class TracedRecording:
    """What ``collect_attributed`` returns: the collector's result and the raw tracefs output."""

    result: subprocess.CompletedProcess
    texts: dict[int, str]  # per CPU: the text of per_cpu/cpuN/trace
    stats: dict[int, dict]  # per CPU: per_cpu/cpuN/stats (entries, overrun, dropped, lost)
    events: list[str]
    buffer_kb: int
    instance: str
    stale_removed: list[str]


def collect_attributed(cpus: list[int], duration_s: float, out: Path, threshold_ns: float = 0.0,
                       max_rate: float = DEFAULT_MAX_RATE, argv: list[str] | None = None, rt_prio: int = 0,
                       root: Path | None = None) -> TracedRecording:
    """``collect`` inside a private tracefs instance on ``cpus``: tracing is on before the collector starts
    and off after it has exited; the instance is removed on every exit path (error, Ctrl-C, SIGTERM)."""
    from hpcvar.noise import ktrace

    root = root or ktrace.require_tracefs()
    buf = ktrace.buffer_kb_for(duration_s, len(cpus))
    with ktrace.TraceSession(root, cpus, buf) as ts:
        ts.start()
        try:
            res = collect(cpus, duration_s, out, threshold_ns, max_rate, argv, rt_prio)
        finally:
            ts.stop()
        stats = {c: ts.stats(c) for c in cpus}
        texts = {c: ts.read(c) for c in cpus}
        assert ts.path is not None  # set on entering the session
        return TracedRecording(res, texts, stats, list(ts.events), buf, ts.path.name, list(ts.removed))


def kernel_events(rec: TracedRecording, trace: JitterTrace) -> tuple[pd.DataFrame, dict]:
    """The ``noise.kernel_events`` frame (times relative to the collector's common start) and the session
    facts stored with the run (tracefs.json)."""
    from hpcvar.errors import HpcvarError
    from hpcvar.noise import ktrace

    t0 = trace.meta.get("t0_tsc")
    if t0 is None:
        raise HpcvarError("the collector wrote no t0_tsc: it is older than this hpcvar", "--attribute",
                          "Rebuild the native programs (make install)")
    t0 = int(t0)
    tids = {int(c.meta["tid"]) for c in trace.cpus if "tid" in c.meta}
    rows, cpus = [], {}
    for cpu, text in rec.texts.items():
        recs = [r for r in ktrace.parse_trace(text, f"per_cpu/cpu{cpu}/trace") if r.cpu == cpu]
        rows += ktrace.kernel_intervals(recs, tids, cycles_per_ns=trace.freq_hz / 1e9)
        st = rec.stats.get(cpu, {})
        cpus[str(cpu)] = {"records": len(recs), "lost": st.get("lost", 0), "overrun": st.get("overrun", 0),
                          "commit_overrun": st.get("commit_overrun", 0), "dropped": st.get("dropped", 0),
                          "first_cycles": recs[0].ts - t0 if recs else None,
                          "last_cycles": max(r.ts for r in recs) - t0 if recs else None}
    df = pd.DataFrame(rows, columns=["cpu", "source", "kind", "start", "end", "complete"])
    df = df.rename(columns={"start": "start_cycles", "end": "end_cycles"})
    df["start_cycles"] = df["start_cycles"].astype(np.int64) - t0
    df["end_cycles"] = df["end_cycles"].astype(np.int64) - t0
    df["cpu"] = df["cpu"].astype(np.int64)
    df["complete"] = df["complete"].astype(bool)
    session = {"clock": ktrace.CLOCK, "events": rec.events, "buffer_kb": rec.buffer_kb, "instance": rec.instance,
               "stale_instances_removed": rec.stale_removed, "cpus": cpus}
    return df, session


def tracing_overhead(untraced: JitterTrace, traced: JitterTrace, reference_s: float) -> dict:
    """t_min, loop iteration, noise fraction, event rate and mean detour without and with tracing."""
    from hpcvar.noise import analysis

    def per_cpu(t: JitterTrace) -> dict[int, dict]:
        q = {r["cpu"]: r for r in analysis.quality(t)["cpus"]}
        return {c.cpu: analysis.cpu_stats(t, c) | {"loop_ns": q.get(c.cpu, {}).get("loop_ns")} for c in t.cpus}

    u, t = per_cpu(untraced), per_cpu(traced)
    rows = []
    for cpu in sorted(t):
        if cpu not in u:
            continue
        row: dict = {"cpu": cpu}
        for k in ("t_min_ns", "loop_ns", "noise_fraction", "events_per_s", "mean_ns"):
            row[k + "_untraced"], row[k + "_traced"] = u[cpu].get(k), t[cpu].get(k)
        rows.append(row)
    return {"reference_s": reference_s, "cpus": rows,
            "note": f"untraced: a {reference_s:g} s recording just before the traced one, same options; "
                    "tracepoints add their own cost to every traced kernel event (the detour grows), "
                    "not to the loop"}


def add_matched(report: dict, trace: JitterTrace, kev: pd.DataFrame, session: dict):
    """Put the matched attribution (and the tracing overhead) into an analysis report; returns the frames
    (noise.attribution, noise.attribution_summary)."""
    from hpcvar.noise import matching

    det, summ, out = matching.match_trace(trace, kev, session)
    report["matched"] = out
    if session.get("overhead"):
        report["quality"]["tracing"] = session["overhead"]
    return det, summ


@dataclass
class InjectSpec:
    cpus: list[int]
    time_s: float
    period_ns: float = 0.0
    burn_ns: float = 0.0
    phase_ns: float = 0.0
    rt_prio: int = 50
    replay: Path | None = None  # 'start_ns duration_ns' file
    replay_length_ns: float = 0.0
    loop: bool = False
    at_clock: bool = False  # periodic bursts at multiples of the period of the wall clock (+ phase)

    def argv(self) -> list[str]:
        cmd = [str(find_program("hv_noise_inject")), "--cpus", ",".join(map(str, self.cpus)),
               "--time", repr(self.time_s), "--rt-prio", str(self.rt_prio)]
        if self.replay:
            cmd += ["--replay", str(self.replay)]
            if self.loop:
                cmd += ["--loop", "--replay-length-ns", repr(self.replay_length_ns)]
        else:
            cmd += ["--period-ns", repr(self.period_ns), "--burn-ns", repr(self.burn_ns),
                    "--phase-ns", repr(self.phase_ns)]
            if self.at_clock:
                cmd.append("--at-clock")
        return cmd


def replay_file(trace: JitterTrace, cpu_index: int, path: Path) -> float:
    """Write one CPU of a trace as 'start_ns duration_ns' lines for the injector; returns its length in ns."""
    from hpcvar.results import atomic_write_text

    c = trace.cpus[cpu_index]
    k = 1e9 / trace.freq_hz
    s, d = recorded_starts(c) * k, c.duration * k
    atomic_write_text(path, "".join(f"{a:.0f} {b:.0f}\n" for a, b in zip(s.tolist(), d.tolist(), strict=True)))
    return c.length * k


def parse_inject_result(stdout: str) -> list[dict]:
    out = []
    for line in stdout.splitlines():
        kv = dict(p.split("=", 1) for p in line.split() if "=" in p)
        if "cpu" in kv:
            out.append({"cpu": int(kv["cpu"]), "bursts": int(kv["bursts"]), "burned_ns": float(kv["burned_ns"]),
                        "late_ns_max": float(kv["late_ns_max"]), "late_ns_p50": float(kv.get("late_ns_p50", "nan")),
                        "overruns": int(kv.get("overruns", "0")), "realtime": kv.get("rt") == "1"})
    return out


def inject(spec: InjectSpec) -> list[dict]:
    res = _run(spec.argv(), spec.time_s + 30, "the injector (hv_noise_inject)")
    return parse_inject_result(res.stdout)


def add_matched_from_run(report: dict, trace: JitterTrace, run) -> bool:
    """``add_matched`` from what 'noise record --attribute' stored in ``run`` (noise.kernel_events and
    tracefs.json); False when the run was recorded without --attribute."""
    import json

    f = Path(run.path) / "tracefs.json"
    if not (run.has_table("noise.kernel_events") and f.is_file()):
        return False
    add_matched(report, trace, run.read_table("noise.kernel_events"), json.loads(f.read_text()))
    return True


# ---- synthetic traces --------------------------------------------------------------------------------------
def parse_component(text: str, flag: str) -> dict:
    """'periodic:250Hz:5us[:phase=1ms]' or 'poisson:100/s:20us' (durations with time units)."""
    parts = text.split(":")
    kind = parts[0].lower()
    todo = "Use periodic:FREQ:DURATION[:PHASE], e.g. periodic:250Hz:5us:0.5ms, or poisson:RATE:DURATION, " \
           "e.g. poisson:100/s:20us"
    if kind not in ("periodic", "poisson") or len(parts) not in (3, 4) or (kind == "poisson" and len(parts) != 3):
        raise UsageError(f"'{text}' is not a noise component", flag, todo)
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][-+]?\d+)?)\s*(hz|khz|/s)?\s*", parts[1].lower())
    if not m or float(m.group(1)) <= 0:
        raise UsageError(f"'{parts[1]}' is not a positive frequency", flag, todo)
    hz = float(m.group(1)) * (1e3 if m.group(2) == "khz" else 1.0)
    dur = parse_time(parts[2], flag)
    phase = parse_time(parts[3], flag) if len(parts) == 4 else 0.0
    if dur <= 0:
        raise UsageError(f"duration '{parts[2]}' is not positive", flag, todo)
    if kind == "periodic" and dur >= 1.0 / hz:
        raise UsageError(f"'{text}': each detour is as long as the period", flag, "Give a shorter duration")
    return {"kind": kind, "hz": hz, "duration_s": dur, "phase_s": phase}


def synth(components: list[dict], length_s: float, cpus: int, freq_hz: float, seed: int,
          jitter_phase: bool = False) -> JitterTrace:
    """Events of every component on every CPU, merged where they overlap, in the (d, g) form.

    periodic: starts phase + k / hz (``jitter_phase``: each CPU gets a random phase); poisson:
    exponential gaps at the rate; both with the given duration. Overlapping events merge into one from the
    first start to the last end.
    """
    rng = np.random.default_rng(seed)
    length = int(round(length_s * freq_hz))
    out = []
    for cpu in range(cpus):
        starts, durs = [], []
        for comp in components:
            dur = int(round(comp["duration_s"] * freq_hz))
            if comp["kind"] == "periodic":
                ph = rng.uniform(0, 1.0 / comp["hz"]) if jitter_phase else comp["phase_s"]
                t = np.arange(ph % (1.0 / comp["hz"]), length_s, 1.0 / comp["hz"])
            else:
                n = rng.poisson(comp["hz"] * length_s)
                t = np.sort(rng.uniform(0, length_s, n))
            s = np.rint(t * freq_hz).astype(np.int64)
            starts.append(s)
            durs.append(np.full(s.size, dur, dtype=np.int64))
        s = np.concatenate(starts)
        d = np.concatenate(durs)
        o = np.argsort(s, kind="stable")
        s, e = s[o], s[o] + d[o]
        e = np.minimum(e, length)
        keep = s < length
        s, e = s[keep], e[keep]
        if s.size == 0:
            raise UsageError("the synthetic trace has no event", "--length", "Make it longer or the rates higher")
        # merge overlaps: a new group starts where the start is past every earlier end
        run_end = np.maximum.accumulate(e)
        new = np.ones(s.size, dtype=bool)
        new[1:] = s[1:] >= run_end[:-1]
        ms = s[new]
        me = np.maximum.reduceat(e, np.flatnonzero(new))
        out.append(cpu_trace_from_events(cpu, ms, me - ms, length))
    return JitterTrace(float(freq_hz), out, {"tool": "hpcvar noise synth", "components": components,
                                             "seed": seed, "length_s": length_s})


# ---- the stored run ----------------------------------------------------------------------------------------
def tables(report: dict, host: str | None = None) -> dict[str, pd.DataFrame]:
    """The per-CPU tables of one node's analysis; ``host`` (default: this machine's name) labels every row."""
    import socket

    host = host or socket.gethostname()
    rows, per, src = [], [], []
    qual = {q["cpu"]: q for q in report["quality"]["cpus"]}
    for c in report["cpus"]:
        q = qual.get(c["cpu"], {})
        rows.append({"cpu": c["cpu"], "t_min_ns": c["t_min_ns"], "t_min_end_ns": q.get("t_min_end_ns"),
                     "threshold_ns": c["threshold_ns"], "events": c["events"], "length_s": c["length_s"],
                     "events_per_s": c["events_per_s"], "noise_fraction": c["noise_fraction"],
                     "max_ns": c["max_ns"], "mean_ns": c["mean_ns"], "p50_ns": c["p50_ns"], "p90_ns": c["p90_ns"],
                     "p99_ns": c["p99_ns"], "p99_9_ns": c["p99_9_ns"], "p99_99_ns": c["p99_99_ns"],
                     "gap_p50_ns": c["gap_p50_ns"], "gap_p99_ns": c["gap_p99_ns"],
                     "migrations": q.get("migrations", 0), "overflow": bool(q.get("overflow", False)),
                     "unexplained_events": (c.get("unexplained") or {}).get("events"),
                     "unexplained_lost_min": (c.get("unexplained") or {}).get("lost_fraction_min")})
        for rank, s in enumerate(c["periods"]):
            per.append({"cpu": c["cpu"], "rank": rank, "hz": s["hz"], "strength": s["strength"],
                        "harmonics": s["harmonics"]})
    att = report["attribution"]
    for s in att.get("sources", []) if att.get("available") else []:
        src.append({"cpu": s["cpu"], "kind": s["kind"], "source": s["source"], "count": s["count"],
                    "per_s": s["per_s"]})
    out = {"noise.summary": pd.DataFrame(rows),
           "noise.periods": pd.DataFrame(per, columns=["cpu", "rank", "hz", "strength", "harmonics"]),
           "noise.sources": pd.DataFrame(src, columns=["cpu", "kind", "source", "count", "per_s"])}
    for df in out.values():
        df.insert(0, "host", pd.Series([host] * len(df), dtype=object))
    return out


def json_summary(report: dict) -> dict:
    """The --json form: per CPU the keys of the issue, plus attribution and quality."""
    cpus = []
    for c in report["cpus"]:
        d = {k: c[k] for k in ("cpu", "t_min_ns", "threshold_ns", "events", "events_per_s", "noise_fraction",
                               "max_ns", "mean_ns", "p50_ns", "p90_ns", "p99_ns", "p99_9_ns", "p99_99_ns",
                               "gap_p50_ns", "gap_p99_ns", "length_s")}
        d["periods"] = [{"hz": s["hz"], "strength": s["strength"], "harmonics": s["harmonics"]} for s in c["periods"]]
        d["tick"] = c.get("tick")
        d["unexplained"] = c.get("unexplained")
        cpus.append(d)
    from hpcvar.noise.matching import RATE_HOW

    att = {k: v for k, v in report["attribution"].items() if k != "sources"}
    att["top_sources"] = [s for s in report["attribution"].get("sources", []) if s["per_s"] >= 1.0][:20]
    att["how"] = RATE_HOW
    # time-aligned attribution (noise record --attribute): matched, not guessed
    att["matched"] = report.get("matched") or {"available": False,
                                               "note": "not recorded: hpcvar noise record --attribute (root)"}
    return {"freq_hz": report["freq_hz"], "kernel": report.get("kernel"), "kernel_hz": report.get("kernel_hz"),
            "source": report.get("source"), "cpus": cpus, "quality": report["quality"], "attribution": att}
