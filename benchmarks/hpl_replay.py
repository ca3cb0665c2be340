"""Linpack (HPL in Debian's hpcc) traced on the testbed and replayed as in Vienne et al. (Figures 8-9).

Root only (network namespaces). Steps, each printed:
1. a testbed of 4 hosts with 2 slots each, links shaped at --rate (hpcvar testbed up, own state file);
2. the tracer and hv_latency built against Debian's Open MPI (hpcc's MPI) in --build;
3. the testbed measured with that hv_latency: one-way 8 B latency and 4 MiB bandwidth between two hosts
   (the network) and between two ranks of one host (shared memory), and between two hosts the bytes a 1 MiB
   MPI_Send leaves in flight when it returns (the TCP send buffer: `--send-buffer` of the replay); the bytes
   Open MPI's TCP transport sends with a rendezvous request come from ompi_info (`--rndv-first`);
4. for each placement of --placements: hpcc with 4 ranks (--ranks) traced (HPL N x NB on a 1 x 4 grid with the
   increasing-ring broadcast: task n sends to n + 1), placed as mapping rrn (rank r on host r mod 4) or
   rrp (rank r on host r div 2) of a 4-node x 2-core cluster; the HPL section cut out of the trace
   (hpcvar trace cut --after-collective -1);
5. each HPL trace replayed on 4 nodes x 2 cores with the measured parameters, every mapping (rrn, rrp,
   random with --replicas) and model (none, gige, myrinet, maxmin). For each placement that ran: E_abs per
   task of every model's prediction (the trace replayed with the mapping that ran) and, across placements,
   of a prediction made from the other placement's trace; the mappings ranked by predicted and by
   measured communication time; with each variant's compute per task, the floor of each mean E_abs (``floor``:
   the least any prediction with that compute reaches whose tasks end together, as HPL's do);
6. figures in --figures: per placement that ran, per task measured and predicted communication time
   (bars, one per model) and the best model's E_abs (line); the mappings' predicted and measured times;
7. with --overhead-reps R: the tracer's overhead on HPL, R pairs of local hpcc runs (2 ranks, N
   --overhead-n) without and with the tracer in alternating order; HPL's own solve time and the wall time,
   the paired median overhead with a bootstrap 95% CI (as benchmarks/trace_overhead_lammps.py).

    .venv/bin/python benchmarks/hpl_replay.py [--rate 200mbit] [--n 2000] [--nb 80] [--placements rrn,rrp]
        [--figures docs/img] [--overhead-reps 8] [--keep DIR] [--prefix hvhpl-] [--ranks 4] [--run-delay]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
MODELS = ("none", "gige", "myrinet", "maxmin")
MAPPINGS = ("rrn", "rrp", "random")
OMPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
# The testbed's 4 hosts share this machine's 2 cores. Open MPI's idle ranks busy-poll unless it knows the node is
# oversubscribed, and it does not (each testbed host offers 2 slots): then a rank whose message has arrived waits
# for a scheduler tick (4 ms here) to get a core from a spinning one, and HPL's small messages cost 4-12 ms
# instead of microseconds (measured; docs/replay.md, "Linpack"). Real nodes have their own cores: make idle
# ranks yield, as Open MPI does by itself when it knows it is oversubscribed (--no-yield: as before).
YIELD_ENV = {"OMPI_MCA_mpi_yield_when_idle": "1"}
PLACEMENT = {"rrn": ("host", 1), "rrp": ("slot", 2)}  # testbed launcher: map_by, ranks per host


def hpcvar(args: list[str], env: dict, timeout: float = 1800) -> str:
    res = subprocess.run([sys.executable, "-m", "hpcvar", *args], env=env, capture_output=True, text=True,
                         timeout=timeout)
    if res.returncode:
        raise SystemExit(f"hpcvar {' '.join(args)} failed ({res.returncode}):\n{res.stderr[-3000:]}")
    return res.stdout


def build_ompi(build: Path) -> Path:
    """The tracer and hv_latency against Debian's Open MPI (/usr/bin/mpicc): hpcc's MPI."""
    cmake = shutil.which("cmake", path=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    env = dict(os.environ, MPICC="/usr/bin/mpicc")
    for argv in ([cmake, "-S", str(ROOT), "-B", str(build)],
                 [cmake, "--build", str(build), "--target", "hv_trace", "hv_latency", "-j2"]):
        subprocess.run(argv, env=env, check=True, capture_output=True, timeout=900)
    return build / "bin"


def measure(env: dict, ranks_per_node: int) -> tuple[float, float, float]:
    """(one-way 8 B latency s, 4 MiB bandwidth B/s, bytes still in flight when a 1 MiB MPI_Send returned)
    between two ranks on two hosts (1) or on one host (2)."""
    out = json.loads(hpcvar(["bench", "latency", "--launcher", "testbed", "--np", "2", "--ranks-per-node",
                             str(ranks_per_node), "--sizes", "8,1MiB,4MiB", "--iters", "30", "--min-iters", "30",
                             "--warmup", "3", "--json"], env, timeout=300))
    by = {s["size"]: s for s in out["sizes"]}
    alpha = by[8]["median_ns"] * 1e-9
    data = by[4 << 20]["median_ns"] * 1e-9 - alpha
    if alpha > 1e-3 or data <= 0:
        # seen here while other jobs compiled: Open MPI's ranks yield the CPU and each message waited a 4 ms tick
        raise SystemExit(f"the point-to-point measurement is disturbed ({ranks_per_node} rank(s) per host: 8 B in "
                         f"{alpha * 1e6:.0f} us, 4 MiB in {by[4 << 20]['median_ns'] / 1e6:.2f} ms; load average "
                         f"{os.getloadavg()[0]:.1f}): run this on a quiet machine")
    return alpha, (4 << 20) / data, float(by[1 << 20]["buffered_bytes"])


def trace_hpcc(env: dict, state: Path, lib: Path, work: Path, placement: str, timeout: float,
               cpu_clock: str | None = "user", ranks: int = 4) -> Path:
    """hpcc traced on the testbed in one placement (HPL's result printed); returns the HPL section's trace."""
    from hpcvar.launch.base import LaunchSpec
    from hpcvar.testbed.launcher import TestbedLauncher
    from hpcvar.traces.hpcc import hpl_results

    run = work / placement
    raw = run / "raw"
    raw.mkdir(parents=True)
    shutil.copy(work / "hpccinf.txt", run / "hpccinf.txt")
    map_by, rph = PLACEMENT[placement]
    argv, _ = TestbedLauncher(map_by=map_by, ranks_per_host=rph, mpiexec="/usr/bin/mpirun", state_path=state
                              ).command(LaunchSpec(np=ranks, exe=Path(shutil.which("hpcc") or "hpcc"), args=[],
                                                   env={"LD_PRELOAD": str(lib), "HV_TRACE_DIR": str(raw)}))
    full = run / "hpcc.trace"
    t0 = time.perf_counter()
    res = subprocess.run([sys.executable, "-m", "hpcvar", "trace", "-o", str(full), "--raw-dir", str(raw),
                          *(["--cpu-time", "--cpu-clock", cpu_clock] if cpu_clock else ["--no-cpu-time"]),
                          "--timeout", f"{timeout:.0f}s", "--json",
                          "--", *argv], env=env, cwd=run,
                         capture_output=True, text=True, timeout=timeout + 120)
    if res.returncode:
        raise SystemExit(f"hpcc under the tracer failed ({res.returncode}):\n{res.stderr[-3000:]}")
    wall = time.perf_counter() - t0
    hpl = run / "hpl.trace"
    hpcvar(["trace", "cut", str(full), "-o", str(hpl), "--after-collective", "-1"], env)
    result = hpl_results(run / "hpccoutf.txt")[-1]
    print(f"{placement}: hpcc traced in {wall:.0f} s; HPL N={result.n} NB={result.nb} {result.p}x{result.q}: "
          f"{result.time_s:.2f} s, {result.gflops:.3g} Gflop/s", flush=True)
    return hpl


def rndv_first() -> int:
    """Bytes Open MPI's TCP transport sends with a rendezvous request (btl_tcp_rndv_eager_limit), from
    ompi_info: the replay's --rndv-first."""
    res = subprocess.run(["ompi_info", "--parsable", "--param", "btl", "tcp", "--level", "9"], capture_output=True,
                         text=True, timeout=60)
    for line in res.stdout.splitlines():
        if line.startswith("mca:btl:tcp:param:btl_tcp_rndv_eager_limit:value:"):
            return int(line.rsplit(":", 1)[1])
    raise SystemExit("ompi_info does not show btl_tcp_rndv_eager_limit: is Debian's Open MPI installed?")


def replay(env: dict, trace: Path, net: tuple, shm: tuple, replicas: int, buf: int, first: int,
           compute: str = "wall") -> dict:
    out = json.loads(hpcvar(["sim", "app", str(trace), "--nodes", "4", "--cores-per-node", "2",
                             "--bandwidth", f"{net[1]:.6g}B/s", "--latency", f"{net[0]:.6g}s",
                             "--send-buffer", str(buf), "--rndv-first", str(first),
                             "--shm-bandwidth", f"{shm[1]:.6g}B/s", "--shm-latency", f"{shm[0]:.6g}s",
                             "--mapping", ",".join(MAPPINGS), "--model", ",".join(MODELS), "--compute", compute,
                             "--replicas", str(replicas), "--no-plots", "--json"], env))
    return {(r["mapping"], r["model"]): r for r in out["runs"]}


# How the replay reads a trace (issue 28): "before" is the trace as the tracer recorded it before polls and
# probes were traced (the time a task spun in MPI_Iprobe counted as computation, S_m without it); "wall" the
# trace as recorded now (polls are MPI time, a probe waits for its message); "cpu" also takes each compute
# burst's CPU time (the work on a core of its own, without the time its thread was descheduled): its user time by
# default (--cpu-clock), which leaves out the network's softirq work that this kernel charges to the computing
# thread it interrupts (docs/replay.md, run 9).
VARIANTS = {"before": "polls as compute, probes not recorded (the tracer before issue 28)",
            "wall": "compute = the gap less the polls; a probe waits for its message",
            "cpu": "as wall, and compute = its CPU time (hpcvar trace --cpu-time --cpu-clock; sim app --compute cpu)"}


def without_polls(trace: Path, out: Path) -> Path:
    """The trace as the tracer before issue 28 recorded it: no probe rows (a successful MPI_Iprobe was not traced:
    its time, and the polls before it, were a gap), no poll or CPU columns."""
    import pandas as pd

    from hpcvar.traces.parquet import OPS, OPTIONAL_COLUMNS, make_events, read_parquet, write_parquet

    tr = read_parquet(trace)
    ev = tr.events.astype({"op": object})
    ev = ev[ev["op"] != "probe"].drop(columns=[c for c in OPTIONAL_COLUMNS if c in ev.columns])
    new = ev.groupby("task").cumcount().to_numpy()
    old = pd.Series(new, index=pd.MultiIndex.from_arrays([ev["task"].to_numpy(), ev["seq"].to_numpy()]))
    waits = (ev["op"].to_numpy() == "wait") & (ev["req"].to_numpy() >= 0)
    req = ev["req"].to_numpy().copy()
    req[waits] = old.reindex(pd.MultiIndex.from_arrays([ev["task"].to_numpy()[waits], req[waits]])).to_numpy()
    ev = ev.assign(seq=new, req=req)
    tr.events = make_events(ev.reset_index(drop=True))
    tr.events["op"] = pd.Categorical(tr.events["op"], categories=OPS)
    return write_parquet(tr, out)


def descheduled(trace) -> dict[str, list[float]]:
    """Per task of a trace (read: ``read_parquet``'s), seconds: compute in wall time (the gaps less the polls), its
    CPU time, and the difference: the time a computing rank was descheduled (with the user clock, also the kernel's
    work charged to it). On a quiet testbed that is the 4 ranks sharing 2 cores; what other jobs on the machine add
    shows here, and a measured communication time holds the waits it causes."""
    ev = trace.events.sort_values(["task", "seq"])
    out: dict[str, list[float]] = {"wall": [], "cpu": [], "descheduled": []}
    for _, g in ev.groupby("task"):
        gaps = (g["t_start_ns"].to_numpy()[1:] - g["t_end_ns"].to_numpy()[:-1]).sum()
        wall = (gaps - g["poll_ns"].to_numpy()[1:].sum()) / 1e9
        cpu = g["cpu_ns"].to_numpy()[1:].clip(min=0).sum() / 1e9
        for k, v in (("wall", wall), ("cpu", cpu), ("descheduled", wall - cpu)):
            out[k].append(float(v))
    return out


def run_delays(trace_path: Path, trace) -> list[float] | None:
    """Per task of the HPL section, seconds: the run-queue delay its thread spent inside MPI (its calls and their
    polls: the records' running rdelay_us of a trace taken with --run-delay, HV_TRACE_RUNDELAY=1), from the raw
    files kept beside the trace; None without them. A rank that waits for a core inside MPI counts the wait as
    communication, which a replay on cores of their own does not predict (docs/replay.md, run 15)."""
    from hpcvar.traces.parquet import read_raw_rank

    files = sorted((trace_path.parent / "raw").glob("rank.*.hvt"))
    if len(files) != trace.ntasks:
        return None
    raws = {int(h["rank"]): (h, rec) for h, rec, _ in (read_raw_rank(f) for f in files)}
    if any(int(h.get("run_delay_ns", -1)) < 0 for h, _ in raws.values()):
        return None
    t0 = min(int(rec["t_start_ns"].min()) for _, rec in raws.values())  # the merged trace's origin (merge_raw)
    out = []
    for task, g in trace.events.groupby("task"):
        rec = raws[int(task)][1]
        idx = np.flatnonzero((rec["t_start_ns"] - t0 >= g["t_start_ns"].min())
                             & (rec["t_end_ns"] - t0 <= g["t_end_ns"].max()))
        if not idx.size:  # not the raw files of this trace
            return None
        before = int(rec["rdelay_us"][idx[0] - 1]) if idx[0] > 0 else 0
        out.append((int(rec["rdelay_us"][idx[-1]]) - before) / 1e6)
    return out


def e_abs(pred: list[float], meas: list[float]) -> list[float]:
    return [abs(p - m) / m * 100 for p, m in zip(pred, meas, strict=True)]


def floor(compute: list[float], meas: list[float]) -> float:
    """The lowest mean E_abs (%) any prediction can reach whose tasks compute ``compute`` (s per task, the trace's:
    its CPU time for ``--compute cpu``) and end together, as HPL's tasks do (their measured spans agree within a
    few ms): task i's predicted communication is then T - compute[i] for one T, and the mean of |T - compute[i] -
    meas[i]| / meas[i] is least at the weighted median of compute[i] + meas[i] (weights 1 / meas[i]). A prediction
    at the floor has the right mean; what it cannot have is the spread of the measured times that its compute does
    not hold: with CPU time, the time each task was descheduled while computing (docs/replay.md, runs 18-19)."""
    a = np.asarray(compute, float) + np.asarray(meas, float)
    w = 1.0 / np.asarray(meas, float)
    order = np.argsort(a, kind="stable")
    cum = np.cumsum(w[order])
    t = a[order][int(np.searchsorted(cum, cum[-1] / 2))]
    return float(np.mean(np.abs(t - a) * w) * 100)


def analyse(replays: dict, placements: list[str]) -> dict:
    """E_abs per placement that ran, per model and source trace; mean comm per mapping, predicted and measured."""
    measured = {p: [t["measured_comm_s"] for t in replays[p][(p, "none")]["tasks"]] for p in placements}
    table = {}
    for ran in placements:
        for src in placements:
            for model in MODELS:
                pred = [t["comm_s"] for t in replays[src][(ran, model)]["tasks"]]
                table[(ran, src, model)] = e_abs(pred, measured[ran])
    ranking = {src: {m: float(np.mean([t["comm_s"] for t in replays[src][(m, "maxmin")]["tasks"]]))
                     for m in MAPPINGS} for src in placements}
    # how far apart the replay's tasks end (maxmin): the floor below assumes they end together
    ends = {(ran, src): [t["total_s"] for t in replays[src][(ran, "maxmin")]["tasks"]]
            for ran in placements for src in placements}
    return {"measured": measured, "e_abs": table, "ranking": ranking,
            "end_spread": {k: max(v) - min(v) for k, v in ends.items()}}


def report(res: dict, placements: list[str], variant: str = "wall", compute: dict | None = None) -> dict:
    """The tables of one variant; returns its summary (same- and cross-placement mean E_abs under maxmin). With
    ``compute`` (per placement, the compute per task its trace gives this variant), each mean's floor too."""
    print(f"\n== {variant}: {VARIANTS[variant]}")
    print("E_abs per task (%) of the predicted communication time against the measured one")
    print(f"{'ran':5s} {'trace of':9s} {'model':8s} {'mean':>6s}  per task")
    for (ran, src, model), ea in res["e_abs"].items():
        print(f"{ran:5s} {src:9s} {model:8s} {np.mean(ea):6.1f}  " + " ".join(f"{v:5.1f}" for v in ea))
    print("\nmean E_abs (%), maxmin   " + "".join(f"{'trace of ' + s:>16s}" for s in placements))
    for ran in placements:
        print(f"placement that ran: {ran:5s}" + "".join(f"{np.mean(res['e_abs'][(ran, s, 'maxmin')]):16.1f}"
                                                        for s in placements))
    same = {p: float(np.mean(res["e_abs"][(p, p, "maxmin")])) for p in placements}
    cross = {(ran, src): float(np.mean(res["e_abs"][(ran, src, "maxmin")])) for ran in placements for src in placements
             if ran != src}
    print("same placement: " + ", ".join(f"{p} {v:.1f} %" for p, v in same.items())
          + f" (target <= 5 %: {'meets' if max(same.values()) <= 5 else 'MISSES'})")
    if cross:
        print("cross placement: " + ", ".join(f"{ran} from the {src} trace {v:.1f} %"
                                              for (ran, src), v in cross.items())
              + f" (target <= 15 %: {'meets' if max(cross.values()) <= 15 else 'MISSES'})")
    floors = {}
    if compute is not None:
        floors = {(ran, src): floor(compute[src], res["measured"][ran]) for ran in placements for src in placements}
        print("floor (the least mean E_abs of any prediction with this compute whose tasks end together): "
              + ", ".join(f"{ran} from the {src} trace {v:.1f} %" for (ran, src), v in floors.items())
              + f"; the replay's tasks end within {max(res['end_spread'].values()) * 1e3:.1f} ms of each other")
    print("mean communication time per task by mapping (maxmin; random: median of the replicas)")
    for src, by in res["ranking"].items():
        order = sorted(by, key=by.get)
        print(f"  predicted from the {src} trace: " + ", ".join(f"{m} {by[m]:.3f} s" for m in order)
              + f"  (ranking {' < '.join(order)})")
    meas = {p: float(np.mean(v)) for p, v in res["measured"].items()}
    print("  measured: " + ", ".join(f"{p} {v:.3f} s" for p, v in sorted(meas.items(), key=lambda kv: kv[1])))
    return {"same": same, "cross": {f"{r} from {s}": v for (r, s), v in cross.items()}, "measured": meas,
            "floor": {f"{r} from {s}": v for (r, s), v in floors.items()}}


def waits(res: dict, replays: dict, traces: dict, read: dict, placements: list[str]) -> None:
    """With --run-delay: per placement that ran, per task, the run-queue delay inside MPI beside the measured and the
    predicted (own trace, maxmin) communication time, and the E_abs against the measured time less that delay."""
    for ran in placements:
        rd = run_delays(traces[ran], read[ran])
        if rd is None:
            continue
        meas = res["measured"][ran]
        pred = [t["comm_s"] for t in replays[ran][(ran, "maxmin")]["tasks"]]
        print(f"{ran}: per task, measured comm / predicted (maxmin) / run-queue delay inside MPI (s): "
              + "; ".join(f"{m:.3f} / {p:.3f} / {d:.3f}" for m, p, d in zip(meas, pred, rd, strict=True)))
        own = [m - d for m, d in zip(meas, rd, strict=True)]
        print(f"  against the measured time less its run-queue delay: mean E_abs {np.mean(e_abs(pred, own)):.1f} % "
              f"(against the measured time {np.mean(e_abs(pred, meas)):.1f} %)")
        for src in placements:
            if src != ran:
                cross = [t["comm_s"] for t in replays[src][(ran, "maxmin")]["tasks"]]
                print(f"  {ran} from the {src} trace, against the same: {np.mean(e_abs(cross, own)):.1f} % "
                      f"({np.mean(e_abs(cross, meas)):.1f} %)")


def figures(res: dict, replays: dict, placements: list[str], out: Path) -> None:
    from hpcvar.report.plots import figure, save

    fig, axes = figure(len(placements), 1, figsize=(7.5, 3.4 * len(placements)), squeeze=False)
    for ax, ran in zip(axes[:, 0], placements, strict=True):
        meas = res["measured"][ran]
        x = np.arange(len(meas))
        w = 0.8 / (1 + len(MODELS))
        ax.bar(x - 0.4 + w / 2, meas, w, label="measured", color="0.3")
        for i, model in enumerate(MODELS, start=1):
            ax.bar(x - 0.4 + w / 2 + i * w, [t["comm_s"] for t in replays[ran][(ran, model)]["tasks"]], w,
                   label=model)
        best = min(MODELS, key=lambda m: np.mean(res["e_abs"][(ran, ran, m)]))
        ax2 = ax.twinx()
        ax2.plot(x, res["e_abs"][(ran, ran, best)], "k.-", label=f"E_abs ({best})")
        ax2.set_ylabel("E_abs (%)")
        ax2.set_ylim(0, max(20.0, 1.2 * max(res["e_abs"][(ran, ran, best)])))
        ax.set_xticks(x, [str(t) for t in x])
        ax.set_xlabel("MPI task")
        ax.set_ylabel("communication time (s)")
        ax.set_title(f"HPL on the testbed, mapping {ran} (as it ran): measured and predicted")
        handles = ax.get_legend_handles_labels()[0] + ax2.get_legend_handles_labels()[0]
        ax.legend(handles, [str(h.get_label()) for h in handles], loc="upper center", bbox_to_anchor=(0.5, -0.2),
                  ncol=6, fontsize=7, frameon=False)
    paths = save(fig, out / "hpl_comm_per_task")
    fig, ax = figure(figsize=(6, 3))
    x = np.arange(len(MAPPINGS))
    for i, src in enumerate(placements):
        ax.bar(x - 0.2 + 0.4 * i, [res["ranking"][src][m] for m in MAPPINGS], 0.4,
               label=f"predicted from the {src} trace")
    for p in placements:
        ax.plot([MAPPINGS.index(p)], [np.mean(res["measured"][p])], "k*", markersize=12)
    ax.plot([], [], "k*", label="measured (placement that ran)")
    ax.set_xticks(x, MAPPINGS)
    ax.set_ylabel("mean communication time per task (s)")
    ax.set_title("HPL: mappings ranked (maxmin)")
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=3, frameon=False)
    paths += save(fig, out / "hpl_mappings")
    print("figures: " + ", ".join(str(p) for p in paths))


def overhead(reps: int, n: int, lib: Path, timeout: float) -> None:
    """Paired local hpcc runs (2 ranks) without and with the tracer: HPL time and wall time."""
    from hpcvar.stats import median_ci
    from hpcvar.traces.hpcc import hpcc_input, hpl_results

    work = Path(tempfile.mkdtemp(prefix="hv_hpl_ovh_"))
    (work / "hpccinf.txt").write_text(hpcc_input(n, 80, 1, 2))
    raw = work / "raw"
    raw.mkdir()
    cmd = ["/usr/bin/mpirun", "-n", "2", "--bind-to", "none", shutil.which("hpcc") or "hpcc"]
    res: dict[str, list[tuple[float, float]]] = {"plain": [], "traced": []}
    try:
        for r in range(reps):
            for mode in ("plain", "traced") if r % 2 == 0 else ("traced", "plain"):
                env = dict(os.environ, **OMPI_ENV)
                if mode == "traced":
                    for f in raw.glob("rank.*.hvt"):
                        f.unlink()
                    env.update(LD_PRELOAD=str(lib), HV_TRACE_DIR=str(raw))
                t0 = time.perf_counter()
                subprocess.run(cmd, env=env, cwd=work, check=True, timeout=timeout, capture_output=True)
                res[mode].append((hpl_results(work / "hpccoutf.txt")[-1].time_s, time.perf_counter() - t0))
                print(f"rep {r} {mode:6s}: HPL {res[mode][-1][0]:.2f} s, wall {res[mode][-1][1]:.2f} s", flush=True)
        for k, name in ((0, "HPL solve time"), (1, "hpcc wall time")):
            ratios = np.array([t[k] / p[k] for t, p in zip(res["traced"], res["plain"], strict=True)])
            lo, hi = median_ci(ratios)
            print(f"{name}: median without {np.median([x[k] for x in res['plain']]):.2f} s, with the tracer "
                  f"{np.median([x[k] for x in res['traced']]):.2f} s; paired overhead median "
                  f"{(np.median(ratios) - 1) * 100:+.2f} % (95% CI {(lo - 1) * 100:+.2f} to {(hi - 1) * 100:+.2f} %, "
                  f"{reps} pairs)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate", default="200mbit")
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--nb", type=int, default=80)
    ap.add_argument("--placements", default="rrn,rrp")
    ap.add_argument("--ranks", type=int, default=4, choices=(2, 4),
                    help="HPL's ranks (a 1 x RANKS grid): 4 share this machine's 2 cores; with 2, each rank has a "
                         "core of its own (rrn: two hosts, over the network; rrp: one host, shared memory)")
    ap.add_argument("--replicas", type=int, default=5)
    ap.add_argument("--build", default=str(ROOT / "build/ompi"))
    ap.add_argument("--figures", default=None, help="directory for the figures (none without)")
    ap.add_argument("--keep", default=None, help="keep the traces and runs in this directory")
    ap.add_argument("--prefix", default="hvhpl-",
                    help="testbed name prefix (hpcvar testbed up --prefix): one's own on a shared machine")
    ap.add_argument("--timeout", type=float, default=900, help="seconds per hpcc run")
    ap.add_argument("--no-yield", action="store_true",
                    help="let Open MPI's idle ranks busy-poll (4 ranks on 2 cores then wait for scheduler ticks)")
    ap.add_argument("--no-cpu-time", action="store_true",
                    help="trace without the CPU time (hpcvar trace --no-cpu-time): no --compute cpu replay")
    ap.add_argument("--cpu-clock", choices=("user", "thread"), default="user",
                    help="the CPU time traced (hpcvar trace --cpu-clock): user time (default; leaves out the "
                         "network's interrupt work charged to a computing thread) or the thread's CPU clock")
    ap.add_argument("--run-delay", action="store_true",
                    help="trace each rank's run-queue delay inside MPI as well (HV_TRACE_RUNDELAY=1, a diagnostic: "
                         "a /proc read per clock read) and print it per task beside the errors")
    ap.add_argument("--overhead-reps", type=int, default=0)
    ap.add_argument("--overhead-n", type=int, default=4000)
    ap.add_argument("--analyse", default=None, metavar="DIR",
                    help="only replay and draw: the traces and measured parameters a --keep DIR run left")
    a = ap.parse_args()
    placements = a.placements.split(",")
    if a.analyse:
        saved = json.loads((Path(a.analyse) / "params.json").read_text())
        env = dict(os.environ, HPCVAR_RUNS=str(Path(a.analyse) / "runs"))
        finish(a, env, {p: Path(a.analyse) / p / "hpl.trace" for p in placements}, tuple(saved["network"]),
               tuple(saved["shm"]), placements)
        return
    from hpcvar.traces.hpcc import hpcc_input

    if os.geteuid() != 0 or not shutil.which("hpcc") or not Path("/usr/bin/mpicc").exists():
        raise SystemExit("needs root, hpcc and Debian's Open MPI: apt-get install hpcc libopenmpi-dev")
    work = Path(a.keep) if a.keep else Path(tempfile.mkdtemp(prefix="hv_hpl_"))
    work.mkdir(parents=True, exist_ok=True)
    (work / "hpccinf.txt").write_text(hpcc_input(a.n, a.nb, 1, a.ranks, "1rg"))
    bindir = build_ompi(Path(a.build))
    lib = (bindir / "libhv_trace.so").resolve()
    state = work / "testbed.json"
    env = dict(os.environ, **OMPI_ENV, **({} if a.no_yield else YIELD_ENV), HPCVAR_TESTBED_STATE=str(state),
               HPCVAR_RUNS=str(work / "runs"), HPCVAR_NATIVE_DIR=str(bindir.resolve()),
               **({"HV_TRACE_RUNDELAY": "1"} if a.run_delay else {}))
    # --owner-pid: killed (kill -9 included), this script's testbed is taken down by a watcher all the same
    hpcvar(["testbed", "up", "--hosts", "4", "--rate", a.rate, "--ranks-per-host", "2", "--prefix", a.prefix,
            "--owner-pid", str(os.getpid())], env)
    try:
        net, shm = measure(env, 1), measure(env, 2)
        print(f"testbed at {a.rate}: network {net[0] * 1e6:.1f} us, {net[1] / 1e6:.2f} MB/s, send buffer "
              f"{net[2] / 1024:.0f} KiB; shared memory {shm[0] * 1e6:.2f} us, {shm[1] / 1e6:.0f} MB/s (Open MPI "
              "hv_latency)", flush=True)
        (work / "params.json").write_text(json.dumps({"rate": a.rate, "network": net, "shm": shm,
                                                      "yield_when_idle": not a.no_yield}))
        traces = {p: trace_hpcc(env, state, lib, work, p, a.timeout, None if a.no_cpu_time else a.cpu_clock,
                                a.ranks)
                  for p in placements}
    finally:
        hpcvar(["testbed", "down"], env)
    finish(a, env, traces, net, shm, placements)
    if a.overhead_reps:
        overhead(a.overhead_reps, a.overhead_n, lib, a.timeout)
    if not a.keep:
        shutil.rmtree(work, ignore_errors=True)


def finish(a, env: dict, traces: dict, net: tuple, shm: tuple, placements: list[str]) -> None:
    """Replay every placement's HPL trace as each variant reads it (VARIANTS), print the E_abs tables, the
    same- and cross-placement summary and the ranking, draw the figures (of the last variant)."""
    from hpcvar.traces.parquet import read_parquet

    first = rndv_first()
    buf = int(round(net[2])) if len(net) > 2 else 0  # runs kept before the send buffer was measured: 0
    print(f"replayed with --send-buffer {buf} --rndv-first {first} "
          "(Open MPI's btl_tcp_rndv_eager_limit)", flush=True)
    read = {p: read_parquet(traces[p]) for p in placements}
    has_cpu = all("cpu_ns" in read[p].events.columns for p in placements)
    variants = [v for v in ("before", "wall", "cpu") if v != "cpu" or has_cpu]
    dsc = {p: descheduled(read[p]) for p in placements} if has_cpu else {}
    if has_cpu:
        for p in placements:
            d = dsc[p]
            print(f"{p}: compute per task {min(d['wall']):.3f}-{max(d['wall']):.3f} s of wall clock for "
                  f"{min(d['cpu']):.3f}-{max(d['cpu']):.3f} s of CPU, {read[p].meta.get('cpu')} "
                  f"clock (descheduled {min(d['descheduled']):.3f}-"
                  f"{max(d['descheduled']):.3f} s)", flush=True)
    summary, res, replays = {}, {}, {}
    for v in variants:
        src = {p: without_polls(traces[p], traces[p].with_name("hpl-before.trace")) if v == "before"
               else traces[p] for p in placements}
        replays = {p: replay(env, src[p], net, shm, a.replicas, buf, first, "cpu" if v == "cpu" else "wall")
                   for p in placements}
        res = analyse(replays, placements)
        compute = {p: dsc[p][v] for p in placements} if dsc and v != "before" else None  # "before": polls in it
        summary[v] = report(res, placements, v, compute)
        if v == "cpu":
            waits(res, replays, traces, read, placements)
    print("\nsummary (mean E_abs %, maxmin):")
    for v, sm in summary.items():
        print(f"  {v:6s} same " + ", ".join(f"{p} {x:.1f}" for p, x in sm["same"].items()) + "; cross "
              + ", ".join(f"{k} {x:.1f}" for k, x in sm["cross"].items())
              + ("; floor " + ", ".join(f"{k} {x:.1f}" for k, x in sm["floor"].items()) if sm["floor"] else ""))
    if a.figures:
        Path(a.figures).mkdir(parents=True, exist_ok=True)
        figures(res, replays, placements, Path(a.figures))


if __name__ == "__main__":
    main()
