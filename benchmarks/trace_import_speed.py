"""Trace import speed: SimGrid TIT (C parser and Python reference) and OTF2 (C reader and the otf2 package).

TIT (--lines 0: none): a synthetic single-file trace of about --lines actions over --tasks ranks, in each of
SimGrid's dialects (--dialects): >= 3.20, as smpirun -trace-ti writes it (each rank repeats: compute, isend of
512 doubles to the right with tag and datatype, irecv from the left, 'wait SRC DST TAG' twice, and every 50th
iteration an allreduce with its flops), and <= 3.19 (compute, Isend 4096 bytes, Irecv, wait, wait, allReduce),
written once, then timed:

1. the C parser from the file's bytes to column arrays (``tit_native.parse``), lines per second;
2. ``read_tit`` end to end with the C parser (read the file, parse, build the events frame);
3. ``read_tit`` with the Python reference on the first --python-lines lines (it is ~100x slower).

OTF2 (with --otf2-events N > 0, needs the python ``otf2`` package to write the archive): the same pattern as
an archive of about N events, read by ``read_otf2`` with each engine.

Figures are printed with the target of issue 18 (TIT: >= 5M lines/s to arrays); this is not a timed test.

    .venv/bin/python benchmarks/trace_import_speed.py [--lines 10000000] [--tasks 64] [--python-lines 1000000]
        [--otf2-events 200000] [--dialects 3.20,3.19]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

TARGET_TIT = 5e6  # lines/s, TIT to column arrays
PYTHON_OTF2_MAX = 2_000_000  # events: the otf2 package's reader takes 10 s there


def tit_text(lines: int, tasks: int, dialect: str = "3.20") -> bytes:
    """About ``lines`` actions: per rank an init, the iterations, a finalize (rank blocks one after the other)."""
    per_iter = 5 + 1 / 50
    iters = max(1, int((lines / tasks - 2) / per_iter))
    out = []
    for r in range(tasks):
        right, left = (r + 1) % tasks, (r - 1) % tasks
        if dialect == "3.20":
            it = (f"{r} compute 10000\n{r} isend {right} 7 512 0\n{r} irecv {left} 7 512 0\n{r} wait {r} {right} 7\n"
                  f"{r} wait {left} {r} 7\n")
            coll = f"{r} allreduce 1 1000 0 \n"
        else:
            it = f"p{r} compute 1e4\np{r} Isend p{right} 4096\np{r} Irecv p{left} 4096\np{r} wait\np{r} wait\n"
            coll = f"p{r} allReduce 8 1\n"
        block = it * 49 + it + coll
        out += [f"{r} init\n", block * (iters // 50), it * (iters % 50), f"{r} finalize\n"]
    return "".join(out).encode()


def best_of(fn, repeat: int = 3):
    """(best wall time in seconds, last result)."""
    best, res = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        res = fn()
        best = min(best, time.perf_counter() - t0)
    return best, res


def bench_tit(lines: int, tasks: int, python_lines: int, d: Path, dialect: str) -> None:
    from hpcvar.traces import tit_native
    from hpcvar.traces.tit import read_tit

    t0 = time.perf_counter()
    data = tit_text(lines, tasks, dialect)
    path = d / "big.tit"
    path.write_bytes(data)
    n = data.count(b"\n")
    name = "SimGrid >= 3.20" if dialect == "3.20" else "SimGrid <= 3.19"
    print(f"TIT, {name}'s dialect: {n:,} lines, {tasks} ranks, {len(data) / 2**20:.0f} MiB (written in "
          f"{time.perf_counter() - t0:.1f} s)")
    t_arr, res = best_of(lambda: tit_native.parse([data], 1e9))
    rows = len(res.cols["task"])
    verdict = "meets" if n / t_arr >= TARGET_TIT else "MISSES"
    print(f"  C parser, bytes to arrays:  {t_arr:6.2f} s  {n / t_arr / 1e6:6.2f} M lines/s  ({rows:,} rows)   "
          f"target >= {TARGET_TIT / 1e6:.0f} M lines/s ({verdict})")
    t_e2e, tr = best_of(lambda: read_tit(path, 1e9, "native"), repeat=2)
    print(f"  read_tit native, file to frame: {t_e2e:6.2f} s  {n / t_e2e / 1e6:6.2f} M lines/s  "
          f"({tr.events.memory_usage(deep=False).sum() / len(tr.events):.0f} bytes/row in the frame)")
    del tr, res
    if python_lines > 0:
        small = d / "small.tit"
        head = tit_text(python_lines, tasks, dialect)
        small.write_bytes(head)
        m = head.count(b"\n")
        t_py, _ = best_of(lambda: read_tit(small, 1e9, "python"), repeat=1)
        t_c, _ = best_of(lambda: read_tit(small, 1e9, "native"), repeat=2)
        print(f"  on {m:,} lines: Python reference {t_py:6.2f} s ({m / t_py / 1e6:.2f} M lines/s), "
              f"native {t_c:.2f} s: {t_py / t_c:.0f}x")


def bench_otf2(events: int, tasks: int, d: Path) -> None:
    from hpcvar.traces import otf2_native
    from hpcvar.traces.otf2_import import read_otf2

    t0 = time.perf_counter()
    anchor, nev = write_otf2(d / "arch", events, tasks)
    print(f"OTF2: {nev:,} events, {tasks} locations (written in {time.perf_counter() - t0:.1f} s)")
    engines = (["python"] if nev <= PYTHON_OTF2_MAX else []) + (["native"] if otf2_native.available() else [])
    if nev > PYTHON_OTF2_MAX:
        print(f"  (the Python reference is left out above {PYTHON_OTF2_MAX:,} events: about 0.2 M events/s)")
    for eng in engines:
        t, tr = best_of(lambda eng=eng: read_otf2(anchor, eng), repeat=1 if eng == "python" else 3)
        print(f"  read_otf2 {eng:6s}: {t:6.2f} s  {nev / t / 1e6:6.2f} M events/s  ({len(tr.events):,} rows)")
    if "native" not in engines:
        print("  (no C reader: libotf2 was not found when hpcvar was built)")


def write_otf2(path: Path, events: int, tasks: int) -> tuple[Path, int]:
    """An archive with the TIT pattern: per iteration Enter/Leave around MpiIsend, MpiIrecvRequest and two
    waits (MpiIsendComplete, MpiIrecv); about ``events`` events in all."""
    import otf2
    from otf2.enums import GroupType, Paradigm

    iters = max(1, events // tasks // 12)
    with otf2.writer.open(str(path), timer_resolution=1_000_000_000) as trace:
        root = trace.definitions.system_tree_node("node")
        groups = [trace.definitions.location_group(f"Rank {r}", system_tree_parent=root) for r in range(tasks)]
        ws = [trace.event_writer(f"Master {r}", group=groups[r]) for r in range(tasks)]
        trace.definitions.group("locs", group_type=GroupType.COMM_LOCATIONS, paradigm=Paradigm.MPI,
                                members=[w._location for w in ws])
        wg = trace.definitions.group("world", group_type=GroupType.COMM_GROUP, paradigm=Paradigm.MPI,
                                     members=list(range(tasks)))
        comm = trace.definitions.comm("MPI_COMM_WORLD", group=wg)
        reg = {n: trace.definitions.region(n) for n in ("MPI_Isend", "MPI_Irecv", "MPI_Wait")}
        for r, w in enumerate(ws):
            _write_rank(w, r, tasks, comm, reg, iters)
    return path / "traces.otf2", iters * tasks * 12


def _write_rank(w, r: int, tasks: int, comm, reg: dict, iters: int) -> None:
    t = 0
    for i in range(iters):
        t += 10_000
        for k, name in enumerate(("MPI_Isend", "MPI_Irecv", "MPI_Wait", "MPI_Wait")):
            w.enter(t, reg[name])
            if k == 0:
                w.mpi_isend(t + 1, (r + 1) % tasks, comm, 0, 4096, 2 * i)
            elif k == 1:
                w.mpi_irecv_request(t + 1, 2 * i + 1)
            elif k == 2:
                w.mpi_isend_complete(t + 1, 2 * i)
            else:
                w.mpi_irecv(t + 1, (r - 1) % tasks, comm, 0, 4096, 2 * i + 1)
            w.leave(t + 2, reg[name])
            t += 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=10_000_000)
    ap.add_argument("--tasks", type=int, default=64)
    ap.add_argument("--python-lines", type=int, default=1_000_000)
    ap.add_argument("--otf2-events", type=int, default=200_000)
    ap.add_argument("--dialects", default="3.20,3.19", help="TIT dialects to time: 3.20 (SimGrid >= 3.20), 3.19")
    a = ap.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    with tempfile.TemporaryDirectory() as d:
        for dialect in a.dialects.split(",") if a.lines > 0 else []:
            bench_tit(a.lines, a.tasks, a.python_lines, Path(d), dialect)
        if a.otf2_events > 0:
            bench_otf2(a.otf2_events, min(a.tasks, 16), Path(d))


if __name__ == "__main__":
    main()
