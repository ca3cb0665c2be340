"""Whole-process speed of the two simulators with their defaults, beside the targets of issue 30.

* **jitter**: ``hpcvar sim jitter --synthetic SPEC --duration 10min --tasks 1048576 --phases 20`` and nothing
  else (the defaults: tree barrier, --threads auto, no figures), timed as a whole process: 1,048,576 x 20
  task-phases per wall second, target >= 20 M/s. Then the C core alone on one thread, in a child process on the
  same trace and workload (``hpcvar.sim.jitter.simulate(threads=1)``, the core's own clock): target >= 50 M/s.
  The two runs must give the same total time (checked).
* **tit**: ``hpcvar sim app INDEX --model M`` per model (none, gige, myrinet, maxmin) on the 64-rank TIT ring of
  benchmarks/simgrid_side_by_side.py (16 nodes x 4 cores, about 2 M actions), whole process: actions per wall
  second, target >= 2 M/s for every model.

Runs are interleaved (one of each per round, --repeat rounds) and the best is kept: the machine may be shared,
and a load that comes and goes hits each command alike. The 1-minute load average (``/proc/loadavg``) is
printed with each figure.

    .venv/bin/python benchmarks/sim_speed.py [--repeat 3] [--only jitter|tit] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SPEC = "250Hz:2us,10Hz:100us,poisson:0.1Hz:1ms"
TASKS, PHASES = 1_048_576, 20
TARGET_JITTER_WHOLE = 20e6  # task-phases/s, whole process, defaults
TARGET_JITTER_CORE = 50e6  # task-phases/s, the core on one thread
TARGET_TIT = 2e6  # actions/s, whole process, every model
MODELS = ("none", "gige", "myrinet", "maxmin")
HPCVAR = [sys.executable, "-m", "hpcvar"]


def load() -> str:
    return open("/proc/loadavg").read().split()[0]


def verdict(value: float, target: float) -> str:
    return f"target >= {target / 1e6:g} M/s ({'meets' if value >= target else 'MISSES'})"


def timed(cmd: list[str]) -> tuple[float, str, str]:
    """(wall s, load before, stdout) of a whole process; a failure stops the benchmark."""
    before = load()
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{p.stderr[-3000:]}")
    return wall, before, p.stdout


def core_alone() -> dict:
    """In a child process: the core on one thread with the CLI's default workload on the same trace."""
    from hpcvar.sim import jitter as J
    from hpcvar.sim.synth import synthesize

    freq = 2.4e9
    trace = synthesize(SPEC, freq, 600.0, seed=1)
    nt = J.NativeTraces(trace.cpus)
    wl = J.Workload(work=int(1e-3 * freq), phases=PHASES, barrier="tree", arity=2, send=0, recv=0, lat_intra=0,
                    lat_inter=0, cores_per_node=len(trace.cpus))
    out = J.simulate(nt, wl, TASKS, J.Alignment("unsync"), seed=1, threads=1)
    return {"core_s": out.elapsed_s, "total": out.total}


def jitter(repeat: int, d: Path) -> None:
    cmd = [*HPCVAR, "sim", "jitter", "--synthetic", SPEC, "--duration", "10min", "--tasks", str(TASKS),
           "--phases", str(PHASES), "--json", "--runs-dir", str(d / "runs")]
    child = [sys.executable, __file__, "--core-alone"]
    whole, core = [], []
    for _ in range(repeat):
        whole.append(timed(cmd))
        core.append(timed(child))
    wall, ld, _ = min(whole)
    best = min(core, key=lambda r: json.loads(r[2])["core_s"])
    c = json.loads(best[2])
    print(f"jitter: {' '.join(cmd[2:])}")
    print(f"  whole process: {wall:.2f} s = {TASKS * PHASES / wall / 1e6:.1f} M task-phases/s (load {ld})   "
          f"{verdict(TASKS * PHASES / wall, TARGET_JITTER_WHOLE)}")
    print(f"  core alone, one thread: {c['core_s']:.3f} s = {TASKS * PHASES / c['core_s'] / 1e6:.1f} M "
          f"task-phases/s (load {best[1]})   {verdict(TASKS * PHASES / c['core_s'], TARGET_JITTER_CORE)}")
    totals = {json.loads(out)["total_cycles"] for _, _, out in whole} | {json.loads(out)["total"] for _, _, out in core}
    if len(totals) != 1:
        raise SystemExit(f"the whole-process runs and the core alone gave different totals {sorted(totals)}")
    print(f"  every run's total: {totals.pop():,.0f} cycles (the same)")


def tit(repeat: int, d: Path) -> None:
    sys.path.insert(0, str(Path(__file__).parent))
    import simgrid_side_by_side as sbs

    nodes, cores = 16, 4
    index = sbs.write_index(d, "ring.txt", sbs.ring(nodes * cores, 2_000_000, 8192 // 8, 100))
    actions = sum(len((d / line).read_text().splitlines()) for line in index.read_text().split())
    runs: dict[str, list] = {m: [] for m in MODELS}
    for _ in range(repeat):
        for m in MODELS:
            runs[m].append(timed([*HPCVAR, "sim", "app", str(index), "--nodes", str(nodes), "--cores-per-node",
                                  str(cores), "--model", m, "--json", "--runs-dir", str(d / "runs")]))
    print(f"tit: hpcvar sim app ring --nodes {nodes} --cores-per-node {cores} --model M ({actions:,} actions, "
          f"{nodes * cores} ranks)")
    for m in MODELS:
        wall, ld, out = min(runs[m])
        makespan = json.loads(out)["runs"][0]["makespan_s"]
        print(f"  {m:8} {wall:.2f} s = {actions / wall / 1e6:.2f} M actions/s (load {ld}), makespan "
              f"{makespan:.6f} s   {verdict(actions / wall, TARGET_TIT)}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--only", choices=("jitter", "tit"), default=None)
    ap.add_argument("--keep", type=Path, default=None, help="keep the traces and runs in this directory")
    ap.add_argument("--core-alone", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    # as hpcvar's CLI does for itself (hpcvar.cli): OpenBLAS's idle threads spin on the other CPU, and the core
    # alone (which imports numpy here) ran 35.6 M task-phases/s beside them and 37.4 without (2026-11-30)
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    if a.core_alone:
        print(json.dumps(core_alone()))
        return
    print(f"CPUs this process may use: {len(os.sched_getaffinity(0))}; best of {a.repeat} interleaved runs")
    with tempfile.TemporaryDirectory() as tmp:
        d = a.keep or Path(tmp)
        (d / "runs").mkdir(parents=True, exist_ok=True)
        if a.only in (None, "jitter"):
            jitter(a.repeat, d)
        if a.only in (None, "tit"):
            tit(a.repeat, d)


if __name__ == "__main__":
    main()
