"""The PMPI tracer on a tiny MPI program of our own (the project's MPI), then replayed."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
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


POLL_SRC = r"""
#include <mpi.h>
#include <time.h>
/* busy work for `s` seconds of this thread's CPU time */
static void work(double s) {
    struct timespec a, b;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
    do clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
    while ((b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) * 1e-9 < s);
}
int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int r; MPI_Comm_rank(MPI_COMM_WORLD, &r);
    static char buf[200000];
    for (int i = 0; i < 3; i++) {
        if (r == 0) {
            work(0.02);
            MPI_Send(buf, 200000, MPI_BYTE, 1, 7, MPI_COMM_WORLD);
        } else {  /* spin on MPI_Iprobe (as HPL waits for a panel), then receive; then 5 ms of work */
            int go = 0;
            MPI_Status st;
            while (!go) MPI_Iprobe(0, 7, MPI_COMM_WORLD, &go, &st);
            MPI_Recv(buf, 200000, MPI_BYTE, 0, 7, MPI_COMM_WORLD, &st);
            work(0.005);
        }
    }
    MPI_Finalize();
    return 0;
}
"""


def _trace_program(tmp_path, name: str, src: str, *flags: str, env: dict | None = None):
    """The C program ``src`` built with the MPI hpcvar was built with, run on 2 ranks under 'hpcvar trace
    ``flags``' (with ``env`` added to the environment); its trace."""
    from hpcvar.traces.parquet import read_parquet

    bindir = Path(build_info()["mpi_bindir"])
    (tmp_path / f"{name}.c").write_text(src)
    subprocess.run([str(bindir / "mpicc"), "-O2", "-o", str(tmp_path / name), str(tmp_path / f"{name}.c")],
                   check=True, timeout=120)
    out = tmp_path / f"{name}.trace"
    res = run_cli(["trace", "-o", str(out), *flags, "--timeout", "60s", "--json", "--", str(bindir / "mpiexec"),
                   "-n", "2", str(tmp_path / name)], env=env, timeout=120)
    assert res.returncode == 0, res.stderr
    return read_parquet(out)


def _traced_poll_program(tmp_path, cpu_time: bool):
    """POLL_SRC traced on 2 ranks: the trace, task 1's rows, its probe rows and the gap before each probe (ns).
    Without --cpu-time, a spinning rank descheduled between two polls for longer than the spin threshold computes
    meanwhile (docs/replay.md): on a loaded machine (two such tests at once on 2 cores) task 1 lost half its spin
    that way. Its spin loop does nothing between polls, so the threshold is raised to 50 ms here."""
    env = None if cpu_time else {"HV_TRACE_SPIN_NS": "50000000"}
    tr = _trace_program(tmp_path, "poll", POLL_SRC, "--cpu-time" if cpu_time else "--no-cpu-time", env=env)
    assert tr.meta["polls"][1] > 0 and tr.meta["polls"][0] == 0
    t1 = tr.events[tr.events["task"] == 1].reset_index(drop=True)
    probes = t1[t1["op"] == "probe"]
    assert len(probes) == 3 and set(probes["peer"]) == {0} and set(probes["tag"]) == {7}
    assert set(probes["bytes"]) == {200000}
    assert (t1["op"].shift(-1)[probes.index] == "recv").all()  # each probe is followed by its receive
    # the spin before each probe is polling: the gap before it is (almost) all poll time
    gap = probes["t_start_ns"].to_numpy() - t1["t_end_ns"].to_numpy()[probes.index - 1]
    assert (probes["poll_ns"].to_numpy() <= gap).all() and probes["poll_ns"].sum() > 0.5 * gap.sum()
    return tr, t1, probes, gap


def test_polls_without_cpu_time_are_the_spin(tmp_path):
    """Without --cpu-time a failed poll's exit is not read (one clock read per poll): the spin is still the probe's
    poll_ns. Rank 1 spins about 20 ms before the first message and about 15 ms before the next two (5 ms of work after
    each receive, 20 ms on rank 0 before each send): the gap before the 2nd and 3rd probes less their polls holds that
    work (the spin starts after it)."""
    from hpcvar.sim.replay import measured, mpi_time_s

    tr, t1, probes, gap = _traced_poll_program(tmp_path, cpu_time=False)
    assert tr.meta.get("cpu") != "thread"
    worked = (gap - probes["poll_ns"].to_numpy())[1:]
    assert (worked >= 4.5e6).all(), worked
    assert measured(tr)[1][1] == pytest.approx(mpi_time_s(tr.events, 2)[1])


def test_polls_probes_and_cpu_time_are_recorded(tmp_path):
    """A rank spinning on MPI_Iprobe: one probe row per message found (peer, tag, bytes), the spin in its poll_ns
    (time in MPI, not computation), and with --cpu-time each compute's CPU time (5 ms of work between receives)."""
    from hpcvar.sim.replay import measured, mpi_time_s

    tr, t1, probes, _ = _traced_poll_program(tmp_path, cpu_time=True)
    assert tr.meta["cpu"] == "thread"
    # the 5 ms of work after the 1st and 2nd receives (before the next probe): its CPU time, within the gap
    worked = probes.iloc[1:]
    cpu = worked["cpu_ns"].to_numpy()
    assert ((cpu >= 4.5e6) & (cpu <= worked["t_start_ns"].to_numpy() - t1["t_end_ns"].to_numpy()[worked.index - 1])
            ).all(), cpu
    assert (t1["cpu_ns"] >= 0).all()
    # S_m counts the polls
    assert measured(tr)[1][1] == pytest.approx(mpi_time_s(tr.events, 2)[1])
    assert mpi_time_s(tr.events, 2)[1] * 1e9 >= t1["poll_ns"].sum()


USER_SRC = r"""
#include <mpi.h>
#include <time.h>
/* user-mode work for `s` seconds of wall clock (CLOCK_MONOTONIC is read in user space, the vDSO) */
static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}
static volatile double sink;
static void work(double s) {
    double a = now(), x = 1.0;
    while (now() - a < s)
        for (int i = 0; i < 1000; i++) x = x * 1.0000001 + 1e-9;
    sink = x;
}
int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int r; MPI_Comm_rank(MPI_COMM_WORLD, &r);
    static char buf[1000];
    for (int i = 0; i < 4; i++) {
        if (r == 0) {
            work(0.03);
            MPI_Send(buf, 1000, MPI_BYTE, 1, 7, MPI_COMM_WORLD);
        } else {
            MPI_Recv(buf, 1000, MPI_BYTE, 0, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        }
    }
    MPI_Finalize();
    return 0;
}
"""


def test_cpu_clock_user_records_the_user_time_of_each_compute(tmp_path):
    """--cpu-clock user: each compute's CPU time is its user-mode time (getrusage), within a tick of the gap it lies
    in (the kernel brings a running thread's runtime up to date at its scheduler events; measured here: 31.5 ms for
    a 30.0 ms gap, 26.2 for the one before), and a computation that runs in user space shows most of its time
    there (4 x 30 ms on rank 0)."""
    tr = _trace_program(tmp_path, "user", USER_SRC, "--cpu-time", "--cpu-clock", "user")
    assert tr.meta["cpu"] == "user"
    t0 = tr.events[tr.events["task"] == 0].reset_index(drop=True)
    sends = t0[t0["op"] == "send"]
    assert len(sends) == 4
    gap = sends["t_start_ns"].to_numpy() - t0["t_end_ns"].to_numpy()[sends.index - 1]
    cpu = sends["cpu_ns"].to_numpy()
    from hpcvar.noise.analysis import kernel_hz

    tick = 1e9 / (kernel_hz() or 100)
    assert ((cpu >= 0) & (cpu <= gap + tick)).all(), (cpu, gap, tick)
    assert 0.5 * gap.sum() <= cpu.sum() <= gap.sum() + tick, (cpu, gap, tick)
    assert (tr.events["cpu_ns"] >= 0).all()


def test_run_delay_is_the_wait_for_a_core_inside_mpi(tiny, tmp_path):
    """HV_TRACE_RUNDELAY=1 (hpl_replay --run-delay): each record holds the rank's run-queue delay inside MPI so far
    (us, schedstat's run_delay over its calls and polls; a call of several records, MPI_Waitall's and MPI_Sendrecv's,
    counted once), never decreasing and never more than the rank's whole delay (the header's run_delay_ns). Both
    ranks on one CPU (taskset), spinning in MPI: each waits for the core inside its calls. Without the variable the
    header says -1."""
    from hpcvar.traces.parquet import read_raw_rank

    bindir = Path(build_info()["mpi_bindir"])
    heads = {}
    for mode in ("1", "0"):
        raw = tmp_path / f"raw{mode}"
        res = run_cli(["trace", "-o", str(tmp_path / f"t{mode}.trace"), "--raw-dir", str(raw), "--timeout", "60s",
                       "--", "taskset", "-c", "0", str(bindir / "mpiexec"), "-n", "2", str(tiny)],
                      env={"HV_TRACE_RUNDELAY": mode}, timeout=120)
        assert res.returncode == 0, res.stderr
        heads[mode] = [read_raw_rank(raw / f"rank.{r}.hvt")[:2] for r in range(2)]
    for head, rec in heads["1"]:
        rd = rec["rdelay_us"].astype(float)
        assert (np.diff(rd) >= 0).all() and rd[-1] <= int(head["run_delay_ns"]) / 1e3 + 1, (rd, head)
    assert sum(rec["rdelay_us"][-1] for _, rec in heads["1"]) > 0  # two spinning ranks on one CPU wait for it
    assert all(int(h["run_delay_ns"]) == -1 and not rec["rdelay_us"].any() for h, rec in heads["0"])
