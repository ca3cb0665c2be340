"""``hpcvar trace export --to tit``: the lines written (SimGrid >= 3.20's dialect, an index and one file per rank),
and export then import giving the same replay (both engines, several models), on hand-made traces and on random
ones. That SimGrid replays what is written: tests/integration/test_tit_simgrid.py."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hpcvar.errors import InputFileError, UsageError
from hpcvar.sim import replay as simapp
from hpcvar.sim import replay_native
from hpcvar.traces.parquet import Trace, make_events, write_parquet
from hpcvar.traces.tit import read_tit
from hpcvar.traces.tit_export import COLL_TAG_BASE, write_tit
from tests.conftest import run_cli
from tests.unit.test_tit_native import _vcolls

ENGINES = ["python", "native"] if replay_native.available() else ["python"]


def _trace(rows_by_task: list[list[tuple]], comms=None, timed=True) -> Trace:
    """Rows (op, peer, bytes, tag, comm, t_start_ns, t_end_ns, req) per task."""
    rows = [{"task": t, "op": op, "peer": p, "bytes": b, "tag": tag, "comm": c, "t_start_ns": t0, "t_end_ns": t1,
             "req": q} for t, rl in enumerate(rows_by_task) for op, p, b, tag, c, t0, t1, q in rl]
    return Trace(make_events(rows), len(rows_by_task), comms=comms or {}, timed=timed)


def two_tasks() -> Trace:
    """Task 0 and 1: compute gaps (a call that ends after the next one starts: the gap counts from the latest end),
    messages, MPI_PROC_NULL, a sendrecv, world collectives, one on a reversed communicator, one on a single rank."""
    t0 = [("init", -1, 0, 0, 0, 0, 100, -1), ("isend", 1, 1000, 5, 0, 1100, 1200, -1),
          ("irecv", 1, 70000, 6, 0, 1200, 1300, -1), ("send", -1, 8, 0, 0, 1300, 5000, -1),
          ("wait", 1, 1000, 5, 0, 2000, 2100, 1), ("wait", 1, 70000, 6, 0, 2100, 9000, 2),
          ("sendrecv", 1, 100, 2, 0, 10000, 11000, -1), ("sendrecv_recv", 1, 200, 3, 0, 10000, 11000, -1),
          ("allreduce", -1, 64, 0, 0, 12000, 13000, -1), ("alltoall", -1, 301, 0, 0, 13000, 14000, -1),
          ("bcast", 1, 50, 0, 1, 15000, 16000, -1), ("barrier", -1, 0, 0, 2, 16000, 16500, -1),
          ("finalize", -1, 0, 0, 0, 20000, 20000, -1)]
    t1 = [("init", -1, 0, 0, 0, 0, 50, -1), ("recv", 0, 1000, 5, 0, 3050, 4000, -1),
          ("isend", 0, 70000, 6, 0, 4000, 4100, -1), ("irecv", -1, 0, 0, 0, 4100, 4200, -1),
          ("wait", 0, 70000, 6, 0, 4200, 9000, 2), ("sendrecv", 0, 200, 3, 0, 9500, 11000, -1),
          ("sendrecv_recv", 0, 100, 2, 0, 9500, 11000, -1),
          ("allreduce", -1, 64, 0, 0, 12000, 13000, -1), ("alltoall", -1, 301, 0, 0, 13000, 14000, -1),
          ("bcast", 1, 50, 0, 1, 15000, 16000, -1), ("finalize", -1, 0, 0, 0, 17000, 17000, -1)]
    return _trace([t0, t1], comms={0: [0, 1], 1: [1, 0], 2: [0]})


def test_lines_written(tmp_path):
    tr = two_tasks()
    files = write_tit(tr, tmp_path / "app.txt")
    assert files[-1] == tmp_path / "app.txt"
    assert (tmp_path / "app.txt").read_text() == f"{tmp_path}/app.txt_files/rank-0.txt\n" \
                                                 f"{tmp_path}/app.txt_files/rank-1.txt\n"
    tag = COLL_TAG_BASE + 1
    assert (tmp_path / "app.txt_files" / "rank-0.txt").read_text().splitlines() == [
        "0 init", "0 compute 1000", "0 isend 1 5 1000 6", "0 irecv 1 6 70000 6",
        "0 wait 0 1 5", "0 wait 1 0 6",  # no line for the send to MPI_PROC_NULL; its end (5000) ends the gap
        "0 compute 1000",  # from the latest end before (9000) to 10000
        "0 isend 1 2 100 6", "0 irecv 1 3 200 6", "0 wait 0 1 2", "0 wait 1 0 3",  # the sendrecv
        "0 compute 1000", "0 allreduce 64 0 6", "0 alltoall 151 151 6 6",  # 301 bytes to 2 ranks: ceil(301 / 2)
        "0 compute 1000", f"0 irecv 1 {tag} 50 6", f"0 wait 1 0 {tag}",  # a bcast rooted at world 1 on [1, 0]
        "0 compute 3500", "0 finalize"]  # the barrier on a single rank: no line
    assert (tmp_path / "app.txt_files" / "rank-1.txt").read_text().splitlines()[:6] == [
        "1 init", "1 compute 3000", "1 recv 0 5 1000 6", "1 isend 0 6 70000 6", "1 wait 1 0 6", "1 compute 500"]


def test_flops_rate_and_stale_rank_files(tmp_path):
    write_tit(_trace([[("init", -1, 0, 0, 0, 0, 0, -1)]] * 3), tmp_path / "a.txt")
    write_tit(two_tasks(), tmp_path / "a.txt", flops_rate=2.5e9)
    assert sorted(p.name for p in (tmp_path / "a.txt_files").iterdir()) == ["rank-0.txt", "rank-1.txt"]
    assert (tmp_path / "a.txt_files" / "rank-0.txt").read_text().splitlines()[1] == "0 compute 2500.0"
    tr = read_tit(tmp_path / "a.txt", flops_rate=2.5e9)
    assert int(tr.events.loc[1, "t_start_ns"]) == 1000


def _replay(tr: Trace, model: str, engine: str):
    cl = simapp.Cluster(nodes=tr.ntasks, cores_per_node=1, bandwidth=1.25e8, latency=50e-6)
    return simapp.Simulator(tr, cl, list(range(tr.ntasks)), model, engine=engine, algo="binomial").run()


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("model", ["none", "maxmin", "gige"])
def test_export_then_import_same_replay(tmp_path, engine, model):
    tr = two_tasks()
    write_tit(tr, tmp_path / "app.txt")
    back = read_tit(tmp_path / "app.txt")
    a, b = _replay(tr, model, engine), _replay(back, model, engine)
    np.testing.assert_allclose(b.total_s, a.total_s, rtol=1e-12, atol=0)
    assert a.total_s.max() > 30e-6  # the messages count


@st.composite
def program(draw) -> str:
    """A TIT trace that replays: a sequence of steps every rank takes in the same order (so no deadlock), in
    SimGrid <= 3.19's or >= 3.20's dialect: computes, messages between two ranks (blocking, non-blocking waited
    at once, or left pending for a later waitall), sendRecv, and every collective."""
    n, old = draw(st.integers(2, 4)), draw(st.booleans())
    lines = [[f"{r} init"] for r in range(n)]
    pending = [0] * n
    for _ in range(draw(st.integers(1, 12))):
        kind = draw(st.sampled_from(["compute", "p2p", "ip2p", "pend", "coll", "waitall"] + ([] if old else ["sr"])))
        a, b = draw(st.permutations(range(n)))[:2]
        size, tag = draw(st.sampled_from([8, 1000, 70000, 200000])), draw(st.integers(0, 3))
        (ps, pr) = (f"{b} {size}", f"{a} {size}") if old else (f"{b} {tag} {size} 6", f"{a} {tag} {size} 6")
        isend, irecv = ("Isend", "Irecv") if old else ("isend", "irecv")
        if kind == "compute":
            for r in range(n):
                lines[r].append(f"{r} compute {draw(st.integers(0, 5)) * 100000}")
        elif kind == "p2p":
            lines[a].append(f"{a} send {ps}")
            lines[b].append(f"{b} recv {pr}")
        elif kind in ("ip2p", "pend") and (kind == "ip2p" or not old):  # 3.19's wait is LIFO: no pending there
            lines[a].append(f"{a} {isend} {ps}")
            lines[b].append(f"{b} {irecv} {pr}")
            if kind == "ip2p":
                lines[a].append(f"{a} wait" if old else f"{a} wait {a} {b} {tag}")
                lines[b].append(f"{b} wait" if old else f"{b} wait {a} {b} {tag}")
            else:
                pending[a], pending[b] = pending[a] + 1, pending[b] + 1
        elif kind == "sr":
            lines[a].append(f"{a} sendRecv {size} {b} {size // 2} {b} 6 6")
            lines[b].append(f"{b} sendRecv {size // 2} {a} {size} {a} 6 6")
        elif kind == "waitall":
            for r in range(n):
                lines[r].append(f"{r} {'waitAll' if old else 'waitall'}")
        else:
            op = draw(st.sampled_from(["barrier", "bcast", "reduce", "allreduce", "gather", "scatter", "allgather",
                                       "alltoall", "vcoll"]))
            if op == "vcoll":
                k = draw(st.integers(0, 4))
                for r in range(n):
                    lines[r].append(_vcolls(r, n, a, " 6", old)[k])
                continue
            args = {"barrier": "", "bcast": f" {size} {a}", "reduce": f" {size} 1e5 {a}", "allreduce": f" {size} 2e5",
                    "gather": f" {size} {size} {a}", "scatter": f" {size} {size} {a}", "allgather": f" {size} {size}",
                    "alltoall": f" {size} {size}"}[op]
            old_names = {"allreduce": "allReduce", "allgather": "allGather", "alltoall": "allToAll"}
            name = old_names.get(op, op) if old else op
            for r in range(n):
                lines[r].append(f"{r} {name}{args}")
    return "".join(f"{ln}\n" for rl in lines for ln in [*rl, f"{rl[0].split()[0]} finalize"])


@settings(max_examples=60, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
@given(text=program())
def test_random_traces_export_then_import_same_replay(tmp_path_factory, text):
    d = tmp_path_factory.mktemp("rt")
    (d / "t.tit").write_text(text)
    tr = read_tit(d / "t.tit")
    a = _replay(tr, "maxmin", ENGINES[-1])
    write_tit(tr, d / "x.txt")
    b = _replay(read_tit(d / "x.txt"), "maxmin", ENGINES[-1])
    np.testing.assert_allclose(b.total_s, a.total_s, rtol=1e-12, atol=0)


def test_refused(tmp_path):
    tr = _trace([[("init", -1, 0, 0, 0, 0, 0, -1), ("send", 0, 8, COLL_TAG_BASE, 0, 0, 0, -1)]])
    with pytest.raises(InputFileError, match=r"task 0 seq 1: tag 1073741824 is not in 0..1073741823"):
        write_tit(tr, tmp_path / "a.txt")
    tr = _trace([[("init", -1, 0, 0, 0, 0, 0, -1), ("bcast", 0, 8, 0, 7, 0, 0, -1)]])
    with pytest.raises(InputFileError, match="communicator 7, which the trace does not describe"):
        write_tit(tr, tmp_path / "a.txt")
    with pytest.raises(UsageError) as e:
        write_tit(two_tasks(), tmp_path / "a.txt", flops_rate=0)
    assert e.value.where == "--flops-rate"


def test_cli_export(tmp_path):
    src = write_parquet(two_tasks(), tmp_path / "app.trace")
    res = run_cli(["trace", "export", str(src), "--to", "tit", "-o", str(tmp_path / "app.txt"), "--json"])
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["ntasks"] == 2 and out["index"] == str(tmp_path / "app.txt") and len(out["files"]) == 2
    assert all(Path(f).is_file() for f in out["files"])
    res = run_cli(["trace", "export", str(src), "--to", "tit", "-o", str(tmp_path / "no" / "app.txt")])
    assert res.returncode == 2 and "does not exist (--out)" in res.stderr
    res = run_cli(["trace", "import", str(tmp_path / "app.txt"), "-o", str(tmp_path / "back.trace"), "--json"])
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["ops"]["isend"] == 5  # 2 isends, 2 sendrecv halves, the bcast on [1, 0]
