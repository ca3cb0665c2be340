"""Replay speed: a synthetic trace of about 1e6 events across 256 tasks, replayed by hpcvar sim app's engine.

Each task repeats: compute 10 us, irecv from the left neighbour, isend 4 KiB to the right one, wait, wait;
every 50th iteration an allreduce of 8 B (binomial). Prints trace rows (events) per second of replay,
and the engine's internal events per second, for each --model and --engine (native: the C core,
python: the reference engine on a --python-events trace). Lowering and encoding (trace -> flat op
arrays, once per trace whatever the mappings and models) are timed separately.

    .venv/bin/python benchmarks/replay_speed.py [--events 1000000] [--tasks 256] [--model none,maxmin,gige]
        [--engine native,python]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd

from hpcvar.sim.app import Cluster, Simulator, lower, mapping
from hpcvar.traces.native import Trace, make_events


def synthetic(events: int, tasks: int) -> Trace:
    per_iter = 4
    iters = max(1, (events // tasks - 2) // per_iter)
    cols: dict[str, list] = {k: [] for k in ("task", "op", "peer", "bytes", "req", "t_start_ns", "t_end_ns")}

    def add(t, op, peer=-1, nbytes=0, req=-1, ts=0, te=0):
        cols["task"].append(t)
        cols["op"].append(op)
        cols["peer"].append(peer)
        cols["bytes"].append(nbytes)
        cols["req"].append(req)
        cols["t_start_ns"].append(ts)
        cols["t_end_ns"].append(te)

    for t in range(tasks):
        clock, seq = 0, 0
        add(t, "init")
        seq += 1
        for i in range(iters):
            clock += 10_000
            if i % 50 == 49:
                add(t, "allreduce", nbytes=8, ts=clock, te=clock + 5000)
                clock += 5000
                seq += 1
                continue
            add(t, "irecv", (t - 1) % tasks, 4096, ts=clock, te=clock)
            add(t, "isend", (t + 1) % tasks, 4096, ts=clock, te=clock)
            add(t, "wait", req=seq, ts=clock, te=clock + 4000)
            add(t, "wait", req=seq + 1, ts=clock + 4000, te=clock + 4000)
            seq += 4
            clock += 4000
        add(t, "finalize", ts=clock, te=clock)
    return Trace(make_events(pd.DataFrame(cols)), tasks)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--tasks", type=int, default=256)
    ap.add_argument("--model", default="none,maxmin")
    ap.add_argument("--nodes", type=int, default=64)
    ap.add_argument("--engine", default="native", help="comma list of native, python")
    ap.add_argument("--python-events", type=int, default=100_000,
                    help="the Python engine replays a trace of this many events (it is ~100x slower)")
    a = ap.parse_args()
    from hpcvar.sim.replay_native import encode

    cl = Cluster(a.nodes, -(-a.tasks // a.nodes), 1.25e9, 2e-6)
    for engine in a.engine.split(","):
        n = a.events if engine == "native" else min(a.events, a.python_events)
        t0 = time.perf_counter()
        tr = synthetic(n, a.tasks)
        t1 = time.perf_counter()
        ops = lower(tr)[0]
        t2 = time.perf_counter()
        enc = encode(ops) if engine == "native" else None
        t3 = time.perf_counter()
        print(f"[{engine}] trace: {len(tr.events)} events, {a.tasks} tasks (built in {t1 - t0:.1f} s, lowered in "
              f"{t2 - t1:.1f} s" + (f", encoded in {t3 - t2:.1f} s" if enc is not None else "") + ")")
        for m in a.model.split(","):
            sim = Simulator(tr, cl, mapping("rrp", a.tasks, cl), model=m, lowered=ops, engine=engine, encoded=enc)
            s = time.perf_counter()
            res = sim.run()
            dt = time.perf_counter() - s
            print(f"[{engine}] model {m:7s}: replay {dt:.3f} s, {len(tr.events) / dt:,.0f} trace events/s, "
                  f"{res.events / dt:,.0f} engine events/s, makespan {np.max(res.total_s):.4f} s simulated")


if __name__ == "__main__":
    main()
