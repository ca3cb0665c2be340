"""Cost of the tracer per recorded MPI call (ns), measured on one rank.

A tiny MPI program loops ITERS times over MPI_Irecv + MPI_Isend to itself + MPI_Waitall (4 records per
iteration: irecv, isend, 2 waits), separately MPI_Barrier on one rank (1 record), and MPI_Iprobe that finds
nothing (a poll: no record, its time goes to the next one); it reports the minimum over 5 repetitions of each
loop's time. Run without the tracer, with it, and with it recording the thread CPU time (HV_TRACE_CPU=1, as
``hpcvar trace --cpu-time``): the difference divided by the number of records (or polls) is the tracer's cost
per record. Multiply by the records per rank of an application (hpcvar trace show) and divide by its run time to
bound the tracer's overhead where run-to-run noise hides it.

    .venv/bin/python benchmarks/trace_call_cost.py                          # the project's MPI (MPICH)
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 .venv/bin/python benchmarks/trace_call_cost.py \\
        --mpicc /usr/bin/mpicc --mpiexec /usr/bin/mpirun --lib build/replay-ompi/bin/libhv_trace.so
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

SRC = r"""
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    long iters = atol(argv[1]);
    char s[8], r[8];
    double best_p2p = 1e30, best_bar = 1e30, best_poll = 1e30;
    for (int rep = 0; rep < 5; rep++) {
        double t0 = MPI_Wtime();
        for (long i = 0; i < iters; i++) {
            MPI_Request q[2];
            MPI_Irecv(r, 8, MPI_BYTE, 0, 1, MPI_COMM_SELF, &q[0]);
            MPI_Isend(s, 8, MPI_BYTE, 0, 1, MPI_COMM_SELF, &q[1]);
            MPI_Waitall(2, q, MPI_STATUSES_IGNORE);
        }
        double t1 = MPI_Wtime();
        for (long i = 0; i < iters; i++) MPI_Barrier(MPI_COMM_SELF);
        double t2 = MPI_Wtime();
        int flag;
        for (long i = 0; i < iters; i++) MPI_Iprobe(0, 2, MPI_COMM_SELF, &flag, MPI_STATUS_IGNORE);
        double t3 = MPI_Wtime();
        if (t1 - t0 < best_p2p) best_p2p = t1 - t0;
        if (t2 - t1 < best_bar) best_bar = t2 - t1;
        if (t3 - t2 < best_poll) best_poll = t3 - t2;
    }
    printf("%.9f %.9f %.9f\n", best_p2p, best_bar, best_poll);
    MPI_Finalize();
    return 0;
}
"""


def main() -> None:
    root = Path(__file__).resolve().parent.parent
    ap = argparse.ArgumentParser()
    ap.add_argument("--mpicc", default=str(root / ".venv/bin/mpicc"))
    ap.add_argument("--mpiexec", default=str(root / ".venv/bin/mpiexec"))
    ap.add_argument("--lib", default=str(root / "build/replay/bin/libhv_trace.so"))
    ap.add_argument("--iters", type=int, default=20000)
    a = ap.parse_args()
    d = Path(tempfile.mkdtemp(prefix="hv_callcost_"))
    (d / "c.c").write_text(SRC)
    subprocess.run([a.mpicc, "-O2", "-o", str(d / "c"), str(d / "c.c")], check=True, timeout=120)
    res = {}
    for mode in ("plain", "traced", "cpu-time"):
        env = dict(os.environ, HV_TRACE_DIR=str(d), HV_TRACE_CPU="1" if mode == "cpu-time" else "0")
        if mode != "plain":
            env["LD_PRELOAD"] = str(Path(a.lib).resolve())
        out = subprocess.run([a.mpiexec, "-n", "1", str(d / "c"), str(a.iters)], env=env, check=True, timeout=300,
                             capture_output=True, text=True).stdout.split()
        res[mode] = tuple(float(x) for x in out[:3])
    print(f"load average {os.getloadavg()[0]:.2f}")
    for k, (name, per) in enumerate((("irecv+isend+waitall", 4), ("barrier (1 rank)", 1),
                                     ("iprobe finding nothing (a poll)", 1))):
        base = res["plain"][k] / a.iters * 1e9
        line = f"{name}: {base:.0f} ns/iter without the tracer"
        for mode in ("traced", "cpu-time"):
            cost = (res[mode][k] - res["plain"][k]) / (per * a.iters) * 1e9
            line += f"; {mode}: {res[mode][k] / a.iters * 1e9:.0f} ns/iter, {cost:.1f} ns per record"
        print(line)
    shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
