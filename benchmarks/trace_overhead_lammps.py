"""Tracer overhead on a real application: Debian's LAMMPS (Open MPI), Lennard-Jones melt, 2 ranks.

Alternates runs without and with the tracer (LD_PRELOAD of libhv_trace.so built against the system
Open MPI) and reports the median of LAMMPS' own "Loop time" and of the wall time of mpirun, and the
overhead = (median with - median without) / median without. The last traced run is merged into a native
trace (--trace-out) for 'hpcvar sim app'.

Needs: apt-get install lammps libopenmpi-dev; a tracer built against /usr/bin/mpicc:
    MPICC=/usr/bin/mpicc cmake -S . -B build/replay-ompi && cmake --build build/replay-ompi --target hv_trace
Run (as root, Open MPI needs OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1):
    .venv/bin/python benchmarks/trace_overhead_lammps.py --lib build/replay-ompi/bin/libhv_trace.so --reps 5
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
    ap.add_argument("--mpirun", default="/usr/bin/mpirun")
    ap.add_argument("--lmp", default="lmp")
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--trace-out", default=None, help="write the last traced run as a native trace here")
    a = ap.parse_args()
    for tool in (a.mpirun, a.lmp):
        if not shutil.which(tool):
            raise SystemExit(f"{tool} not found: apt-get install lammps")
    if not Path(a.lib).is_file():
        raise SystemExit(f"no tracer library at {a.lib} (see this script's docstring)")
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    cmd = [a.mpirun, "-n", str(a.np), "--oversubscribe", a.lmp, "-in", str(Path(a.input).resolve())]
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
        for k, name in ((0, "LAMMPS loop time"), (1, "mpirun wall time")):
            p = np.median([x[k] for x in res["plain"]])
            t = np.median([x[k] for x in res["traced"]])
            print(f"{name}: median without {p:.3f} s, with tracer {t:.3f} s, overhead {(t - p) / p * 100:+.2f} % "
                  f"({a.reps} reps each)")
        from hpcvar.traces.native import merge_raw, write_parquet

        tr = merge_raw(raw, source=" ".join(cmd))
        ev = tr.events
        print(f"trace: {len(ev)} events over {tr.ntasks} ranks ({len(ev) / tr.ntasks:.0f} per rank), clock "
              f"{tr.meta.get('clock')} (read cost tsc {tr.meta.get('clock_cost_tsc_ns')} ns, mono "
              f"{tr.meta.get('clock_cost_mono_ns')} ns)")
        if a.trace_out:
            write_parquet(tr, a.trace_out)
            print(f"wrote {a.trace_out}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
