"""Front end of the native collector and injector, synthetic traces, and the stored noise run.

``record`` runs hv_noise_collect (one pinned thread per CPU), stores the .jtr in a run directory with
the tables ``noise.summary``, ``noise.periods``, ``noise.sources`` and the plots. ``inject`` runs
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
from hpcvar.noise.trace import JitterTrace, cpu_trace_from_events, recorded_starts
from hpcvar.units import parse_time

DEFAULT_MAX_RATE = 200000.0  # buffer budget: events per second per CPU


def parse_cpus(text: str, flag: str = "--cpus") -> list[int]:
    """'all', '1', '0,1', '0-3' -> sorted CPUs available to this process."""
    avail = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))
    if text.strip() == "all":
        return avail
    out = set()
    for part in text.split(","):
        m = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", part)
        if not m:
            raise UsageError(f"'{text}' is not a CPU list", flag, "Give e.g. 0,1 or 0-3 or all")
        lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
        out.update(range(lo, hi + 1))
    bad = sorted(c for c in out if c not in avail)
    if bad:
        raise UsageError(f"CPU {bad[0]} is not available here (available: {','.join(map(str, avail))})", flag,
                         "Choose CPUs from that list")
    return sorted(out)


def _run(argv: list[str], timeout_s: float, what: str) -> subprocess.CompletedProcess:
    try:
        res = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise LaunchError(f"{what} did not finish within {timeout_s:.0f} s", None,
                          "The machine may be overloaded; try a shorter --duration") from None
    if res.returncode != 0:
        msg = (res.stderr.strip().splitlines() or [f"exit code {res.returncode}"])[-1]
        raise LaunchError(f"{what} failed: {msg}", None, "See the message above; check --cpus and permissions")
    return res


def collect(cpus: list[int], duration_s: float, out: Path, threshold_ns: float = 0.0,
            max_rate: float = DEFAULT_MAX_RATE, argv: list[str] | None = None,
            rt_prio: int = 0) -> subprocess.CompletedProcess:
    """Run hv_noise_collect; the .jtr is written atomically to ``out``."""
    exe = find_program("hv_noise_collect")
    max_events = int(duration_s * max_rate) + 4096
    cmd = [str(exe), "--cpus", ",".join(map(str, cpus)), "--duration", repr(float(duration_s)),
           "--threshold-ns", repr(float(threshold_ns)), "--max-events", str(max_events), "--out", str(out), "--rt-prio", str(rt_prio)]
    if argv:
        cmd += ["--argv", shlex.join(argv)]
    return _run(cmd, duration_s * 1.5 + 60, "the collector (hv_noise_collect)")


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
        return cmd


def replay_file(trace: JitterTrace, cpu_index: int, path: Path) -> float:
    """Write one CPU of a trace as 'start_ns duration_ns' lines for the injector; returns its length in ns."""
    from hpcvar.results import atomic_write_text

    c = trace.cpus[cpu_index]
    k = 1e9 / trace.freq_hz
    s, d = recorded_starts(c) * k, c.duration * k
    atomic_write_text(path, "".join(f"{a:.0f} {b:.0f}\n" for a, b in zip(s.tolist(), d.tolist())))
    return c.length * k


def parse_inject_result(stdout: str) -> list[dict]:
    out = []
    for line in stdout.splitlines():
        kv = dict(p.split("=", 1) for p in line.split() if "=" in p)
        if "cpu" in kv:
            out.append({"cpu": int(kv["cpu"]), "bursts": int(kv["bursts"]), "burned_ns": float(kv["burned_ns"]),
                        "late_ns_max": float(kv["late_ns_max"]), "realtime": kv.get("rt") == "1"})
    return out


def inject(spec: InjectSpec) -> list[dict]:
    res = _run(spec.argv(), spec.time_s + 30, "the injector (hv_noise_inject)")
    return parse_inject_result(res.stdout)


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
    dur = parse_time(parts[2], flag, default_unit="us")
    phase = parse_time(parts[3], flag, default_unit="us") if len(parts) == 4 else 0.0
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
            d = int(round(comp["duration_s"] * freq_hz))
            if comp["kind"] == "periodic":
                ph = rng.uniform(0, 1.0 / comp["hz"]) if jitter_phase else comp["phase_s"]
                t = np.arange(ph % (1.0 / comp["hz"]), length_s, 1.0 / comp["hz"])
            else:
                n = rng.poisson(comp["hz"] * length_s)
                t = np.sort(rng.uniform(0, length_s, n))
            s = np.rint(t * freq_hz).astype(np.int64)
            starts.append(s)
            durs.append(np.full(s.size, d, dtype=np.int64))
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
def tables(report: dict) -> dict[str, pd.DataFrame]:
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
                     "migrations": q.get("migrations", 0), "overflow": bool(q.get("overflow", False))})
        for rank, s in enumerate(c["periods"]):
            per.append({"cpu": c["cpu"], "rank": rank, "hz": s["hz"], "strength": s["strength"],
                        "harmonics": s["harmonics"]})
    att = report["attribution"]
    for s in att.get("sources", []) if att.get("available") else []:
        src.append({"cpu": s["cpu"], "kind": s["kind"], "source": s["source"], "count": s["count"],
                    "per_s": s["per_s"]})
    return {"noise.summary": pd.DataFrame(rows),
            "noise.periods": pd.DataFrame(per, columns=["cpu", "rank", "hz", "strength", "harmonics"]),
            "noise.sources": pd.DataFrame(src, columns=["cpu", "kind", "source", "count", "per_s"])}


def json_summary(report: dict) -> dict:
    """The --json form: per CPU the keys of the issue, plus attribution and quality."""
    cpus = []
    for c in report["cpus"]:
        d = {k: c[k] for k in ("cpu", "t_min_ns", "threshold_ns", "events", "events_per_s", "noise_fraction",
                               "max_ns", "mean_ns", "p50_ns", "p90_ns", "p99_ns", "p99_9_ns", "p99_99_ns",
                               "gap_p50_ns", "gap_p99_ns", "length_s")}
        d["periods"] = [{"hz": s["hz"], "strength": s["strength"], "harmonics": s["harmonics"]} for s in c["periods"]]
        d["tick"] = c.get("tick")
        cpus.append(d)
    return {"freq_hz": report["freq_hz"], "kernel": report.get("kernel"), "kernel_hz": report.get("kernel_hz"),
            "source": report.get("source"), "cpus": cpus, "quality": report["quality"],
            "attribution": {k: v for k, v in report["attribution"].items() if k != "sources"}
            | {"top_sources": [s for s in report["attribution"].get("sources", []) if s["per_s"] >= 1.0][:20]}}
