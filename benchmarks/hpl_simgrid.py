"""HPL's traces replayed by hpcvar and by SimGrid's SMPI on the same platform figures: predicted communication
time per task, E_abs against the measurement, and each simulator's run time (issue 28, "a second opinion").

Input: a directory kept by ``benchmarks/hpl_replay.py --keep DIR`` (its ``params.json``: the testbed's measured
latency and bandwidth between hosts and inside one; ``<placement>/hpl.trace``: HPL traced in each placement). For
each trace and each placement that ran (rrn: rank r on host r mod 4; rrp: on host r div 2), on a cluster of 4
nodes x 2 cores:

* **SimGrid**: the trace exported (``hpcvar trace export --to tit``: compute between calls less the polls, at
  1e9 flop/s; a probe has no TIT action, the receive after it waits), ``smpirun -replay`` on the platform of
  ``hpcvar.sim.simgrid`` (split-duplex links of the measured bandwidth, latency / 2 each way; loopback at the
  shared-memory figures; the options that make SMPI's network sim app's ``maxmin``) with the placement's host
  file and ``-trace``: a rank's communication time is the time its Paje trace spends inside MPI states;
* **hpcvar, SimGrid's figures**: ``hpcvar sim app`` on the same TIT files, ``--model maxmin --eager 65535B
  --pair-messages shared`` (SMPI's network: each message a flow of its own), every point-to-point message with
  SMPI's 16-byte envelope (``hpcvar.sim.simgrid.with_smpi_envelope``): what SimGrid computes, as a check of the
  comparison;
* **hpcvar, calibrated**: ``hpcvar sim app`` on the Parquet trace (probes wait for their message) with the
  transport parameters hpl_replay measures (``--send-buffer``, ``--rndv-first``), as hpl_replay replays it.

E_abs = |S_p - S_m| / S_m per task against the measured communication time of the placement that ran (S_m:
time inside MPI calls, polls included). Run time: wall time of each whole process, best of --repeat (interleaved).

    .venv/bin/python benchmarks/hpl_simgrid.py /tmp/hpl [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

PLACEMENTS = ("rrn", "rrp")
NODES, CORES = 4, 2


def host_of(placement: str, rank: int) -> int:
    return rank % NODES if placement == "rrn" else rank // CORES


def paje_comm_s(path: Path, ntasks: int) -> list[float]:
    """Per rank, the simulated time inside MPI states of SimGrid's Paje trace (states pushed and popped on the
    container ``rank-R``; nested states count once)."""
    codes, names, depth, since = {}, {}, {}, {}
    comm = [0.0] * ntasks
    for line in path.read_text().splitlines():
        if line.startswith("%EventDef"):
            _, name, code = line.split()[:3]
            codes[code] = name
            continue
        f = line.split()
        if not f or f[0].startswith("%") or f[0].startswith("#"):
            continue
        ev = codes.get(f[0])
        if ev == "PajeCreateContainer":
            m = re.search(r'"rank-(\d+)"', line)
            if m:
                names[f[2]] = int(m.group(1))
        elif ev in ("PajePushState", "PajePopState") and f[3] in names:
            r, t = names[f[3]], float(f[1])
            d = depth.get(r, 0)
            if ev == "PajePushState":
                if d == 0:
                    since[r] = t
                depth[r] = d + 1
            elif d > 0:
                depth[r] = d - 1
                if d == 1:
                    comm[r] += t - since[r]
    return comm


def timed(cmd: list[str], cwd: Path) -> tuple[float, str]:
    t0 = time.perf_counter()
    res = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=900)
    wall = time.perf_counter() - t0
    if res.returncode:
        raise SystemExit(f"{' '.join(cmd[:6])} ... failed ({res.returncode}):\n{res.stderr[-3000:]}")
    return wall, res.stdout


def hpcvar_cmd(trace: Path, placement: str, figures: list[str], runs: Path) -> list[str]:
    return [sys.executable, "-m", "hpcvar", "sim", "app", str(trace), "--nodes", str(NODES), "--cores-per-node",
            str(CORES), "--mapping", placement, "--model", "maxmin", *figures, "--no-plots", "--json",
            "--runs-dir", str(runs)]


def compare(d: Path, src: str, ran: str, net: list[float], shm: list[float], tcp: tuple[int, int], repeat: int,
            measured: list[float]) -> dict:
    """The three predictions of placement ``ran`` from the trace of ``src``."""
    from hpcvar.sim import simgrid
    from hpcvar.traces.parquet import read_parquet
    from hpcvar.traces.tit import read_tit
    from hpcvar.traces.tit_export import write_tit

    work = d / "simgrid" / f"{src}-trace-{ran}"
    work.mkdir(parents=True, exist_ok=True)
    trace = read_parquet(d / src / "hpl.trace")
    index = work / "hpl.txt"
    write_tit(trace, index)
    env_trace = work / "hpl-envelope.trace"  # the TIT read back with SMPI's envelope, for hpcvar
    from hpcvar.traces.parquet import write_parquet

    write_parquet(simgrid.with_smpi_envelope(read_tit(index)), env_trace)
    plat = work / "platform.xml"
    plat.write_text(simgrid.platform_xml(NODES, net[1], net[0], 1e9, CORES, shm[1], shm[0]))
    hosts = work / "hosts"
    hosts.write_text("".join(f"node-{host_of(ran, r)}\n" for r in range(trace.ntasks)))
    paje = work / "hpl.paje"
    sg_cmd = [simgrid.smpirun(), "-np", str(trace.ntasks), "-platform", str(plat), "-hostfile", str(hosts), "-replay",
              str(index), "-trace", f"--cfg=tracing/filename:{paje}", *simgrid.OPTIONS]
    sg_fig = ["--bandwidth", f"{net[1]:.9g}B/s", "--latency", f"{net[0]:.9g}s", "--shm-bandwidth", f"{shm[1]:.9g}B/s",
              "--shm-latency", f"{shm[0]:.9g}s", "--eager", f"{simgrid.SMPI_EAGER_BYTES}B", "--pair-messages", "shared"]
    cal_fig = ["--bandwidth", f"{net[1]:.9g}B/s", "--latency", f"{net[0]:.9g}s", "--shm-bandwidth", f"{shm[1]:.9g}B/s",
               "--shm-latency", f"{shm[0]:.9g}s", "--send-buffer", str(tcp[0]), "--rndv-first", str(tcp[1])]
    cmds = {"SimGrid": sg_cmd, "hpcvar, SimGrid's figures": hpcvar_cmd(env_trace, ran, sg_fig, work / "runs"),
            "hpcvar, calibrated": hpcvar_cmd(d / src / "hpl.trace", ran, cal_fig, work / "runs")}
    walls: dict[str, list[float]] = {k: [] for k in cmds}
    outs: dict[str, str] = {}
    for _ in range(repeat):  # interleaved: a load that comes and goes hits every simulator
        for name, cmd in cmds.items():
            w, outs[name] = timed(cmd, work)
            walls[name].append(w)
    pred = {"SimGrid": paje_comm_s(paje, trace.ntasks)}
    for name in cmds:
        if name != "SimGrid":
            pred[name] = [t["comm_s"] for t in json.loads(outs[name])["runs"][0]["tasks"]]
    m = np.asarray(measured)
    return {name: {"comm_s": p, "e_abs_pct": (np.abs(np.asarray(p) - m) / m * 100).tolist(),
                   "wall_s": min(walls[name])} for name, p in pred.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir", type=Path, help="a directory kept by hpl_replay.py --keep")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", type=Path, default=None, help="write the numbers as JSON here")
    a = ap.parse_args()
    from hpcvar.sim import simgrid
    from hpcvar.sim.replay import measured
    from hpcvar.traces.parquet import read_parquet

    sys.path.insert(0, str(Path(__file__).parent))
    from hpl_replay import rndv_first

    simgrid.smpirun()  # a clear error without SimGrid
    params = json.loads((a.dir / "params.json").read_text())
    net, shm = params["network"], params["shm"]
    tcp = (int(round(net[2])) if len(net) > 2 else 0, rndv_first())
    meas = {p: measured(read_parquet(a.dir / p / "hpl.trace"))[1].tolist() for p in PLACEMENTS}
    print(f"load average {os.getloadavg()[0]:.2f}; {a.dir}: network {net[0] * 1e6:.1f} us, {net[1] / 1e6:.2f} MB/s; "
          f"shared memory {shm[0] * 1e6:.2f} us, {shm[1] / 1e6:.0f} MB/s; send buffer {tcp[0]} B, rndv-first "
          f"{tcp[1]} B")
    rows = []
    for ran in PLACEMENTS:
        for src in PLACEMENTS:
            res = compare(a.dir, src, ran, net, shm, tcp, a.repeat, meas[ran])
            for name, r in res.items():
                rows.append({"ran": ran, "trace": src, "simulator": name, **r})
    print("\n| placement that ran | trace of | simulator | predicted comm per task (s) | mean E_abs | run time |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['ran']} | {r['trace']} | {r['simulator']} | {' '.join(f'{x:.3f}' for x in r['comm_s'])} "
              f"| {np.mean(r['e_abs_pct']):.1f} % | {r['wall_s']:.2f} s |")
    print("measured (s): " + "; ".join(f"{p} {' '.join(f'{x:.3f}' for x in v)}" for p, v in meas.items()))
    if a.out:
        a.out.write_text(json.dumps({"measured": meas, "rows": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
