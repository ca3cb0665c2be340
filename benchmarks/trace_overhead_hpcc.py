"""Where the tracer's overhead on the whole hpcc suite goes: paired local runs, section by section.

hpcc (Debian's, on Debian's Open MPI) runs --reps pairs of times on --ranks ranks of this machine, without and with
the tracer (LD_PRELOAD of libhv_trace.so built against that Open MPI, as benchmarks/hpl_replay.py builds it), in
alternating order. Each run's own per-section times come from hpccoutf.txt (the summary's ``*_time`` values, the
latency-bandwidth test's ``Execution time (wall clock)``), with the wall time of the whole process and, for traced
runs, the time from the end of the last section to the process's exit (the trace written at MPI_Finalize). Printed
per section: the median without and with the tracer, the paired median difference (s) and ratio with a bootstrap
95% CI (hpcvar.stats.median_ci), so the extra wall time is found where it is spent. The tracer's records per rank
(``hpcvar trace show``) are printed too: multiplied by benchmarks/trace_call_cost.py's cost per record they bound
what recording costs.

    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 .venv/bin/python benchmarks/trace_overhead_hpcc.py \\
        [--reps 8] [--ranks 2] [--n 4000] [--lib build/ompi/bin/libhv_trace.so] [--cpu-time]
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

ROOT = Path(__file__).resolve().parents[1]
OMPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
SUMMARY = re.compile(r"^(\w+_time)=([0-9.eE+-]+)$", re.M)
BEFF = re.compile(r"Execution time \(wall clock\)\s*=\s*([0-9.]+) sec")
STAMP = re.compile(r"Current time \((\d+)\)")


def sections(text: str) -> dict[str, float]:
    """The run's own section times (s) from hpccoutf.txt."""
    out = {k: float(v) for k, v in SUMMARY.findall(text) if k != "MPIRandomAccess_CheckTime"}
    m = BEFF.search(text)
    if m:
        out["latency_bandwidth_time"] = float(m.group(1))
    return out


def records(raw: Path) -> str:
    """Records and failed polls per rank of one traced run (its rank.<r>.hvt files)."""
    from hpcvar.traces.parquet import read_raw_rank

    out = []
    for f in sorted(raw.glob("rank.*.hvt")):
        head, rec, _ = read_raw_rank(f)
        polls = int(rec["npoll"].sum()) if "npoll" in (rec.dtype.names or ()) else 0
        out.append(f"rank {head['rank']}: {len(rec):,} records, {polls:,} failed polls")
    return "; ".join(out) or "no raw trace written"


def one_run(cmd: list[str], work: Path, raw: Path, mode: str, a) -> dict[str, float]:
    """One hpcc run, plain or traced: its section times, its wall time, the time after its last section."""
    env = dict(os.environ, **OMPI_ENV)
    for f in raw.glob("*"):
        f.unlink()
    if mode == "traced":
        env.update(LD_PRELOAD=str(a.lib), HV_TRACE_DIR=str(raw))
        if a.cpu_time:
            env["HV_TRACE_CPU"] = "1"
    (work / "hpccoutf.txt").unlink(missing_ok=True)
    t0 = time.time()
    subprocess.run(cmd, env=env, cwd=work, check=True, timeout=a.timeout, capture_output=True)
    t1 = time.time()
    text = (work / "hpccoutf.txt").read_text()
    s = sections(text)
    s["wall"] = t1 - t0
    stamps = [int(x) for x in STAMP.findall(text)]
    s["after_last_section"] = t1 - stamps[-1] if stamps else float("nan")  # hpcc's stamps: 1 s resolution
    return s


def report(res: dict[str, list[dict[str, float]]]) -> None:
    from hpcvar.stats import median_ci

    keys = [k for k in res["plain"][0] if all(k in x for x in res["plain"] + res["traced"])]
    print(f"\n{'section':28s} {'without':>9s} {'with':>9s} {'paired diff':>12s} {'overhead, median [95% CI]':>28s}")
    for k in keys:
        p = np.array([x[k] for x in res["plain"]])
        t = np.array([x[k] for x in res["traced"]])
        ratio = np.divide(t, p, out=np.full_like(t, np.nan), where=p > 0)
        ci = ""
        if np.isfinite(ratio).all():
            lo, hi = median_ci(ratio)
            ci = f"{(np.median(ratio) - 1) * 100:+7.2f} % [{(lo - 1) * 100:+.1f}, {(hi - 1) * 100:+.1f}]"
        print(f"{k:28s} {np.median(p):9.3f} {np.median(t):9.3f} {np.median(t - p):+11.3f}s {ci:>28s}")


def main() -> None:
    from hpcvar.traces.hpcc import hpcc_input

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=8)
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--n", type=int, default=4000, help="HPL's N")
    ap.add_argument("--lib", type=Path, default=ROOT / "build/ompi/bin/libhv_trace.so")
    ap.add_argument("--cpu-time", action="store_true", help="the tracer also records thread CPU time (HV_TRACE_CPU=1)")
    ap.add_argument("--timeout", type=float, default=600)
    a = ap.parse_args()
    hpcc = shutil.which("hpcc")
    if not hpcc or not Path("/usr/bin/mpirun").exists():
        raise SystemExit("error: needs Debian's hpcc and Open MPI (apt-get install hpcc libopenmpi-dev)")
    if not a.lib.exists():
        raise SystemExit(f"error: --lib {a.lib} does not exist: build the tracer against /usr/bin/mpicc first "
                         "(benchmarks/hpl_replay.py does, into build/ompi)")
    work = Path(tempfile.mkdtemp(prefix="hv_hpcc_ovh_"))
    (work / "hpccinf.txt").write_text(hpcc_input(a.n, 80, 1, a.ranks))
    raw = work / "raw"
    raw.mkdir()
    cmd = ["/usr/bin/mpirun", "-n", str(a.ranks), "--bind-to", "none", hpcc]
    res: dict[str, list[dict[str, float]]] = {"plain": [], "traced": []}
    print(f"hpcc, {a.ranks} ranks, N={a.n}, {a.reps} pairs; load average {os.getloadavg()[0]:.2f}", flush=True)
    try:
        for r in range(a.reps):
            for mode in ("plain", "traced") if r % 2 == 0 else ("traced", "plain"):
                s = one_run(cmd, work, raw, mode, a)
                res[mode].append(s)
                print(f"rep {r} {mode:6s}: wall {s['wall']:.2f} s, " + ", ".join(
                    f"{k.removesuffix('_time')} {v:.2f}" for k, v in s.items() if k.endswith("_time")), flush=True)
                if mode == "traced" and r == 0:
                    print("  the trace: " + records(raw), flush=True)
        report(res)
        print(f"load average at the end {os.getloadavg()[0]:.2f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
