"""Replay speed and memory: a synthetic trace replayed by ``hpcvar sim app``'s job and by the C core.

The trace (about --events rows across --tasks tasks): each task repeats compute 10 us, irecv from the left
neighbour, isend 4 KiB to the right one, wait, wait; every 50th iteration an allreduce of 8 B (binomial).
It is built with numpy and written as a native Parquet trace, then:

1. end to end: ``hpcvar sim app TRACE --nodes N --mapping rrp --model none --no-plots`` run as the library
   job in a fresh process (read + measured S_m + lower + simulate + store), trace events per wall second;
   memory: the peak RSS of that process (VmHWM of /proc/self/status; not getrusage's ru_maxrss, which a
   process spawned by this one starts at this one's RSS, about 1 GiB with the trace in memory) minus its RSS
   just before the job, per event;
2. the C core per model (none, gige, myrinet, maxmin): one replay of the lowered arrays, trace events per
   second (lowering timed apart, once per trace);
3. with --python-events N, the Python reference engine on a trace of N events, for comparison.

Each figure is printed beside its target (issue 18).

    .venv/bin/python benchmarks/replay_speed.py [--events 10000000] [--tasks 256] [--nodes 64]
        [--model none,gige,myrinet,maxmin] [--python-events 0]
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

import numpy as np
import pandas as pd

TARGET_E2E = 3e6        # events/s, hpcvar sim app end to end, on >= 10M events
TARGET_CORE = 2e6       # events/s per model in the core
TARGET_BYTES = 100.0    # peak memory growth per trace event


def template(events: int, tasks: int) -> dict[str, np.ndarray]:
    """One task's rows (the same for every task): op codes, the peer as -1 left / +1 right / 0 none, bytes,
    req, t_start_ns, t_end_ns."""
    from hpcvar.traces.parquet import OPS

    iters = max(1, -(-(events // tasks - 2) * 50 // 197) + 1)  # 49 iterations of 4 rows, then 1 of 1
    it = np.arange(iters)
    coll = it % 50 == 49
    nrow_it = np.where(coll, 1, 4)
    per_task = 2 + int(nrow_it.sum())
    first = np.concatenate(([1], 1 + np.cumsum(nrow_it)[:-1]))  # seq of each iteration's first row
    op = np.empty(per_task, np.int8)
    dpeer = np.zeros(per_task, np.int32)   # -1 left, +1 right, 0 none
    nbytes = np.zeros(per_task, np.int64)
    req = np.full(per_task, -1, np.int64)
    ts = np.zeros(per_task, np.int64)
    te = np.zeros(per_task, np.int64)
    o = {n: OPS.index(n) for n in ("init", "finalize", "irecv", "isend", "wait", "allreduce")}
    op[0], op[-1] = o["init"], o["finalize"]
    # clock at each iteration's start: 10 us compute, then 4 us (p2p) or 5 us (allreduce)
    dur = np.where(coll, 5000, 4000)
    start = 10_000 * (it + 1) + np.concatenate(([0], np.cumsum(dur)[:-1]))
    s = first[coll]
    op[s], nbytes[s], ts[s], te[s] = o["allreduce"], 8, start[coll], start[coll] + 5000
    s = first[~coll]
    c = start[~coll]
    op[s], dpeer[s], nbytes[s], ts[s], te[s] = o["irecv"], -1, 4096, c, c
    op[s + 1], dpeer[s + 1], nbytes[s + 1], ts[s + 1], te[s + 1] = o["isend"], 1, 4096, c, c
    op[s + 2], req[s + 2], ts[s + 2], te[s + 2] = o["wait"], s, c, c + 4000
    op[s + 3], req[s + 3], ts[s + 3], te[s + 3] = o["wait"], s + 1, c + 4000, c + 4000
    ts[-1] = te[-1] = int(te[-2])
    return {"op": op, "dpeer": dpeer, "bytes": nbytes, "req": req, "t_start_ns": ts, "t_end_ns": te}


def synthetic(events: int, tasks: int):
    """The trace as a Trace (vectorised: one per-task template tiled over the tasks)."""
    from hpcvar.traces.parquet import OPS, Trace

    tp = template(events, tasks)
    op, dpeer, nbytes, req, ts, te = (tp[k] for k in ("op", "dpeer", "bytes", "req", "t_start_ns", "t_end_ns"))
    per_task = len(op)
    task = np.repeat(np.arange(tasks, dtype=np.int32), per_task)
    peer = np.where(np.tile(dpeer, tasks) == 0, -1, (task + np.tile(dpeer, tasks)) % tasks).astype(np.int32)
    ev = pd.DataFrame({"task": task, "seq": np.tile(np.arange(per_task, dtype=np.int64), tasks),
                       "op": pd.Categorical.from_codes(np.tile(op, tasks), categories=OPS), "peer": peer,
                       "bytes": np.tile(nbytes, tasks), "tag": np.zeros(len(task), np.int32),
                       "comm": np.zeros(len(task), np.int32), "t_start_ns": np.tile(ts, tasks),
                       "t_end_ns": np.tile(te, tasks), "req": np.tile(req, tasks)})
    return Trace(ev, tasks, source="synthetic")


# one fresh process per end-to-end run (its peak RSS is its own); replay_stream.py runs it too (stream true)
_CHILD = r"""
import json, resource, sys, time
from hpcvar.kinds.sim_app.job import AppParams, job
from hpcvar.results.context import JobContext
import hpcvar.sim.replay_native, hpcvar.sim.replay_stream, hpcvar.traces.parquet, hpcvar.kinds.sim_app.views
import pyarrow.parquet
def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()
def peak_rss():  # VmHWM: this process's own peak (ru_maxrss would start from the parent's RSS at the spawn)
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM:"))
a = json.loads(sys.argv[1])
base = rss()
t0 = time.perf_counter()
run = job(AppParams(trace=a["trace"], nodes=a["nodes"], mappings=("rrp",), models=tuple(a["models"]), plots=False,
                    stream=a["stream"]), JobContext(runs_dir=a["runs"], argv=["bench"], progress=False))
out = run.info["result"]
wall = time.perf_counter() - t0
peak = peak_rss()
res = [{k: r[k] for k in ("model", "makespan_s", "mean_e_abs_pct", "tasks")} for r in out["runs"]]
print(json.dumps({"wall_s": wall, "base_rss": base, "peak_rss": peak, "events": out["events"], "stream": out["stream"],
                  "stream_ops": out["stream_ops"], "read_s": out["read_s"], "measure_s": out["measure_s"],
                  "lower_s": out["lower_s"], "replay_s": sum(r["replay_s"] for r in out["runs"]),
                  "engine": out["runs"][0]["engine"], "results": res}))
"""


def end_to_end(trace: Path, nodes: int, models: list[str], runs: Path, stream: bool = False) -> dict:
    """``hpcvar sim app``'s job on ``trace`` (mapping rrp) in a fresh process: its timings, peak RSS and results."""
    arg = json.dumps({"trace": str(trace), "nodes": nodes, "models": models, "stream": stream, "runs": str(runs)})
    runs.mkdir(parents=True, exist_ok=True)
    res = subprocess.run([sys.executable, "-c", _CHILD, arg], capture_output=True, text=True,
                         env={**os.environ, "PYTHONWARNINGS": "ignore"})
    if res.returncode != 0:
        sys.exit(res.stderr)
    return json.loads(res.stdout.strip().splitlines()[-1])


def verdict(value: float, target: float, higher_is_better: bool = True) -> str:
    ok = value >= target if higher_is_better else value <= target
    return "meets" if ok else "MISSES"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=10_000_000)
    ap.add_argument("--tasks", type=int, default=256)
    ap.add_argument("--nodes", type=int, default=64)
    ap.add_argument("--model", default="none,gige,myrinet,maxmin")
    ap.add_argument("--python-events", type=int, default=0,
                    help="also replay a trace of this many events with the Python reference engine")
    ap.add_argument("--keep", default=None, help="keep the trace file here")
    a = ap.parse_args()
    from hpcvar.sim.replay import Cluster, Simulator, mapping
    from hpcvar.sim.replay_native import lower_native
    from hpcvar.traces.parquet import write_parquet

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(a.keep or Path(tmp) / "synthetic.trace")
        t0 = time.perf_counter()
        tr = synthetic(a.events, a.tasks)
        t1 = time.perf_counter()
        write_parquet(tr, path)
        n = len(tr.events)
        print(f"trace: {n:,} events, {a.tasks} tasks on {a.nodes} nodes, rrp (built in {t1 - t0:.1f} s, written "
              f"in {time.perf_counter() - t1:.1f} s, {path.stat().st_size / n:.1f} bytes/event on disk)")

        # 1. end to end, in a fresh process (its peak RSS is ours to read)
        e = end_to_end(path, a.nodes, ["none"], Path(tmp) / "runs")
        rate = e["events"] / e["wall_s"]
        per_ev = (e["peak_rss"] - e["base_rss"]) / e["events"]
        print(f"hpcvar sim app end to end ({e['engine']}): {e['wall_s']:.2f} s = read {e['read_s']:.2f} + measured "
              f"{e['measure_s']:.2f} + lower {e['lower_s']:.2f} + replay {e['replay_s']:.2f} + store/other "
              f"{e['wall_s'] - e['read_s'] - e['measure_s'] - e['lower_s'] - e['replay_s']:.2f}")
        print(f"  end to end: {rate / 1e6:6.2f} M events/s   target >= {TARGET_E2E / 1e6:.0f} M on >= 10M events "
              f"({verdict(rate, TARGET_E2E)}{'' if e['events'] >= 10_000_000 else ', trace below 10M events'})")
        print(f"  memory:     {per_ev:6.1f} bytes/event (peak RSS growth of the job: {e['base_rss'] / 2**20:.0f} -> "
              f"{e['peak_rss'] / 2**20:.0f} MiB)   target <= {TARGET_BYTES:.0f} "
              f"({verdict(per_ev, TARGET_BYTES, False)})")

        # 2. the core, per model
        t0 = time.perf_counter()
        enc = lower_native(tr)
        print(f"C lowering: {time.perf_counter() - t0:.2f} s ({n / (time.perf_counter() - t0) / 1e6:.1f} M events/s), "
              f"{len(enc.kind):,} ops, {enc.nbytes() / n:.1f} bytes/event of op arrays")
        cl = Cluster(a.nodes, -(-a.tasks // a.nodes), 1.25e9, 2e-6)
        node_of = mapping("rrp", a.tasks, cl)
        for m in a.model.split(","):
            sim = Simulator(tr, cl, node_of, model=m, lowered=[], engine="native", encoded=enc, keep_rows=False)
            s = time.perf_counter()
            r = sim.run()
            dt = time.perf_counter() - s
            print(f"  core {m:8s} {n / dt / 1e6:6.2f} M events/s   target >= {TARGET_CORE / 1e6:.0f} M "
                  f"({verdict(n / dt, TARGET_CORE)}; {dt:.2f} s, {r.events / dt / 1e6:.2f} M engine events/s, "
                  f"makespan {np.max(r.total_s):.4f} s simulated)")
        if a.python_events:
            small = synthetic(a.python_events, a.tasks)
            for m in a.model.split(","):
                sim = Simulator(small, cl, node_of, model=m, engine="python")
                s = time.perf_counter()
                sim.run()
                dt = time.perf_counter() - s
                print(f"  python reference {m:8s} {len(small.events) / dt / 1e3:8.1f} k events/s "
                      f"({len(small.events):,} events)")


if __name__ == "__main__":
    main()
