"""Overhead of the OS-jitter collector (hv_noise_collect) itself, printed as figures.

1. The loop: t_min (smallest back-to-back TSC difference) and the mean loop iteration (time not in detours /
   iterations) over --reps recordings of --duration at the default threshold (SCHED_FIFO --rt-prio, 10).
2. Recording one event, directly: with a 1 ns threshold every iteration is an event, so the preallocated
   buffer (2M events) fills; time per iteration minus the plain loop iteration = the cost of storing one event
   (two stores and the rdtscp). That cost is below the threshold, so it is never a detour itself: times the
   event rate of a normal recording, it is the CPU share the collector spends on itself, unreported.
3. A known event rate, seen from outside: hv_noise_inject takes 100 us at 200 Hz (2% of the CPU, SCHED_FIFO
   50) on the CPU while the collector records there: the extra detours >= 75 us per second (against 1), their
   median, and the extra noise fraction against the injected 2%. A burst ends at its due time + 100 us, its
   wake-up included, so the excess is the switch back (overruns: woken later than 100 us, a longer detour).
4. --attribute (root and tracefs only): alternating untraced / traced recordings (private tracefs instance,
   irq, softirq, irq_vectors, sched_switch): t_min, loop, noise fraction, events/s, the median detour of the
   10-100 us class (the 250 Hz tick here), kernel trace records per second.

    .venv/bin/python benchmarks/noise_collector_overhead.py [--cpu 1] [--reps 3] [--duration 2]
    HPCVAR_NATIVE_DIR=build/dev/bin .venv/bin/python benchmarks/noise_collector_overhead.py   # a dev build
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

from hpcvar.errors import HpcvarError
from hpcvar.noise import analysis, collector
from hpcvar.noise.formats import read_jtr


def _stats(path: Path) -> dict:
    t = read_jtr(path)
    c = t.cpus[0]
    ns = 1e9 / t.freq_hz
    s = analysis.cpu_stats(t, c)
    q = analysis.quality(t)["cpus"][0]
    d = c.duration * ns
    tick = d[(d >= 1e4) & (d < 1e5)]
    return {"t_min_ns": s["t_min_ns"], "loop_ns": q.get("loop_ns"), "noise": s["noise_fraction"],
            "events_per_s": s["events_per_s"], "tick_median_ns": float(np.median(tick)) if tick.size else float("nan"),
            "events": c.events, "iterations": c.meta.get("iterations", 0), "length_s": c.length * ns / 1e9,
            "overflow": bool(c.meta.get("overflow")), "trace": t, "d_ns": d}


def _mean(rows: list[dict], k: str) -> float:
    return float(np.mean([r[k] for r in rows]))


def _sd(rows: list[dict], k: str) -> float:
    return float(np.std([r[k] for r in rows], ddof=1)) if len(rows) > 1 else 0.0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cpu", type=int, default=1 if 1 in os.sched_getaffinity(0) else 0)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--duration", type=float, default=2.0, help="seconds per recording")
    ap.add_argument("--rt-prio", type=int, default=10,
                    help="SCHED_FIFO priority of the collector in 1 and 4 (0: normal scheduler, where other "
                         "users' processes make the noise fraction swing)")
    a = ap.parse_args()
    d = Path(tempfile.mkdtemp(prefix="hv_noise_overhead_"))
    f = d / "t.jtr"
    cpu = [a.cpu]
    print(f"CPU {a.cpu}, {a.reps} x {a.duration:g} s per configuration, collector "
          + (f"SCHED_FIFO {a.rt_prio}" if a.rt_prio else "at the normal scheduler"))

    base = _loop(a, cpu, f)
    _event_cost(a, cpu, f, base)
    _injected(a, cpu, f, base)
    _attribute(a, cpu, f)
    shutil.rmtree(d, ignore_errors=True)


def _loop(a, cpu: list[int], f: Path) -> list[dict]:
    """1. the loop"""
    base = []
    for _ in range(a.reps):
        collector.collect(cpu, a.duration, f, rt_prio=a.rt_prio)
        base.append(_stats(f))
    tmin, loop = _mean(base, "t_min_ns"), _mean(base, "loop_ns")
    print(f"1. loop: t_min {tmin:.2f} ns, mean loop iteration {loop:.2f} ns ({loop / tmin:.2f} x t_min); "
          f"{_mean(base, 'events_per_s'):.0f} events/s, noise fraction {100 * _mean(base, 'noise'):.2f}% "
          f"(sd {100 * _sd(base, 'noise'):.2f}%)")
    return base


def _event_cost(a, cpu: list[int], f: Path, base: list[dict]) -> None:
    """2. one event, directly"""
    loop = _mean(base, "loop_ns")
    per = []
    for _ in range(a.reps):
        collector.collect(cpu, 1.0, f, threshold_ns=1.0, max_rate=2e6, rt_prio=10)
        s = _stats(f)
        assert s["overflow"] and s["events"] == s["iterations"], "expected every iteration to be an event"
        per.append(s["length_s"] * 1e9 / s["iterations"])
    it_ns = float(np.min(per))
    cost = it_ns - loop
    rate = _mean(base, "events_per_s")
    print(f"2. recording an event: {it_ns:.1f} ns per iteration when every iteration is one (best of {a.reps}), "
          f"so {cost:.1f} ns per event above the plain loop; at {rate:.0f} events/s that is "
          f"{100 * cost * rate / 1e9:.3f}% "
          "of the CPU, not in the noise fraction")


def _injected(a, cpu: list[int], f: Path, base: list[dict]) -> None:
    """3. a known injected event rate"""
    burn_ns, period_ns = 100e3, 5e6
    base_long = float(np.mean([(r["d_ns"] >= 0.75 * burn_ns).sum() / r["length_s"] for r in base]))
    rows = []
    for _ in range(a.reps):
        inj = subprocess.Popen(collector.InjectSpec(cpu, a.duration + 2.0, period_ns, burn_ns, rt_prio=50).argv(),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            time.sleep(0.3)
            collector.collect(cpu, a.duration, f, rt_prio=a.rt_prio)
            out, _ = inj.communicate(timeout=60)
        finally:
            if inj.poll() is None:
                inj.kill()
                inj.wait()
        rep = collector.parse_inject_result(out)[0]
        rt = rep["realtime"]
        s = _stats(f)
        long_ = s["d_ns"][s["d_ns"] >= 0.75 * burn_ns]
        rows.append({"rate": long_.size / s["length_s"] - base_long, "median_ns": float(np.median(long_)),
                     "noise": s["noise"], "rt": rt, "late_ns": rep["late_ns_p50"],
                     "overruns": rep["overruns"] / max(rep["bursts"], 1)})
    inj_frac, rate_inj = burn_ns / period_ns, 1e9 / period_ns
    extra = _mean(rows, "noise") - _mean(base, "noise")
    print(f"3. injected {rate_inj:.0f}/s x {burn_ns / 1e3:g} us ({100 * inj_frac:.1f}% of the CPU, hv_noise_inject "
          f"{'SCHED_FIFO 50' if all(r['rt'] for r in rows) else 'SCHED_FIFO REFUSED'}): "
          f"{_mean(rows, 'rate'):.0f}/s more detours >= {0.75 * burn_ns / 1e3:g} us than in 1, median "
          f"{_mean(rows, 'median_ns') / 1e3:.1f} us; noise fraction {100 * _mean(base, 'noise'):.2f}% -> "
          f"{100 * _mean(rows, 'noise'):.2f}%: +{100 * extra:.2f}% for {100 * inj_frac:.1f}% injected, i.e. "
          f"{extra / rate_inj * 1e6:.0f} us of CPU per {burn_ns / 1e3:g} us burst; injector woke "
          f"{_mean(rows, 'late_ns') / 1e3:.1f} us late (median), "
          f"{100 * _mean(rows, 'overruns'):.1f}% of bursts overran")


def _attribute(a, cpu: list[int], f: Path) -> None:
    """4. --attribute"""
    try:
        from hpcvar.noise import ktrace

        root = ktrace.require_tracefs()
    except HpcvarError as e:
        print(f"4. --attribute: skipped ({e.render()})")
        return
    un, tr = [], []
    for _ in range(a.reps):
        collector.collect(cpu, a.duration, f, rt_prio=a.rt_prio)
        un.append(_stats(f))
        rec = collector.collect_attributed(cpu, a.duration, f, rt_prio=a.rt_prio, root=root)
        s = _stats(f)
        kev, session = collector.kernel_events(rec, s["trace"])
        s["records_per_s"] = session["cpus"][str(a.cpu)]["records"] / s["length_s"]
        s["lost_records"] = session["cpus"][str(a.cpu)]["lost"]
        tr.append(s)
    print(f"4. --attribute (untraced -> traced, mean of {a.reps} alternating pairs): "
          f"t_min {_mean(un, 't_min_ns'):.2f} -> {_mean(tr, 't_min_ns'):.2f} ns, "
          f"loop {_mean(un, 'loop_ns'):.2f} -> {_mean(tr, 'loop_ns'):.2f} ns, "
          f"noise fraction {100 * _mean(un, 'noise'):.2f}% -> {100 * _mean(tr, 'noise'):.2f}% "
          f"(sd {100 * _sd(un, 'noise'):.2f}% / {100 * _sd(tr, 'noise'):.2f}%), "
          f"events {_mean(un, 'events_per_s'):.0f} -> {_mean(tr, 'events_per_s'):.0f}/s, "
          f"median 10-100 us detour {_mean(un, 'tick_median_ns') / 1e3:.1f} -> "
          f"{_mean(tr, 'tick_median_ns') / 1e3:.1f} us; "
          f"{_mean(tr, 'records_per_s'):.0f} trace records/s, {sum(s['lost_records'] for s in tr)} lost")


if __name__ == "__main__":
    main()
