"""jitSim validation on real runs: predicted against measured slowdown under injected noise.

For each injection (default: A = 100 Hz x 1 ms on CPU 0; B = 50 Hz x 2 ms on CPUs 0 and 1, in phase):

1. `hpcvar noise record` on CPUs 0,1 without injection (the baseline trace);
2. `hpcvar bench bsp` on 2 pinned ranks without injection (the baseline T0);
3. with `hpcvar noise inject` running: `hpcvar bench bsp --baseline <2>` (measured slowdown
   (T/N)/(T0/N0) - 1), then `hpcvar noise record` (the trace under injection);
4. `hpcvar sim jitter --trace <trace> --tasks 2 --quantum W --phases N --align unsync,sync` on
   both traces: predicted slowdown = T_pred(injected trace) / T_pred(baseline trace) - 1 (and
   T_pred / (N*W) - 1 beside the measured T / (N*W) - 1).

The ranks and the collector run SCHED_FIFO at --rt-prio (default 10, below the injector's 50):
other users' processes cannot preempt them, so the trace and the benchmark see the same noise
(kernel, the injector, RT throttling). Takes about a minute; prints a Markdown table and writes
the numbers as JSON (--out). Every run is kept in --runs-dir.

    HPCVAR_NATIVE_DIR=build/<dir>/bin .venv/bin/python benchmarks/jitsim_validation.py \
        [--quantum 1ms] [--phases 1000] [--repeat 3] [--record 3s] [--runs-dir DIR] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HPCVAR = [sys.executable, "-m", "hpcvar"]
INJECTIONS = {  # name -> (cpus, period, burn)
    "A": ("0", "10ms", "1ms"),
    "B": ("0,1", "20ms", "2ms"),
}


def hv(args: list[str], timeout: float = 300) -> dict:
    """Run an hpcvar command with --json and return its JSON (stderr passes through)."""
    cmd = [*HPCVAR, *args, "--json"]
    print("$ hpcvar " + " ".join(args), file=sys.stderr, flush=True)
    res = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, timeout=timeout)
    if res.returncode != 0:
        raise SystemExit(f"hpcvar {' '.join(args)} failed with exit status {res.returncode}")
    return json.loads(res.stdout)


class Injector:
    """`hpcvar noise inject` in its own process group, stopped (group-wide, by its id) on exit."""

    def __init__(self, cpus: str, period: str, burn: str, seconds: float, rt_prio: int):
        args = ["noise", "inject", "--cpus", cpus, "--period", period, "--burn", burn, "--time",
                f"{seconds:g}s", "--rt-prio", str(rt_prio)]
        print("$ hpcvar " + " ".join(args) + " &", file=sys.stderr, flush=True)
        self.proc = subprocess.Popen([*HPCVAR, *args], stdout=subprocess.DEVNULL, start_new_session=True)

    def __enter__(self):
        time.sleep(1.0)  # let the injector start its threads
        if self.proc.poll() is not None:
            raise SystemExit(f"the injector stopped at once (exit status {self.proc.returncode})")
        return self

    def __exit__(self, *exc):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


def record(path: Path, seconds: str, rt_prio: int, runs: str) -> dict:
    return hv(["noise", "record", "--cpus", "0,1", "--duration", seconds, "--rt-prio", str(rt_prio), "--no-plots",
               "--out", str(path), "--runs-dir", runs])


def bsp(a, runs: str, baseline: str | None = None) -> dict:
    args = ["bench", "bsp", "--np", "2", "--quantum", a.quantum, "--phases", str(a.phases), "--repeat",
            str(a.repeat), "--rt-prio", str(a.rt_prio), "--runs-dir", runs, "--timeout", "120s"]
    return hv(args + (["--baseline", baseline] if baseline else []))


def simulate(trace: Path, a, runs: str) -> dict:
    out = hv(["sim", "jitter", "--trace", str(trace), "--tasks", "2", "--quantum", a.quantum, "--phases",
              str(a.phases), "--align", "unsync,sync", "--replicas", str(a.replicas), "--seed", "1", "--no-plots",
              "--runs-dir", runs])
    return {p["config"].split()[-1]: p for p in out["points"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quantum", default="1ms")
    ap.add_argument("--phases", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--record", default="3s", help="length of each recorded trace")
    ap.add_argument("--replicas", type=int, default=20, help="simulated replicas per alignment")
    ap.add_argument("--rt-prio", type=int, default=10, help="SCHED_FIFO priority of ranks and collector")
    ap.add_argument("--inject", default="A,B", help="injections to run (A, B)")
    ap.add_argument("--runs-dir", default=None)
    ap.add_argument("--out", default=None, help="write the numbers as JSON here")
    a = ap.parse_args()
    runs = a.runs_dir or tempfile.mkdtemp(prefix="hpcvar-validation-")
    work = Path(runs)
    work.mkdir(parents=True, exist_ok=True)

    base_trace = work / "base.jtr"
    record(base_trace, a.record, a.rt_prio, runs)
    base = bsp(a, runs)
    pred_base = simulate(base_trace, a, runs)
    rows = []
    for name in a.inject.split(","):
        cpus, period, burn = INJECTIONS[name]
        trace = work / f"inject-{name}.jtr"
        with Injector(cpus, period, burn, 600, 50):
            meas = bsp(a, runs, baseline=base["run"])
            record(trace, a.record, a.rt_prio, runs)
        pred = simulate(trace, a, runs)
        row = {"injection": name, "cpus": cpus, "period": period, "burn": burn,
               "measured_slowdown": meas["slowdown"], "measured_slowdown_ci": meas["slowdown_ci"],
               "measured_vs_compute": meas["slowdown_vs_compute"], "baseline_vs_compute": base["slowdown_vs_compute"],
               "measured_run": meas["run"], "trace": str(trace)}
        for align in ("unsync", "sync"):
            t, t0 = pred[align]["total_cycles"], pred_base[align]["total_cycles"]
            row[f"predicted_{align}"] = t / t0 - 1.0
            row[f"predicted_{align}_vs_compute"] = pred[align]["slowdown"]
            row[f"predicted_base_{align}_vs_compute"] = pred_base[align]["slowdown"]
        rows.append(row)
    result = {"quantum": a.quantum, "phases": a.phases, "repeat": a.repeat, "replicas": a.replicas,
              "rt_prio": a.rt_prio, "baseline_run": base["run"], "runs_dir": runs, "rows": rows}
    if a.out:
        Path(a.out).write_text(json.dumps(result, indent=2) + "\n")

    def pct(x: float) -> str:
        return f"{100 * x:+.1f}%"

    print(f"\nW = {a.quantum}, N = {a.phases}, 2 ranks, {a.repeat} repetitions, {a.replicas} simulated replicas; "
          f"baseline measured T/(N*W) - 1 = {pct(base['slowdown_vs_compute'])}, predicted "
          f"{pct(pred_base['unsync']['slowdown'])} (unsync) / {pct(pred_base['sync']['slowdown'])} (sync)\n")
    print("| injection | measured (T/N)/(T0/N0) - 1 [95% CI] | predicted, unsync | predicted, sync "
          "| measured T/(NW) - 1 | predicted T/(NW) - 1, unsync / sync |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        lo, hi = r["measured_slowdown_ci"]
        print(f"| {r['injection']}: CPUs {r['cpus']}, every {r['period']} x {r['burn']} "
              f"| {pct(r['measured_slowdown'])} [{pct(lo)}, {pct(hi)}] | {pct(r['predicted_unsync'])} "
              f"| {pct(r['predicted_sync'])} | {pct(r['measured_vs_compute'])} "
              f"| {pct(r['predicted_unsync_vs_compute'])} / {pct(r['predicted_sync_vs_compute'])} |")
    print(f"\nruns in {runs}")


if __name__ == "__main__":
    main()
