"""jitSim speed: task-phases per second and memory per task on the issue's workload.

Workload (issues 7 and 18): a synthetic 1-hour trace at 2.4 GHz (250 Hz tick of 2 us, a 10 Hz
daemon of 100 us, Poisson detours of 1 ms at 0.1 Hz), W = 1 ms, binary tree barrier,
S = R = 500 cycles, lambda = 2 us, unsynchronized offsets, 20 phases, 1e3..1M tasks.
Prints, per task count and thread count (--threads 1,2): the wall and CPU time of the C
core (CPU of all its threads), task-phases per wall second, the same including start-up
(the whole hpcvar.sim.jitter.simulate() call: task memory, offsets, the core, the per-task
summaries; wall and CPU), and the memory per task: the core's bytes per task (hv_js_task)
and the growth of the peak RSS of a fresh process per task count, divided by the tasks.
The thread counts must give the same total (checked). Target (issue 18, one thread,
1,048,576 tasks x 20 phases): 1.2e7 task-phases/s including start-up, <= 64 bytes per task.
On a machine shared with other jobs the wall figures are inflated; the CPU figures are not.

    HPCVAR_NATIVE_DIR=build/<dir>/bin .venv/bin/python benchmarks/jitsim_speed.py \
        [--tasks 1000,1048576] [--phases 20] [--threads 1,2]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

SPEC = "250Hz:2us,10Hz:100us,poisson:0.1Hz:1ms"
FREQ = 2.4e9


def _status_kib(key: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def _reset_peak() -> None:
    """Reset VmHWM (Linux: writing 5 to clear_refs), so the peak is measured from here."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def one(ntasks: int, phases: int, seed: int, threads: int, duration_s: float = 3600.0) -> dict:
    """Runs in a fresh process: returns timings and RSS figures."""
    from hpcvar.sim import jitter as J
    from hpcvar.sim.synth import synthesize

    trace = synthesize(SPEC, FREQ, duration_s, seed=seed)
    nt = J.NativeTraces(trace.cpus)
    wl = J.Workload(work=int(1e-3 * FREQ), phases=phases, barrier="tree", arity=2, send=500, recv=500,
                    lat_intra=int(2e-6 * FREQ), lat_inter=int(2e-6 * FREQ), cores_per_node=1)
    J.lib()
    _reset_peak()  # the peak of the trace synthesis is not the simulation's
    rss_before = _status_kib("VmRSS") * 1024
    t0, c0 = time.perf_counter(), time.process_time()
    out = J.simulate(nt, wl, ntasks, J.Alignment("unsync"), seed=seed, threads=threads)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    rss_after = _status_kib("VmHWM") * 1024
    base = J.simulate(None, wl, ntasks, J.Alignment("unsync"), threads=threads)
    return {"tasks": ntasks, "phases": phases, "events": int(trace.cpus[0].events), "trace_bytes": nt.nbytes(),
            "core_s": out.elapsed_s, "wall_s": wall, "cpu_s": cpu, "baseline_core_s": base.elapsed_s,
            "task_phases_per_s": ntasks * phases / out.elapsed_s,
            "rss_growth_bytes": rss_after - rss_before, "peak_rss_bytes": rss_after, "task_bytes": J.TASK_BYTES,
            "core_cpu_s": out.cpu_s, "threads": threads, "total": out.total,
            "slowdown": out.total / base.total - 1}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", default="1000,10000,100000,1048576")
    ap.add_argument("--phases", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--threads", default="1", help="Thread counts to time, e.g. 1,2.")
    ap.add_argument("--duration", type=float, default=3600.0, help="seconds of the synthetic trace")
    ap.add_argument("--one", type=int, default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one is not None:
        print(json.dumps(one(a.one, a.phases, a.seed, int(a.threads), a.duration)))
        return
    thread_list = [int(x) for x in a.threads.split(",")]
    print(f"jitSim speed: 1-hour trace {SPEC} at {FREQ / 1e9:g} GHz, W = 1 ms, binary tree, "
          f"S = R = 500 cycles, lambda = 2 us, {a.phases} phases, threads {a.threads}")
    print("peak RSS per task = (peak RSS during the simulation - RSS before it) / N, after the trace is built")
    print("cpu s: CPU time of the whole process during the run (all threads)")
    print(f"{'tasks':>9} {'threads':>7} {'wall s':>8} {'cpu s':>8} {'task-phases/s (wall)':>20} "
          f"{'ns/task-phase (wall)':>20} {'incl. start-up /s (wall)':>24} {'(cpu)':>10} "
          f"{'peak RSS B/task':>16} {'core B/task':>12} {'slowdown':>9}")

    def child(n, th):
        res = subprocess.run([sys.executable, __file__, "--one", str(n), "--phases", str(a.phases),
                              "--seed", str(a.seed), "--threads", str(th)], capture_output=True, text=True,
                             env=os.environ, check=True)
        return json.loads(res.stdout)

    for n in [int(x) for x in a.tasks.split(",")]:
        totals = set()
        for th in thread_list:
            r = child(n, th)
            totals.add(r["total"])
            print(f"{n:>9} {th:>7} {r['core_s']:>8.3f} {r['core_cpu_s']:>8.3f} {n * a.phases / r['core_s']:>20.3e} "
                  f"{1e9 * r['core_s'] / (n * a.phases):>20.1f} {n * a.phases / r['wall_s']:>24.3e} "
                  f"{n * a.phases / r['cpu_s']:>10.3e} {r['rss_growth_bytes'] / n:>16.1f} "
                  f"{r['task_bytes']:>12} {100 * r['slowdown']:>8.2f}%", flush=True)
        if len(totals) != 1:
            raise SystemExit(f"{n} tasks: the thread counts gave different totals {sorted(totals)}")
    print(f"trace: {r['events']} events, {r['trace_bytes'] / 2**20:.1f} MiB in the core's form")


if __name__ == "__main__":
    main()
