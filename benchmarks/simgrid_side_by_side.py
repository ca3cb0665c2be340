"""hpcvar and SimGrid's SMPI side by side on the same time-independent traces and the same platform figures.

Two synthetic TIT traces in SMPI's layout (an index and one file per rank, SimGrid >= 3.20's dialect), written
once: a **ring** (each rank: compute, irecv from the left and isend to the right of --ring-bytes doubles, two
waits, and every 100th iteration an allreduce of 8 doubles with its flops) of about --ring-actions actions, and a
**fan-in** (every rank but 0 sends --fanin-bytes to rank 0, which posts an irecv per sender and waits for all)
of about --fanin-actions actions. Each is replayed, interleaved, --repeat times by whole processes:

* SimGrid: ``smpirun -replay`` on the platform of hpcvar.sim.simgrid (--nodes hosts of --cores-per-node cores,
  split-duplex links of --bandwidth and --latency / 2, loopback at sim app's shm defaults) with the options that
  make its network sim app's ``maxmin`` one;
* hpcvar: ``hpcvar sim app INDEX --model maxmin --mapping rrp --eager 65535B --pair-messages shared --no-plots``
  with the same figures (SMPI's network: each message a flow of its own).

Printed per trace: both makespans and their difference, hpcvar's makespan with SMPI's 16-byte envelope added to
its messages (hpcvar.sim.simgrid.with_smpi_envelope: the known difference, the collectives' algorithms aside),
the best wall time and peak memory of each process, and hpcvar's speed-up beside the target of issue 30
(at least 3x faster than SimGrid, with the same makespans).

    .venv/bin/python benchmarks/simgrid_side_by_side.py [--nodes 16] [--cores-per-node 4] [--repeat 3]
        [--ring-actions 2000000] [--fanin-actions 200000] [--keep DIR] [--python V/bin/python]
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
from typing import NamedTuple

TARGET_SPEEDUP = 3.0  # issue 30: hpcvar at least 3x faster than SimGrid on each trace


def write_index(d: Path, name: str, per_rank: list[str]) -> Path:
    """SMPI's layout: ``name`` names ``name_files/rank-R.txt`` (relative to d, where the replays run)."""
    files = d / f"{name}_files"
    files.mkdir(exist_ok=True)
    for r, text in enumerate(per_rank):
        (files / f"rank-{r}.txt").write_text(text)
    index = d / name
    index.write_text("".join(f"{name}_files/rank-{r}.txt\n" for r in range(len(per_rank))))
    return index


def ring(n: int, actions: int, count: int, every: int) -> list[str]:
    """Per rank: compute, irecv, isend, two waits, and every ``every``-th iteration an allreduce (0: none)."""
    iters = max(1, actions // n // 5)
    block = every or iters
    out = []
    for r in range(n):
        left, right = (r - 1) % n, (r + 1) % n
        it = (f"{r} compute 100000\n{r} irecv {left} 0 {count} 0\n{r} isend {right} 0 {count} 0\n"
              f"{r} wait {left} {r} 0\n{r} wait {r} {right} 0\n")
        coll = f"{r} allreduce 8 10000 0\n" if every else ""
        out.append(f"{r} init\n" + (it * block + coll) * (iters // block) + it * (iters % block) + f"{r} finalize\n")
    return out


def fanin(n: int, actions: int, nbytes: int) -> list[str]:
    iters = max(1, actions // (3 * (n - 1)))
    root = "".join(f"0 irecv {s} 1 {nbytes} 6\n" for s in range(1, n)) + "0 waitall\n"
    out = ["0 init\n" + root * iters + "0 finalize\n"]
    for r in range(1, n):
        out.append(f"{r} init\n" + f"{r} compute 10000\n{r} send 0 1 {nbytes} 6\n" * iters + f"{r} finalize\n")
    return out


class Measured(NamedTuple):
    wall: float  # s
    mib: float  # peak RSS
    user: float  # s of CPU in user mode
    sys: float  # s of CPU in the kernel (on this VM, mostly page faults when its memory is slow)
    minflt: int  # minor page faults
    text: tuple[str, str]  # stdout, stderr


def run_measured(cmd: list[str], cwd: Path, out: Path) -> Measured:
    """A whole process's wall time, peak memory, CPU times and page faults, and its output; a failure stops the
    benchmark."""
    err = out.with_suffix(".err")
    with open(out, "w") as f, open(err, "w") as g:
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, cwd=cwd, stdout=f, stderr=g)
        _, status, usage = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
    text = out.read_text(), err.read_text()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(cmd[:6])} ... failed:\n{text[1][-3000:]}")
    return Measured(wall, usage.ru_maxrss / 1024, usage.ru_utime, usage.ru_stime, usage.ru_minflt, text)


def with_envelope(index: str, nodes: int, cores: int, bandwidth: float, latency: float) -> float:
    """hpcvar's makespan of the trace with SMPI's envelope added to its messages (run in a child process)."""
    from hpcvar.sim import replay as simapp
    from hpcvar.sim import simgrid
    from hpcvar.traces.tit import read_tit

    tr = simgrid.with_smpi_envelope(read_tit(index))
    cl = simapp.Cluster(nodes, cores, bandwidth, latency, pair_serial=False)
    sim = simapp.Simulator(tr, cl, simapp.mapping("rrp", tr.ntasks, cl), "maxmin", eager_bytes=simgrid.SMPI_EAGER_BYTES)
    return float(sim.run().total_s.max())


def side_by_side(index: Path, a, d: Path) -> dict:
    from hpcvar.sim import simgrid

    nranks = len(index.read_text().split())
    plat, hosts = simgrid.write_platform(d, a.nodes, a.bandwidth, a.latency, 1e9, a.cores_per_node)
    sg_cmd = [simgrid.smpirun(), "-np", str(nranks), "-platform", str(plat), "-hostfile", str(hosts), "-replay",
              str(index), *simgrid.OPTIONS]
    hp_cmd = [a.python, "-m", "hpcvar", "sim", "app", str(index), "--nodes", str(a.nodes), "--cores-per-node",
              str(a.cores_per_node), "--bandwidth", f"{a.bandwidth:g}B/s", "--latency", f"{a.latency * 1e6:g}us",
              "--model", "maxmin", "--mapping", "rrp", "--eager", f"{simgrid.SMPI_EAGER_BYTES}B", "--pair-messages",
              "shared", "--no-plots",
              "--json", "--runs-dir", str(d / "runs")]
    sg, hp = [], []
    for _ in range(a.repeat):  # interleaved: a load that comes and goes hits both
        sg.append(run_measured(sg_cmd, d, d / "sg.out"))
        hp.append(run_measured(hp_cmd, d, d / "hp.out"))
    sg_makespan = float(simgrid.TIME.findall("".join(sg[-1].text))[-1])
    hp_makespan = json.loads(hp[-1].text[0])["runs"][0]["makespan_s"]
    code = (f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); import simgrid_side_by_side as b; "
            f"print(b.with_envelope({str(index)!r}, {a.nodes}, {a.cores_per_node}, {a.bandwidth!r}, {a.latency!r}))")
    env = float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
    sg_best, hp_best = min(sg, key=lambda m: m.wall), min(hp, key=lambda m: m.wall)
    return {"sg": sg_makespan, "hp": hp_makespan, "hp_env": env, "sg_wall": sg_best.wall, "hp_wall": hp_best.wall,
            "sg_mib": max(m.mib for m in sg), "hp_mib": max(m.mib for m in hp), "sg_best": sg_best, "hp_best": hp_best}


def report(name: str, actions: int, r: dict) -> None:
    speedup = r["sg_wall"] / r["hp_wall"]
    verdict = "meets" if speedup >= TARGET_SPEEDUP else "MISSES"
    print(f"{name}: {actions:,} actions")
    print(f"  makespan: SimGrid {r['sg']:.9f} s, hpcvar {r['hp']:.9f} s ({(r['hp'] - r['sg']) / r['sg']:+.3%}); "
          f"hpcvar with SMPI's 16-byte envelope {r['hp_env']:.9f} s ({(r['hp_env'] - r['sg']) / r['sg']:+.4%}, "
          f"{(r['hp_env'] - r['sg']) * 1e9:+.0f} ns)")
    print(f"  wall (best of the repeats, whole process): SimGrid {r['sg_wall']:.2f} s ({r['sg_mib']:.0f} MiB), "
          f"hpcvar {r['hp_wall']:.2f} s ({r['hp_mib']:.0f} MiB): hpcvar {speedup:.1f}x faster   "
          f"target >= {TARGET_SPEEDUP:g}x ({verdict})")
    # SimGrid is CPU-bound; hpcvar's fixed cost is start-up (imports, pages touched), which this VM's slow page
    # faults stretch (docs/replay.md): the split says which of the two a figure measured
    print("  the best runs' CPU: " + ", ".join(
        f"{who} user {m.user:.2f} s, sys {m.sys:.2f} s, {m.minflt:,} minor faults"
        for who, m in (("SimGrid", r["sg_best"]), ("hpcvar", r["hp_best"]))))


def installed(python: str) -> str:
    """Which hpcvar ``python`` runs, and how it is installed (editable: hpcvar is imported through an import
    finder of scikit-build-core, which a user's install does not have)."""
    code = ("import hpcvar, importlib.util, sys; "
            "e = any(type(f).__name__.startswith('ScikitBuild') for f in sys.meta_path); "
            "print(hpcvar.__file__, 'editable' if e else 'installed', "
            "'cloudpickle' if importlib.util.find_spec('cloudpickle') else '')")
    try:
        res = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=60)
    except OSError as e:
        raise SystemExit(f"--python {python}: cannot run it ({e.strerror}): give a Python interpreter's path") from None
    if res.returncode:
        why = (res.stderr.strip().splitlines() or ["no message"])[-1]
        raise SystemExit(f"--python {python}: it cannot import hpcvar ({why}): "
                         "give the interpreter of a venv where hpcvar is installed (V/bin/pip install .)")
    out = res.stdout.split()
    how = "an editable install" if out[1] == "editable" else "a regular install"
    extra = ", with cloudpickle (Arrow imports it)" if len(out) > 2 else ""
    return f"{python} ({how} at {Path(out[0]).parent}{extra})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=16)
    ap.add_argument("--cores-per-node", type=int, default=4)
    ap.add_argument("--bandwidth", type=float, default=1.25e8, help="bytes/s of a node's link")
    ap.add_argument("--latency", type=float, default=50e-6, help="seconds between two nodes")
    ap.add_argument("--ring-actions", type=int, default=2_000_000)
    ap.add_argument("--ring-bytes", type=int, default=8192)
    ap.add_argument("--allreduce-every", type=int, default=100, help="ring: an allreduce every N iterations (0: none)")
    ap.add_argument("--fanin-actions", type=int, default=200_000)
    ap.add_argument("--fanin-bytes", type=int, default=65536)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--keep", type=Path, default=None, help="keep the traces and outputs in this directory")
    ap.add_argument("--python", default=sys.executable,
                    help="the interpreter whose hpcvar is measured (default: this one). A user's install "
                         "(python3 -m venv V && V/bin/pip install .) has neither the editable install's import "
                         "finder nor the test extras' cloudpickle, which Arrow imports when it is there: 25 ms "
                         "less on the fan-in (docs/replay.md)")
    a = ap.parse_args()
    from hpcvar.sim import simgrid

    simgrid.smpirun()  # a clear error without SimGrid
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs; {a.nodes} nodes x {a.cores_per_node} "
          f"cores, {a.bandwidth:g} B/s, {a.latency * 1e6:g} us, 1e9 flop/s")
    print(f"hpcvar: {installed(a.python)}")
    with tempfile.TemporaryDirectory() as tmp:
        d = a.keep or Path(tmp)
        (d / "runs").mkdir(parents=True, exist_ok=True)
        n = a.nodes * a.cores_per_node
        for name in ("ring", "fanin"):
            lines = ring(n, a.ring_actions, a.ring_bytes // 8, a.allreduce_every) if name == "ring" else \
                fanin(n, a.fanin_actions, a.fanin_bytes)
            index = write_index(d, f"{name}.txt", lines)
            actions = sum(t.count("\n") for t in lines)
            del lines  # the replays are measured from this process: keep it small (a child starts at its RSS)
            report(name, actions, side_by_side(index, a, d))


if __name__ == "__main__":
    main()
