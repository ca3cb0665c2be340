"""Tracer overhead on a real application: Debian's LAMMPS (Open MPI), Lennard-Jones melt, 2 ranks.

Alternates runs without and with the tracer (LD_PRELOAD of libhv_trace.so built against the system
Open MPI) and reports the median of LAMMPS' own "Loop time" and of the wall time of mpirun, and the
overhead = the median over repetitions of (with / without - 1), each repetition running both back to
back (in alternating order), with a bootstrap 95% CI of that median. The last traced run is merged into a native
trace (--trace-out) for 'hpcvar sim app'.

Needs: apt-get install lammps libopenmpi-dev; a tracer built against /usr/bin/mpicc:
    MPICC=/usr/bin/mpicc cmake -S . -B build/replay-ompi && cmake --build build/replay-ompi --target hv_trace
Run (as root, Open MPI needs OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1):
    .venv/bin/python benchmarks/trace_overhead_lammps.py --lib build/replay-ompi/bin/libhv_trace.so --reps 5

With --replay BIN (a directory with hv_latency built against the same Open MPI, e.g.
MPICC=/usr/bin/mpicc cmake -S . -B build/ompi && cmake --build build/ompi), the last traced run is then
replayed: the machine's point-to-point parameters are measured with that hv_latency (2 ranks,
``machine_params``), the trace is replayed with them on the machine as it is (1 node x --np cores, rrp,
the measured parameters as shared memory) with two calibrations, and the E_abs of the predicted
communication time per task against the measured one and the breakdown by call kind are printed:
'old' (alpha = median one-way time of 8 B, bandwidth = 4 MiB / its one-way time, hpcvar's default 64 KiB
eager limit) and 'rndv' (Open MPI's eager limit from ompi_info, and for messages above it the bandwidth
and rendezvous latency of the line through the one-way times of 8 KiB and 64 KiB); and on a
what-if cluster of --np Gigabit Ethernet nodes of 2 cores (1gbit, 50us; mappings rrn, rrp, random with
5 replicas; models none, gige, myrinet, maxmin), where the predicted times are printed.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def run_once(cmd: list[str], env: dict, log: Path, timeout: float) -> tuple[float, float]:
    t0 = time.perf_counter()
    subprocess.run(cmd + ["-log", str(log), "-screen", "none"], env=env, check=True, timeout=timeout,
                   stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    m = re.search(r"Loop time of ([0-9.eE+-]+) on", log.read_text())
    if not m:
        raise SystemExit(f"no 'Loop time' in {log}: did LAMMPS run?")
    return float(m.group(1)), wall


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", default=str(HERE.parent / "build/replay-ompi/bin/libhv_trace.so"))
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--np", type=int, default=2)
    ap.add_argument("--input", default=str(HERE.parent / "examples/replay/in.lj"))
    ap.add_argument("--steps", type=int, default=300, help="MD steps (LAMMPS -var steps)")
    ap.add_argument("--mpirun", default="/usr/bin/mpirun")
    ap.add_argument("--lmp", default="lmp")
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--trace-out", default=None, help="write the last traced run as a native trace here")
    ap.add_argument("--replay", default=None, metavar="BIN", help="replay the trace (see the docstring)")
    a = ap.parse_args()
    for tool in (a.mpirun, a.lmp):
        if not shutil.which(tool):
            raise SystemExit(f"{tool} not found: apt-get install lammps")
    if not Path(a.lib).is_file():
        raise SystemExit(f"no tracer library at {a.lib} (see this script's docstring)")
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    cmd = [a.mpirun, "-n", str(a.np), "--oversubscribe", a.lmp, "-in", str(Path(a.input).resolve()),
           "-var", "steps", str(a.steps)]
    work = Path(tempfile.mkdtemp(prefix="hv_lmp_"))
    raw = work / "raw"
    raw.mkdir()
    res = {"plain": [], "traced": []}
    try:
        for r in range(a.reps):
            for mode in ("plain", "traced") if r % 2 == 0 else ("traced", "plain"):
                e = dict(env)
                if mode == "traced":
                    for f in raw.glob("rank.*.hvt"):
                        f.unlink()
                    e.update(LD_PRELOAD=str(Path(a.lib).resolve()), HV_TRACE_DIR=str(raw))
                res[mode].append(run_once(cmd, e, work / f"log.{mode}.{r}", a.timeout))
                print(f"rep {r} {mode:6s}: loop {res[mode][-1][0]:.3f} s, wall {res[mode][-1][1]:.3f} s", flush=True)
        from hpcvar.stats import median_ci

        for k, name in ((0, "LAMMPS loop time"), (1, "mpirun wall time")):
            p = np.median([x[k] for x in res["plain"]])
            t = np.median([x[k] for x in res["traced"]])
            # paired: each repetition ran both, back to back, so slow drifts of the machine cancel in the ratio
            ratios = np.array([tr[k] / pl[k] for tr, pl in zip(res["traced"], res["plain"], strict=True)])
            lo, hi = median_ci(ratios)
            print(f"{name}: median without {p:.3f} s, with tracer {t:.3f} s; paired overhead median "
                  f"{(np.median(ratios) - 1) * 100:+.2f} % (95% CI {(lo - 1) * 100:+.2f} to {(hi - 1) * 100:+.2f} %, "
                  f"{a.reps} pairs)")
        from hpcvar.traces.parquet import merge_raw, write_parquet

        tr = merge_raw(raw, source=" ".join(cmd))
        ev = tr.events
        print(f"trace: {len(ev)} events over {tr.ntasks} ranks ({len(ev) / tr.ntasks:.0f} per rank), clock "
              f"{tr.meta.get('clock')} (read cost tsc {tr.meta.get('clock_cost_tsc_ns')} ns, mono "
              f"{tr.meta.get('clock_cost_mono_ns')} ns)")
        out = Path(a.trace_out) if a.trace_out else work / "lj.trace"
        write_parquet(tr, out)
        print(f"wrote {out}")
        if a.replay:
            replay(out, Path(a.replay), a.np, env)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def hpcvar(args: list[str], env: dict) -> dict:
    import json
    import sys

    res = subprocess.run([sys.executable, "-m", "hpcvar", *args, "--json"], env=env, check=True,
                         capture_output=True, text=True, timeout=1800)
    return json.loads(res.stdout)


# hv_latency sizes of the calibration: 8 B (eager), then two sizes above Open MPI's shared-memory eager limit
# (btl_vader_eager_limit, 4 KiB with the headers) that bracket LAMMPS' messages (28-70 KB in the LJ melt)
RNDV_SIZES = (8192, 65536)


def ompi_eager_limit(default: int = 4096) -> int:
    """Open MPI's shared-memory eager limit (btl_vader_eager_limit, bytes including the headers), or default."""
    try:
        out = subprocess.run(["ompi_info", "--param", "btl", "vader", "--level", "9"], capture_output=True,
                             text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return default
    m = re.search(r'btl_vader_eager_limit" \(current value: "(\d+)"', out)
    return int(m.group(1)) if m else default


def machine_params(env: dict, time_per_size: str = "2s") -> dict:
    """This machine's shared-memory parameters, measured with hv_latency (2 ranks; HPCVAR_NATIVE_DIR in env):
    ``old``: alpha = median one-way time of 8 B, bandwidth = 4 MiB over its one-way time (the two extremes);
    ``rndv``: the same alpha, and the line through the one-way times at RNDV_SIZES (above the eager limit,
    the sizes LAMMPS sends): bandwidth = its slope, rendezvous latency = its intercept - alpha."""
    lo, hi = RNDV_SIZES
    lat = hpcvar(["bench", "latency", "--np", "2", "--sizes", f"8,{lo},{hi},4MiB", "--time-per-size", time_per_size],
                 env)
    t = {s["size"]: s["median_ns"] * 1e-9 for s in lat["sizes"]}
    alpha = t[8]
    slope_bw = (hi - lo) / (t[hi] - t[lo])
    return {"alpha_s": alpha, "bw_4mib": (4 << 20) / t[4 << 20], "bw_rndv": slope_bw,
            "rndv_s": max(t[lo] - lo / slope_bw - alpha, 0.0), "eager": ompi_eager_limit(), "one_way_s": t}


def sim_args(m: dict, which: str) -> list[str]:
    """sim app's shared-memory options for the parameters ``m`` (machine_params): 'old' (alpha and the 4 MiB
    bandwidth, hpcvar's default 64 KiB eager limit) or 'rndv' (Open MPI's eager limit, the rendezvous
    regime's bandwidth and latency)."""
    if which == "old":
        return ["--shm-bandwidth", f"{m['bw_4mib']:.0f}B/s", "--shm-latency", f"{m['alpha_s']:.9f}s"]
    return ["--shm-bandwidth", f"{m['bw_rndv']:.0f}B/s", "--shm-latency", f"{m['alpha_s']:.9f}s",
            "--shm-rndv-latency", f"{m['rndv_s']:.9f}s", "--eager", f"{m['eager']}B"]


def replay(trace: Path, native_bin: Path, np_: int, env: dict) -> None:
    runs = Path(tempfile.mkdtemp(prefix="hv_lmp_runs_"))
    e = dict(env, HPCVAR_NATIVE_DIR=str(native_bin.resolve()), HPCVAR_RUNS=str(runs))
    try:
        stalls(trace)
        m = machine_params(e)
        print(f"machine (hv_latency): alpha {m['alpha_s'] * 1e6:.2f} us, bandwidth at 4 MiB {m['bw_4mib'] / 1e6:.0f} "
              f"MB/s; above the eager limit ({m['eager']} B): {m['bw_rndv'] / 1e6:.0f} MB/s, rendezvous latency "
              f"{m['rndv_s'] * 1e6:.2f} us; one-way " + ", ".join(f"{k} B {v * 1e6:.2f} us"
                                                                   for k, v in m["one_way_s"].items()))
        for which in ("old", "rndv"):
            local = hpcvar(["sim", "app", str(trace), "--nodes", "1", "--cores-per-node", str(np_), "--mapping", "rrp",
                            "--model", "none", "--no-plots", "--breakdown", *sim_args(m, which)], e)
            _print_local(local, np_, which)
        # what-if: the same run on Gigabit Ethernet nodes of 2 cores (rrn spreads the ranks, rrp packs them);
        # the measurement was on shared memory, so only predicted times are printed, no E_abs
        gige = hpcvar(["sim", "app", str(trace), "--nodes", str(np_), "--cores-per-node", "2", "--bandwidth",
                       "1gbit", "--latency", "50us", *sim_args(m, "rndv"),
                       "--mapping", "rrn,rrp,random", "--model", "none,gige,myrinet,maxmin", "--replicas", "5",
                       "--no-plots"], e)
        for r in gige["runs"]:
            comm = np.mean([t["comm_s"] for t in r["tasks"]])
            pen = np.mean([t["avg_penalty"] for t in r["tasks"]])
            print(f"what-if, {np_} GigE nodes x 2 cores: mapping {r['mapping']:6s} model {r['model']:8s} predicted "
                  f"comm {comm:.3f} s per task, makespan {r['makespan_s']:.3f} s, mean penalty {pen:.2f}")
    finally:
        shutil.rmtree(runs, ignore_errors=True)


LONG_NS = 20_000  # a call this long is not a message of LAMMPS' sizes (70 KB take 11 us one way here)


def _inside_ns(a: int, b: int, ps: np.ndarray, pe: np.ndarray) -> int:
    """ns of [a, b] covered by the intervals [ps, pe] (sorted, disjoint: one rank's calls)."""
    lo, hi = np.searchsorted(pe, a), np.searchsorted(ps, b)
    return int(np.clip(np.minimum(pe[lo:hi], b) - np.maximum(ps[lo:hi], a), 0, None).sum())


def stalls(trace: Path, show: bool = True) -> dict[int, dict]:
    """What no alpha-beta model contains, from the trace alone (ranks on one host share its clock): per task,
    the time in calls longer than LONG_NS, and how much of it the other rank spent inside MPI too (both
    stalled together: one of them descheduled, or both) rather than computing (waiting for the other's
    compute, which the replay does reproduce). One row per call: a Sendrecv's or a Waitall's repeats dropped.
    Returns {task: {"calls", "mpi_s", "long_s", "both_s"}}."""
    from hpcvar.traces import load_trace

    ev = load_trace(str(trace), "auto", 1e9).events
    ev = ev[~ev["op"].isin(["init", "finalize"])].drop_duplicates(["task", "t_start_ns", "t_end_ns"])
    out = {}
    for t in sorted(ev["task"].unique()):
        mine, other = ev[ev["task"] == t], ev[ev["task"] != t]
        ps, pe = other["t_start_ns"].to_numpy(), other["t_end_ns"].to_numpy()
        d = (mine["t_end_ns"] - mine["t_start_ns"]).to_numpy()
        long = mine[d > LONG_NS]
        both = sum(_inside_ns(a, b, ps, pe) for a, b in zip(long["t_start_ns"], long["t_end_ns"], strict=True))
        out[int(t)] = {"calls": len(mine), "mpi_s": d.sum() * 1e-9, "long_s": d[d > LONG_NS].sum() * 1e-9,
                       "both_s": both * 1e-9}
        if show:
            print(f"task {t}: {len(mine)} calls, {d.sum() / 1e6:.2f} ms (median {np.median(d) / 1e3:.2f} us); "
                  f"{len(long)} over {LONG_NS / 1e3:.0f} us: {d[d > LONG_NS].sum() / 1e6:.2f} ms, of which the "
                  f"other rank was inside MPI too {both / 1e6:.2f} ms")
    return out


def _print_local(local: dict, np_: int, which: str) -> None:
    """The replay on this machine: E_abs per task, and the breakdown by call kind (measured / predicted ms)."""
    import pandas as pd

    (r,) = local["runs"]
    per = ", ".join(f"task {t['task']}: S_m {t['measured_comm_s']:.4f} s, S_p {t['comm_s']:.4f} s, "
                    f"E_abs {t['e_abs_pct']:.1f} %" for t in r["tasks"])
    print(f"replay on this machine (1 node x {np_}, rrp, parameters '{which}'): mean E_abs {r['mean_e_abs_pct']:.1f} % "
          f"({per}); makespan {r['makespan_s']:.3f} s")
    bd = pd.DataFrame(local["breakdown"]["rows"])
    k = bd.groupby(["task", "kind"], sort=False)[["calls", "measured_s", "predicted_s"]].sum()
    for (task, kind), row in k.iterrows():
        print(f"  task {task} {kind:9s} {int(row.calls):5d} calls: measured {row.measured_s * 1e3:8.3f} ms, "
              f"predicted {row.predicted_s * 1e3:8.3f} ms")


if __name__ == "__main__":
    main()
