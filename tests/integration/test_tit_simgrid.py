"""SimGrid's own traces and replay beside hpcvar's: a small MPI program recorded by SimGrid's recorder
(``smpicc`` + ``smpirun -trace-ti``, on a platform this test writes), imported by hpcvar and replayed by both
simulators on the same platform figures; SimGrid's datatype ids against the sizes its MPI reports; traces
exported by hpcvar replayed under ``smpirun``. Skipped without SimGrid (Debian: apt-get install libsimgrid-dev;
.ci/run installs it)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from hpcvar.errors import InputFileError
from hpcvar.sim import replay as simapp
from hpcvar.sim import simgrid
from hpcvar.traces.tit import read_tit
from hpcvar.traces.tit_export import write_tit

pytestmark = pytest.mark.skipif(any(shutil.which(t) is None for t in ("smpirun", "smpicc", "smpicxx")),
                                reason="SimGrid's smpirun/smpicc/smpicxx are not installed (apt-get install "
                                       "libsimgrid-dev)")
NODES, BW, LAT, SPEED = 4, 1.25e8, 50e-6, 1e9

# A ring of MPI_DOUBLEs above the eager limit, MPI_INTs and MPI_FLOATs below it, a blocking send, a sendrecv of
# MPI_SHORTs; each rank computes (r + 1) ms per iteration (smpi_execute_flops: recorded as 'compute').
RING = r"""
#include <mpi.h>
#include <smpi/smpi.h>
#include <stdlib.h>
int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int r, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    double *buf = calloc(100000, sizeof(double)), *in = calloc(100000, sizeof(double));
    MPI_Request q[2];
    int next = (r + 1) % n, prev = (r + n - 1) % n;
    for (int it = 0; it < 5; it++) {
        smpi_execute_flops(1e6 * (r + 1));
        MPI_Irecv(in, 20000, MPI_DOUBLE, prev, 7, MPI_COMM_WORLD, &q[0]);
        MPI_Isend(buf, 20000, MPI_DOUBLE, next, 7, MPI_COMM_WORLD, &q[1]);
        MPI_Wait(&q[0], MPI_STATUS_IGNORE);
        MPI_Wait(&q[1], MPI_STATUS_IGNORE);
        if (r == 0) MPI_Send(buf, 1000, MPI_INT, 1, 3, MPI_COMM_WORLD);
        if (r == 1) MPI_Recv(in, 1000, MPI_INT, 0, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Irecv(in, 500, MPI_FLOAT, next, 9, MPI_COMM_WORLD, &q[0]);
        MPI_Isend(buf, 500, MPI_FLOAT, prev, 9, MPI_COMM_WORLD, &q[1]);
        MPI_Waitall(2, q, MPI_STATUSES_IGNORE);
        MPI_Sendrecv(buf, 30000, MPI_SHORT, next, 4, in, 30000, MPI_SHORT, prev, 4, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
    }
    MPI_Finalize();
    return 0;
}
"""


def _build(d: Path, name: str, src: str, cxx: bool = False) -> Path:
    """The program compiled by SimGrid's smpicc (smpicxx: C++, where the MPI_CXX types are defined)."""
    f = d / f"{name}.{'cpp' if cxx else 'c'}"
    f.write_text(src)
    res = subprocess.run(["smpicxx" if cxx else "smpicc", "-O1", "-o", str(d / name), str(f)], capture_output=True,
                         text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    return d / name


def _record(d: Path, exe: Path, nodes: int) -> Path:
    """``smpirun -trace-ti`` of the program: the index SimGrid writes (and its per-rank files)."""
    plat, hosts = simgrid.write_platform(d, nodes, BW, LAT, SPEED)
    index = d / "rec.txt"
    res = subprocess.run([simgrid.smpirun(), "-np", str(nodes), "-platform", str(plat), "-hostfile", str(hosts),
                          "-trace-ti", f"--cfg=tracing/filename:{index.name}", "--cfg=smpi/simulate-computation:no",
                          str(exe)], cwd=d, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout[-1000:] + res.stderr[-2000:]
    return index


def _hpcvar_makespan(trace, model: str = "maxmin") -> float:
    # SMPI's network: maxmin, each message a flow of its own (hpcvar's --pair-messages shared)
    cl = simapp.Cluster(nodes=trace.ntasks, cores_per_node=1, bandwidth=BW, latency=LAT, pair_serial=False)
    res = simapp.Simulator(trace, cl, list(range(trace.ntasks)), model, eager_bytes=simgrid.SMPI_EAGER_BYTES).run()
    return float(np.max(res.total_s))


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    d = tmp_path_factory.mktemp("simgrid")
    return _record(d, _build(d, "ring", RING), NODES)


def test_recorded_trace_replays_alike_in_both(recorded):
    """The makespans of SimGrid's replay and hpcvar's (maxmin, the network SimGrid simulates here) agree within
    1 %; SMPI's 16-byte envelope per message is the difference: added to hpcvar's messages, they agree to 10 ns."""
    ev = read_tit(recorded).events
    # the datatypes are read: 20000 doubles, 1000 ints, 500 floats, 30000 shorts (not 20000 bytes, not the tag)
    assert set(ev.loc[ev["op"].isin(["isend", "irecv", "send", "recv", "sendrecv"]), "bytes"]) == \
        {160000, 4000, 2000, 60000}
    plat, hosts = simgrid.write_platform(recorded.parent, NODES, BW, LAT, SPEED)
    sg = simgrid.replay(recorded, NODES, plat, hosts).makespan_s
    hp = _hpcvar_makespan(read_tit(recorded, SPEED))
    hp16 = _hpcvar_makespan(simgrid.with_smpi_envelope(read_tit(recorded, SPEED)))
    print(f"makespan: SimGrid {sg:.9f} s, hpcvar {hp:.9f} s ({(hp - sg) / sg:+.4%}), hpcvar with SMPI's envelope "
          f"{hp16:.9f} s ({hp16 - sg:+.2e} s)")
    assert sg > 0.02  # 5 iterations of 4 ms on the slowest rank, and the messages
    assert abs(hp - sg) / sg < 0.01
    assert abs(hp16 - sg) < 1e-8
    assert hp < sg  # the envelope only adds


def test_export_of_the_import_replays_the_same_in_simgrid(recorded, tmp_path):
    """SimGrid's trace read by hpcvar and written back (bytes, MPI_BYTE) replays in SimGrid to the same makespan."""
    plat, hosts = simgrid.write_platform(tmp_path, NODES, BW, LAT, SPEED)
    write_tit(read_tit(recorded, SPEED), tmp_path / "back.txt", SPEED)
    a = simgrid.replay(recorded, NODES, plat, hosts).makespan_s
    b = simgrid.replay(tmp_path / "back.txt", NODES, plat, hosts).makespan_s
    assert b == pytest.approx(a, rel=1e-9)


TYPES = ["MPI_DOUBLE", "MPI_INT", "MPI_CHAR", "MPI_SHORT", "MPI_LONG", "MPI_FLOAT", "MPI_BYTE", "MPI_LONG_LONG",
         "MPI_SIGNED_CHAR", "MPI_UNSIGNED_CHAR", "MPI_UNSIGNED_SHORT", "MPI_UNSIGNED", "MPI_UNSIGNED_LONG",
         "MPI_UNSIGNED_LONG_LONG", "MPI_LONG_DOUBLE", "MPI_WCHAR", "MPI_C_BOOL", "MPI_INT8_T", "MPI_INT16_T",
         "MPI_INT32_T", "MPI_INT64_T", "MPI_UINT8_T", "MPI_UINT16_T", "MPI_UINT32_T", "MPI_UINT64_T",
         "MPI_C_FLOAT_COMPLEX", "MPI_C_DOUBLE_COMPLEX", "MPI_C_LONG_DOUBLE_COMPLEX", "MPI_AINT", "MPI_OFFSET",
         "MPI_FLOAT_INT", "MPI_LONG_INT", "MPI_DOUBLE_INT", "MPI_SHORT_INT", "MPI_2INT", "MPI_2FLOAT", "MPI_2DOUBLE",
         "MPI_2LONG", "MPI_REAL", "MPI_REAL4", "MPI_REAL8", "MPI_REAL16", "MPI_COMPLEX8", "MPI_COMPLEX16",
         "MPI_COMPLEX32", "MPI_INTEGER1", "MPI_INTEGER2", "MPI_INTEGER4", "MPI_INTEGER8", "MPI_INTEGER16",
         "MPI_LONG_DOUBLE_INT", "MPI_CXX_BOOL", "MPI_CXX_FLOAT_COMPLEX", "MPI_CXX_DOUBLE_COMPLEX",
         "MPI_CXX_LONG_DOUBLE_COMPLEX", "MPI_PACKED", "MPI_COUNT"]


def _types_program() -> str:
    """Rank 0 sends 3 elements of each type to rank 1 and prints each type's MPI_Type_size."""
    body = "".join(f"    MPI_Type_size({t}, &s); printf(\"%d\\n\", s);\n"
                   f"    if (r == 0) MPI_Send(buf, 3, {t}, 1, 0, MPI_COMM_WORLD);\n"
                   f"    if (r == 1) MPI_Recv(buf, 3, {t}, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);\n" for t in TYPES)
    return ("#include <mpi.h>\n#include <stdio.h>\n"
            # SimGrid 3.32's smpi.h uses these three without declaring them
            "extern \"C\" SMPI_Datatype smpi_MPI_CXX_FLOAT_COMPLEX, smpi_MPI_CXX_DOUBLE_COMPLEX, "
            "smpi_MPI_CXX_LONG_DOUBLE_COMPLEX;\n"
            "int main(int argc, char **argv) {\n"
            "    static char buf[4096];\n    int r, s;\n    MPI_Init(&argc, &argv);\n"
            "    MPI_Comm_rank(MPI_COMM_WORLD, &r);\n" + body.replace("printf", "if (r == 0) printf") +
            "    MPI_Datatype v;\n    MPI_Type_contiguous(5, MPI_INT, &v);\n    MPI_Type_commit(&v);\n"
            "    if (r == 0) MPI_Send(buf, 2, v, 1, 1, MPI_COMM_WORLD);\n"
            "    if (r == 1) MPI_Recv(buf, 2, v, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);\n"
            "    MPI_Finalize();\n    return 0;\n}\n")


def test_datatype_ids_as_simgrid_writes_them(tmp_path):
    """Every predefined datatype SimGrid's recorder writes is read with the size SimGrid's MPI_Type_size gives;
    a derived datatype (written -1, without its size) is refused at its line."""
    exe = _build(tmp_path, "types", _types_program(), cxx=True)
    plat, hosts = simgrid.write_platform(tmp_path, 2, BW, LAT, SPEED)
    index = tmp_path / "types.txt"
    res = subprocess.run([simgrid.smpirun(), "-np", "2", "-platform", str(plat), "-hostfile", str(hosts), "-trace-ti",
                          f"--cfg=tracing/filename:{index.name}", str(exe)], cwd=tmp_path, capture_output=True,
                         text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    sizes = [int(x) for x in res.stdout.split()]
    assert len(sizes) == len(TYPES)
    rank0 = Path(index.read_text().split()[0])
    lines = (tmp_path / rank0).read_text().splitlines()
    last_send = max(i for i, ln in enumerate(lines, 1) if " send " in ln)
    with pytest.raises(InputFileError, match="derived datatype") as e:
        read_tit(index, dialect="3.32")
    assert e.value.where == f"{tmp_path / rank0}:{last_send}"
    (tmp_path / rank0).write_text("\n".join(lines[:last_send - 1] + lines[last_send:]) + "\n")
    (tmp_path / Path(index.read_text().split()[1])).write_text("1 init\n")
    ev = read_tit(index, dialect="3.32").events
    sent = ev.loc[(ev["task"] == 0) & (ev["op"] == "send"), "bytes"].tolist()
    assert sent == [3 * s for s in sizes], dict(zip(TYPES, zip(sent, sizes, strict=True), strict=True))


# hpcvar's tracer on a ring of our own (the project's MPI): the measured compute between calls (about 1 ms of
# arithmetic) becomes 'compute' lines; a sendrecv; a world allreduce; a bcast on a reversed communicator (written
# as the messages of hpcvar's decomposition)
TRACED = r"""
#include <mpi.h>
static double work(int n) { double x = 1; for (int i = 0; i < n; i++) x = x * 1.0000001 + 1e-9; return x; }
int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int r, n; MPI_Comm_rank(MPI_COMM_WORLD, &r); MPI_Comm_size(MPI_COMM_WORLD, &n);
    static double buf[20000], rb[20000];
    int next = (r + 1) % n, prev = (r - 1 + n) % n;
    double acc = 0;
    for (int i = 0; i < 4; i++) {
        acc += work(300000 * (r + 1));
        MPI_Request q[2];
        MPI_Irecv(rb, 20000, MPI_DOUBLE, prev, 7, MPI_COMM_WORLD, &q[0]);
        MPI_Isend(buf, 20000, MPI_DOUBLE, next, 7, MPI_COMM_WORLD, &q[1]);
        MPI_Waitall(2, q, MPI_STATUSES_IGNORE);
        MPI_Sendrecv(buf, 100, MPI_DOUBLE, next, 1, rb, 100, MPI_DOUBLE, prev, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    if (COLLECTIVES) {
        MPI_Allreduce(&acc, rb, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        MPI_Comm rev; MPI_Comm_split(MPI_COMM_WORLD, 0, n - r, &rev);
        MPI_Bcast(buf, 512, MPI_BYTE, 0, rev);
        MPI_Comm_free(&rev);
    }
    MPI_Finalize();
    return buf[0] + rb[0] + acc > 1e300;
}
"""


@pytest.mark.mpi
@pytest.mark.parametrize("collectives", [0, 1])
def test_trace_recorded_by_hpcvar_replays_in_simgrid(tmp_path, collectives, runs_dir):
    """A program traced by hpcvar's tracer, exported: smpirun replays it; without collectives SimGrid's makespan is
    hpcvar's (with SMPI's envelope) to 10 ns; and the export read back replays as the trace in hpcvar."""
    from hpcvar._native import build_info
    from hpcvar.traces.parquet import read_parquet
    from tests.conftest import run_cli

    bindir = Path(build_info()["mpi_bindir"])
    (tmp_path / "ring.c").write_text(TRACED.replace("COLLECTIVES", str(collectives)))
    subprocess.run([str(bindir / "mpicc"), "-O1", "-o", str(tmp_path / "ring"), str(tmp_path / "ring.c")],
                   check=True, timeout=120)
    trace = tmp_path / "ring.trace"
    res = run_cli(["trace", "-o", str(trace), "--timeout", "60s", "--", str(bindir / "mpiexec"), "-n", "3",
                   str(tmp_path / "ring")], timeout=120)
    assert res.returncode == 0, res.stderr
    res = run_cli(["trace", "export", str(trace), "--to", "tit", "-o", str(tmp_path / "ring.txt")])
    assert res.returncode == 0, res.stderr
    plat, hosts = simgrid.write_platform(tmp_path, 3, BW, LAT, SPEED)
    sg = simgrid.replay(tmp_path / "ring.txt", 3, plat, hosts).makespan_s
    tr = read_parquet(trace)
    hp16 = _hpcvar_makespan(simgrid.with_smpi_envelope(tr))
    print(f"makespan: SimGrid {sg:.9f} s, hpcvar with SMPI's envelope {hp16:.9f} s ({hp16 - sg:+.2e} s)")
    assert sg > 3e-3  # the compute of the slowest rank, at least 4 x 1 ms here
    if not collectives:
        assert abs(hp16 - sg) < 1e-8
    else:  # each simulator decomposes the allreduce with its own algorithm (and SMPI's messages carry 16 B more)
        assert abs(hp16 - sg) / sg < 0.01
    back = read_tit(tmp_path / "ring.txt")
    assert _hpcvar_makespan(back) == pytest.approx(_hpcvar_makespan(tr), rel=1e-12)


VCOLL = r"""
#include <mpi.h>
int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int r; MPI_Comm_rank(MPI_COMM_WORLD, &r);
    static double a[64], b[64];
    int counts[3] = {1, 2, 3}, displs[3] = {0, 1, 3}, mine = counts[r];
    MPI_Gatherv(a, mine, MPI_DOUBLE, b, counts, displs, MPI_DOUBLE, 1, MPI_COMM_WORLD);
    MPI_Allgatherv(a, mine, MPI_INT, b, counts, displs, MPI_INT, MPI_COMM_WORLD);
    MPI_Scatterv(a, counts, displs, MPI_FLOAT, b, mine, MPI_FLOAT, 0, MPI_COMM_WORLD);
    int sc[3] = {r + 1, r + 1, r + 1}, sd[3] = {0, r + 1, 2 * (r + 1)}, rc[3] = {1, 2, 3}, rd[3] = {0, 1, 3};
    MPI_Alltoallv(a, sc, sd, MPI_SHORT, b, rc, rd, MPI_SHORT, MPI_COMM_WORLD);
    MPI_Reduce_scatter(a, b, counts, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}
"""


def test_v_collectives_as_simgrid_records_them(tmp_path):
    """MPI_Gatherv, Allgatherv, Scatterv, Alltoallv and Reduce_scatter recorded by SMPI (counts per rank, zeros
    where MPI ignores them) are read with each rank's bytes; the export (their messages) replays under smpirun."""
    index = _record(tmp_path, _build(tmp_path, "vcoll", VCOLL), 3)
    tr = read_tit(index)
    by = {(int(t), str(op)): [] for t, op in zip(tr.events["task"], tr.events["op"], strict=True)}
    for t, op, b in zip(tr.events["task"], tr.events["op"], tr.events["bytes"], strict=True):
        by[(int(t), str(op))].append(int(b))
    assert [by[(r, "gatherv")] for r in range(3)] == [[8], [6 * 8], [24]]  # root 1: the sum
    assert [by[(r, "allgatherv")] for r in range(3)] == [[6 * 4]] * 3
    assert [by[(r, "alltoallv")] for r in range(3)] == [[3 * 2], [6 * 2], [9 * 2]]
    assert [by[(r, "scatterv")] for r in range(3)] == [[6 * 4, 6 * 8], [2 * 4, 2 * 8], [3 * 4, 3 * 8]]
    assert [by[(r, "reduce")] for r in range(3)] == [[6 * 8]] * 3  # reduce_scatter: a reduce, then a scatterv
    write_tit(tr, tmp_path / "back.txt")
    plat, hosts = simgrid.write_platform(tmp_path, 3, BW, LAT, SPEED)
    sg = simgrid.replay(tmp_path / "back.txt", 3, plat, hosts).makespan_s
    hp16 = _hpcvar_makespan(simgrid.with_smpi_envelope(read_tit(tmp_path / "back.txt")))
    # the reduce of the reduce_scatter stays a collective: its 2 messages carry SMPI's envelope in SimGrid only
    assert sg - hp16 == pytest.approx(2 * 16 / BW, abs=1e-9)
