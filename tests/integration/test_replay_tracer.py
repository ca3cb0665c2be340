"""The PMPI tracer on a tiny MPI program of our own (the project's MPI), then replayed."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from hpcvar._native import build_info
from tests.conftest import run_cli

pytestmark = pytest.mark.mpi

SRC = r"""
#include <mpi.h>
int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int r, n; MPI_Comm_rank(MPI_COMM_WORLD, &r); MPI_Comm_size(MPI_COMM_WORLD, &n);
    static char buf[65536], rb[65536];
    int next = (r + 1) % n, prev = (r - 1 + n) % n;
    for (int i = 0; i < 3; i++) {
        MPI_Request q[2];
        MPI_Irecv(rb, 65536, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &q[0]);
        MPI_Isend(buf, 1000 + i, MPI_BYTE, next, 7, MPI_COMM_WORLD, &q[1]);
        MPI_Waitall(2, q, MPI_STATUSES_IGNORE);
    }
    if (r == 0) MPI_Send(buf, 100, MPI_INT, 1, 3, MPI_COMM_WORLD);
    if (r == 1) MPI_Recv(rb, 1024, MPI_INT, 0, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Sendrecv(buf, 8, MPI_BYTE, next, 1, rb, 8, MPI_BYTE, prev, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    double x = r, y; MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Comm rev; MPI_Comm_split(MPI_COMM_WORLD, 0, n - r, &rev);
    MPI_Bcast(buf, 64, MPI_BYTE, 0, rev);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Comm_free(&rev);
    MPI_Finalize();
    return 0;
}
"""


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    bindir = build_info().get("mpi_bindir")
    d = tmp_path_factory.mktemp("tiny")
    (d / "tiny.c").write_text(SRC)
    subprocess.run([str(Path(bindir) / "mpicc"), "-O2", "-o", str(d / "tiny"), str(d / "tiny.c")], check=True,
                   timeout=120)
    return d / "tiny"


def test_trace_tiny_program_and_replay(tiny, tmp_path, runs_dir):
    mpiexec = str(Path(build_info()["mpi_bindir"]) / "mpiexec")
    out = tmp_path / "tiny.trace"
    res = run_cli(["trace", "-o", str(out), "--timeout", "60s", "--json", "--", mpiexec, "-n", "2",
                   str(tiny)], timeout=120)
    assert res.returncode == 0, res.stderr
    s = json.loads(res.stdout)
    assert s["ntasks"] == 2
    assert s["ops"]["irecv"] == 6 and s["ops"]["isend"] == 6 and s["ops"]["wait"] == 12
    assert s["ops"]["sendrecv"] == 2 and s["ops"]["sendrecv_recv"] == 2 and s["ops"]["allreduce"] == 2
    assert s["ops"]["bcast"] == 2 and s["ops"]["barrier"] == 2 and s["ops"]["send"] == 1 and s["ops"]["recv"] == 1

    from hpcvar.traces.parquet import read_parquet

    tr = read_parquet(out)
    ev = tr.events
    t0 = ev[ev["task"] == 0].reset_index(drop=True)
    # MPI_ANY_SOURCE/ANY_TAG receives are resolved from the status: peer 1, tag 7, actual bytes
    irecv = t0[t0["op"] == "irecv"]
    assert list(irecv["peer"]) == [1, 1, 1] and list(irecv["tag"]) == [7, 7, 7]
    assert list(irecv["bytes"]) == [1000, 1001, 1002]
    waits = t0[t0["op"] == "wait"]
    assert set(waits["req"]) == set(t0.index[t0["op"].isin(["irecv", "isend"])])
    assert int(t0[t0["op"] == "send"]["bytes"].iloc[0]) == 400
    # the reversed communicator gets its own id with its world ranks; the bcast root (rank 0 in it) is world 1
    bc = t0[t0["op"] == "bcast"].iloc[0]
    assert tr.comms[int(bc["comm"])] == [1, 0] and int(bc["peer"]) == 1
    assert (ev["t_end_ns"] >= ev["t_start_ns"]).all()

    res = run_cli(["sim", "app", str(out), "--nodes", "1", "--cores-per-node", "2", "--json"])
    assert res.returncode == 0, res.stderr
    sim = json.loads(res.stdout)
    assert all(t["total_s"] > 0 and t["e_abs_pct"] >= 0 for t in sim["tasks"])
    assert (Path(sim["run"]) / "replay.tasks.parquet").is_file()


def test_trace_run_reports_a_missing_launcher(tmp_path):
    res = run_cli(["trace", "run", "-o", str(tmp_path / "x.trace"), "--", "no-such-launcher-xyz", "-n", "2"])
    assert res.returncode == 2 and "not found" in res.stderr
