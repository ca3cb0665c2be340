"""Event-trace formats: native Parquet, raw tracer files, SimGrid TIT, Chrome export, CLI."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from hpcvar.errors import InputFileError
from hpcvar.traces.chrome import chrome_events
from hpcvar.traces.parquet import (
    OPS,
    RAW_RECORD,
    RAW_RECORD_V1,
    TRACE_VERSION,
    Trace,
    make_events,
    merge_raw,
    read_parquet,
    write_parquet,
)
from hpcvar.traces.tit import read_tit
from tests.conftest import run_cli

PINGPONG = [dict(task=0, op="init", t_start_ns=0, t_end_ns=0),
            dict(task=0, op="send", peer=1, bytes=1000, tag=5, t_start_ns=1000, t_end_ns=3000),
            dict(task=0, op="recv", peer=1, bytes=1000, tag=5, t_start_ns=3000, t_end_ns=9000),
            dict(task=0, op="finalize", t_start_ns=9000, t_end_ns=9000),
            dict(task=1, op="init", t_start_ns=0, t_end_ns=0),
            dict(task=1, op="recv", peer=0, bytes=1000, tag=5, t_start_ns=500, t_end_ns=4000),
            dict(task=1, op="send", peer=0, bytes=1000, tag=5, t_start_ns=6000, t_end_ns=8000),
            dict(task=1, op="finalize", t_start_ns=8000, t_end_ns=8000)]


def test_parquet_round_trip(tmp_path):
    tr = Trace(make_events(PINGPONG), 2, comms={0: [0, 1], 1: [1, 0]}, source="test")
    p = write_parquet(tr, tmp_path / "pp.trace")
    back = read_parquet(p)
    assert back.ntasks == 2 and back.comms == {0: [0, 1], 1: [1, 0]} and back.timed
    assert back.events[["task", "seq", "op", "peer", "bytes", "tag"]].values.tolist() == \
        tr.events[["task", "seq", "op", "peer", "bytes", "tag"]].values.tolist()
    assert back.meta["version"] == TRACE_VERSION == 2
    assert list(back.events.columns) == list(tr.events.columns)  # no optional columns where none were recorded


def test_parquet_round_trip_of_probes_polls_and_cpu_time(tmp_path):
    """Version 2: the probe op and the optional columns poll_ns and cpu_ns are written and read back; a version 1
    file (no such columns) still reads (test_foreign_parquet_types writes version 1)."""
    rows = [dict(r, poll_ns=0, cpu_ns=-1) for r in PINGPONG]
    rows[5] = dict(rows[5], op="probe", poll_ns=300, cpu_ns=120)
    tr = Trace(make_events(rows), 2)
    back = read_parquet(write_parquet(tr, tmp_path / "p.trace"))
    assert back.events.astype({"op": str}).values.tolist() == tr.events.astype({"op": str}).values.tolist()
    assert list(back.events.columns)[-2:] == ["poll_ns", "cpu_ns"]
    bad = tr.events.copy()
    bad.loc[3, "poll_ns"] = -5
    with pytest.raises(InputFileError, match="poll_ns outside 0"):
        read_parquet(write_parquet(Trace(bad, 2), tmp_path / "b.trace"))


def test_truncated_parquet_is_a_clear_error(tmp_path):
    p = write_parquet(Trace(make_events(PINGPONG), 2), tmp_path / "pp.trace")
    p.write_bytes(p.read_bytes()[: p.stat().st_size // 2])
    with pytest.raises(InputFileError, match="truncated") as e:
        read_parquet(p)
    assert str(p) in e.value.where


def test_unknown_op_and_gap_in_seq(tmp_path):
    rows = [dict(r) for r in PINGPONG]
    rows[2]["op"] = "frobnicate"
    with pytest.raises(InputFileError, match="unknown op 'frobnicate' at task 0 seq 2"):
        write_parquet(Trace(make_events(rows), 2), tmp_path / "x.trace")
        read_parquet(tmp_path / "x.trace")
    ev = make_events(PINGPONG)
    ev = ev.drop(index=2)
    write_parquet(Trace(ev, 2), tmp_path / "y.trace")
    with pytest.raises(InputFileError, match="task 0: seq is not"):
        read_parquet(tmp_path / "y.trace")


def _foreign_parquet(path, ev, row_group_size=3, **columns):
    """A native trace as another tool may write it: plain string ops, int64 numbers, small row groups, some
    columns replaced (``columns``: name -> pyarrow array)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({c: columns.get(c, pa.array(ev[c].astype(str) if c == "op" else ev[c].astype("int64")))
                      for c in ev.columns})
    meta = {"format": "hpcvar-trace", "version": 1, "ntasks": 2}
    pq.write_table(table.replace_schema_metadata({b"hpcvar.trace": json.dumps(meta).encode()}), path,
                   row_group_size=row_group_size)
    return path


def test_parquet_row_groups_strings_int64_and_nulls(tmp_path):
    """Row groups are read one by one into the same columns; string ops become the categorical over OPS,
    int64 numbers the native types, a missing peer or req -1."""
    import pyarrow as pa

    ev = make_events(PINGPONG)
    peer = pa.array([None if p < 0 else p for p in ev["peer"].tolist()], pa.int64())
    req = pa.array([None] * len(ev), pa.int64())
    back = read_parquet(_foreign_parquet(tmp_path / "t.trace", ev, peer=peer, req=req))
    num = [c for c in ev.columns if c != "op"]
    assert back.events[num].dtypes.tolist() == ev[num].dtypes.tolist()
    assert back.events.values.tolist() == ev.values.tolist()
    assert len(back.events) == 8 and back.events["op"].cat.categories.tolist() == OPS


@pytest.mark.parametrize("column, values, message", [
    ("op", ["init", "send", "recv", "finalize", "init", "recv", "bogus", "finalize"],
     "unknown op 'bogus' at task 1 seq 2"),
    ("op", ["init", "send", "recv", "finalize", "init", None, "send", "finalize"], "column 'op' has missing"),
    ("seq", [0, 1, 2, 3, 0, None, 2, 3], "column 'seq' has missing values"),
    ("bytes", [0, 1000.5, 1000, 0, 0, 1000, 1000, 0], "'bytes' holds values that are not int64 integers"),
    ("task", [0, 0, 0, 0, 1, 1, 1, 2**32 + 1], "'task' holds values that are not int32 integers"),
    ("tag", ["0"] * 8, "'tag' holds values that are not int32 integers")])
def test_parquet_damaged_columns_in_a_later_row_group(tmp_path, column, values, message):
    """A bad value in the second or third row group is named with its own task and seq."""
    import pyarrow as pa

    path = _foreign_parquet(tmp_path / "t.trace", make_events(PINGPONG), **{column: pa.array(values)})
    with pytest.raises(InputFileError, match=message) as e:
        read_parquet(path)
    assert str(path) in e.value.where


def test_parquet_tasks_interleaved(tmp_path):
    """Rows need not be grouped by task: seq counts each task's rows in file order (a gap is named by its
    task and its place in the task)."""
    ev = make_events(PINGPONG)
    mixed = ev.iloc[[0, 4, 1, 5, 2, 6, 3, 7]].reset_index(drop=True)
    back = read_parquet(_foreign_parquet(tmp_path / "t.trace", mixed))
    assert back.events.values.tolist() == mixed.values.tolist()
    gap = mixed.drop(index=3).reset_index(drop=True)  # task 1 loses seq 1
    with pytest.raises(InputFileError, match=r"task 1: seq is not 0,1,2,... \(row 1 has seq 2\)"):
        read_parquet(_foreign_parquet(tmp_path / "g.trace", gap))


def _raw_file(path, rank, size, recs, announced=None, comm_lines=("comm 0 2 0 1",)):
    arr = np.zeros(len(recs), dtype=RAW_RECORD_V1)
    for i, (op, peer, nbytes, t0, t1) in enumerate(recs):
        arr[i] = (t0, t1, nbytes, -1, OPS.index(op), peer, 0, 0)
    head = (f"HVTRACE 1\nrank={rank}\nsize={size}\nclock=mono\nticks_per_ns=1\nend_reason=finalize\n"
            f"records={announced if announced is not None else len(recs)}\nrecord_bytes=48\nend\n")
    path.write_bytes(head.encode() + arr.tobytes() + ("\n".join(comm_lines) + "\n").encode())


def test_merge_raw_and_truncated_raw(tmp_path):
    _raw_file(tmp_path / "rank.0.hvt", 0, 2, [("init", -1, 0, 100, 100), ("send", 1, 8, 200, 300),
                                               ("finalize", -1, 0, 400, 400)])
    _raw_file(tmp_path / "rank.1.hvt", 1, 2, [("init", -1, 0, 150, 150), ("recv", 0, 8, 160, 320),
                                               ("finalize", -1, 0, 500, 500)])
    tr = merge_raw(tmp_path)
    assert tr.ntasks == 2 and list(tr.events["op"][:3]) == ["init", "send", "finalize"]
    assert tr.events["t_start_ns"].min() == 0 and tr.events["t_end_ns"].max() == 400
    _raw_file(tmp_path / "rank.1.hvt", 1, 2, [("init", -1, 0, 150, 150)], announced=3)
    with pytest.raises(InputFileError, match="truncated: 3 records announced, 1 present"):
        merge_raw(tmp_path)
    (tmp_path / "rank.1.hvt").unlink()
    with pytest.raises(InputFileError, match=r"ranks \[1\] are missing"):
        merge_raw(tmp_path)


def _raw_file_v2(path, rank, recs, cpu="thread"):
    """HVTRACE 2 records: (op, peer, t0, t1, cpu0, cpu1, poll, poll_cpu, npoll)."""
    arr = np.zeros(len(recs), dtype=RAW_RECORD)
    for i, (op, peer, t0, t1, c0, c1, poll, pcpu, npoll) in enumerate(recs):
        arr[i] = (t0, t1, 8, -1, c0, c1, poll, pcpu, OPS.index(op), peer, 0, 0, npoll, 0)
    head = (f"HVTRACE 2\nrank={rank}\nsize=2\nclock=mono\nticks_per_ns=1\ncpu={cpu}\nend_reason=finalize\n"
            f"records={len(recs)}\nrecord_bytes=88\nend\n")
    path.write_bytes(head.encode() + arr.tobytes() + b"comm 0 2 0 1\n")


def test_merge_raw_v2_polls_and_cpu_time(tmp_path):
    """The tracer's version 2 records: poll_ns as recorded; cpu_ns = the CPU clock from the previous call's exit
    (the latest so far: a Waitall's rows share their times) to this entry, less the polls' CPU time."""
    _raw_file_v2(tmp_path / "rank.0.hvt", 0, [
        ("init", -1, 100, 100, 50, 50, 0, 0, 0),
        ("probe", 1, 1000, 1100, 400, 450, 600, 200, 40),       # 900 ns gap, 600 of them polling; CPU 350 - 200
        ("recv", 1, 1100, 1500, 450, 700, 0, 0, 0),
        ("wait", 1, 2000, 2600, 900, 1000, 0, 0, 0),             # two rows of one call: the second has no gap
        ("wait", 1, 2000, 2600, 900, 1000, 0, 0, 0),
        ("finalize", -1, 3000, 3000, 1300, 1300, 0, 0, 0)])
    _raw_file_v2(tmp_path / "rank.1.hvt", 1, [("init", -1, 100, 100, 0, 0, 0, 0, 0),
                                              ("finalize", -1, 200, 200, 10, 10, 0, 0, 0)])
    tr = merge_raw(tmp_path)
    t0 = tr.events[tr.events["task"] == 0]
    assert t0["poll_ns"].tolist() == [0, 600, 0, 0, 0, 0]
    assert t0["cpu_ns"].tolist() == [0, 150, 0, 200, 0, 300]
    assert tr.meta["cpu"] == "thread" and tr.meta["polls"] == [40, 0]
    assert list(tr.events["op"]).count("probe") == 1
    for r in (0, 1):  # without --cpu-time the CPU clock reads -1: no cpu_ns column
        recs = [("init", -1, 100, 100, -1, -1, 0, 0, 0), ("finalize", -1, 200, 200, -1, -1, 5, 0, 1)]
        _raw_file_v2(tmp_path / f"rank.{r}.hvt", r, recs, cpu="none")
    tr = merge_raw(tmp_path)
    assert "cpu_ns" not in tr.events.columns and tr.events["poll_ns"].tolist() == [0, 5, 0, 5]
    for r in (0, 1):  # --cpu-clock user: the same column, the clock named in the metadata
        recs = [("init", -1, 100, 100, 0, 0, 0, 0, 0), ("finalize", -1, 200, 200, 70, 70, 0, 0, 0)]
        _raw_file_v2(tmp_path / f"rank.{r}.hvt", r, recs, cpu="user")
    tr = merge_raw(tmp_path)
    assert tr.meta["cpu"] == "user" and tr.events["cpu_ns"].tolist() == [0, 70, 0, 70]


def test_tit_import(tmp_path):
    f = tmp_path / "app.txt"
    f.write_text("p0 init\np1 init\np0 compute 2e6\np0 Isend 1 1000\np1 Irecv 0 1000\np1 wait\np0 wait\n"
                 "p0 allReduce 64 10\np1 allReduce 64 10\np0 finalize\np1 finalize\n")
    tr = read_tit(f, flops_rate=1e9)
    assert not tr.timed and tr.ntasks == 2
    t0 = tr.events[tr.events["task"] == 0]
    assert list(t0["op"]) == ["init", "isend", "wait", "allreduce", "finalize"]
    assert int(t0["t_start_ns"].iloc[1]) == 2_000_000  # 2e6 flops at 1e9 flop/s
    assert int(t0["req"].iloc[2]) == 1
    f.write_text("0 init\n0 teleport 1 5\n")
    with pytest.raises(InputFileError, match="unknown action 'teleport'") as e:
        read_tit(f)
    assert e.value.line == 2
    f.write_text("0 init\n0 send 1\n")
    with pytest.raises(InputFileError) as e:
        read_tit(f)
    assert e.value.line == 2


def _write_otf2(path):
    otf2 = pytest.importorskip("otf2", reason="the optional otf2 package is not installed (pip install "
                                              "'hpcvar[otf2]')")
    from otf2.enums import CollectiveOp, GroupType, Paradigm

    with otf2.writer.open(str(path), timer_resolution=1_000_000_000) as trace:
        root = trace.definitions.system_tree_node("node")
        groups = [trace.definitions.location_group(f"Rank {r}", system_tree_parent=root) for r in range(2)]
        w0, w1 = [trace.event_writer(f"Master {r}", group=groups[r]) for r in range(2)]
        trace.definitions.group("locs", group_type=GroupType.COMM_LOCATIONS, paradigm=Paradigm.MPI,
                                members=[w0._location, w1._location])
        wg = trace.definitions.group("world", group_type=GroupType.COMM_GROUP, paradigm=Paradigm.MPI, members=[0, 1])
        comm = trace.definitions.comm("MPI_COMM_WORLD", group=wg)
        reg = {n: trace.definitions.region(n) for n in ("MPI_Init", "MPI_Send", "MPI_Recv", "MPI_Isend",
                                                         "MPI_Irecv", "MPI_Wait", "MPI_Allreduce", "MPI_Finalize")}
        for w in (w0, w1):
            w.enter(0, reg["MPI_Init"])
            w.leave(100, reg["MPI_Init"])
        w0.enter(1000, reg["MPI_Send"])
        w0.mpi_send(1100, 1, comm, 5, 4096)
        w0.leave(3000, reg["MPI_Send"])
        w1.enter(500, reg["MPI_Recv"])
        w1.mpi_recv(2900, 0, comm, 5, 4096)
        w1.leave(3100, reg["MPI_Recv"])
        w1.enter(4000, reg["MPI_Isend"])
        w1.mpi_isend(4010, 0, comm, 6, 100, 77)
        w1.leave(4050, reg["MPI_Isend"])
        w0.enter(3500, reg["MPI_Irecv"])
        w0.mpi_irecv_request(3510, 9)
        w0.leave(3600, reg["MPI_Irecv"])
        w0.enter(3700, reg["MPI_Wait"])
        w0.mpi_irecv(4500, 1, comm, 6, 100, 9)
        w0.leave(4600, reg["MPI_Wait"])
        w1.enter(4100, reg["MPI_Wait"])
        w1.mpi_isend_complete(4200, 77)
        w1.leave(4300, reg["MPI_Wait"])
        for w in (w0, w1):
            w.enter(5000, reg["MPI_Allreduce"])
            w.mpi_collective_begin(5001)
            w.mpi_collective_end(5900, CollectiveOp.ALLREDUCE, comm, 0xFFFFFFFF, 8, 8)
            w.leave(6000, reg["MPI_Allreduce"])
            w.enter(7000, reg["MPI_Finalize"])
            w.leave(7100, reg["MPI_Finalize"])
    return path / "traces.otf2"


def test_otf2_import(tmp_path):
    from hpcvar.traces.otf2_import import read_otf2

    tr = read_otf2(_write_otf2(tmp_path / "arch"))
    assert tr.ntasks == 2 and tr.timed
    t0 = tr.events[tr.events["task"] == 0]
    assert list(t0["op"]) == ["init", "send", "irecv", "wait", "allreduce", "finalize"]
    irecv = t0.iloc[2]
    assert (int(irecv["peer"]), int(irecv["bytes"]), int(irecv["tag"])) == (1, 100, 6)  # filled at completion
    assert int(t0.iloc[3]["req"]) == 2
    send = t0.iloc[1]
    assert (int(send["t_start_ns"]), int(send["t_end_ns"]), int(send["bytes"])) == (900, 2900, 4096)
    t1 = tr.events[tr.events["task"] == 1]
    assert list(t1["op"]) == ["init", "recv", "isend", "wait", "allreduce", "finalize"]


def test_chrome_events():
    rows = [{"task": 1, "seq": 3, "op": "send", "start_s": 1e-3, "end_s": 3e-3}]
    doc = chrome_events(rows, [0, 1])
    x = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    assert x == [{"ph": "X", "name": "send", "cat": "mpi", "pid": 1, "tid": 1, "ts": 1000.0, "dur": 2000.0,
                  "args": {"seq": 3}}]
    json.dumps(doc)


def test_cli_sim_app_json_and_chrome(tmp_path, runs_dir):
    p = write_parquet(Trace(make_events(PINGPONG), 2), tmp_path / "pp.trace")
    res = run_cli(["sim", "app", str(p), "--bandwidth", "1GB/s", "--latency", "0", "--model", "none,maxmin",
                   "--mapping", "rrn,rrp", "--nodes", "2", "--cores-per-node", "2", "--json",
                   "--chrome", str(tmp_path / "t.json")])
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert [r["task"] for r in out["tasks"]] == [0, 1]
    assert {"total_s", "comm_s", "e_abs_pct", "measured_comm_s"} <= set(out["tasks"][0])
    assert len(out["runs"]) == 4
    # rrn: each 1000 B message crosses the 1 GB/s network: task 1's first recv ends at 1.0 us + 1 us
    assert out["tasks"][0]["measured_comm_s"] == pytest.approx(8e-6)
    assert json.loads((tmp_path / "t.json").read_text())["traceEvents"]


def test_cli_bad_mapping_file(tmp_path, runs_dir):
    p = write_parquet(Trace(make_events(PINGPONG), 2), tmp_path / "pp.trace")
    m = tmp_path / "map.txt"
    m.write_text("0 0\n")
    res = run_cli(["sim", "app", str(p), "--mapping-file", str(m)])
    assert res.returncode == 2
    assert "does not cover tasks [1]" in res.stderr and "map.txt" in res.stderr


def test_a_mapping_file_is_an_option_of_its_own(tmp_path, runs_dir):
    p = write_parquet(Trace(make_events(PINGPONG), 2), tmp_path / "pp.trace")
    m = tmp_path / "map.txt"
    m.write_text("0 1\n1 0\n")
    res = run_cli(["sim", "app", str(p), "--mapping", "rrn", "--mapping-file", str(m), "--json"], check=True)
    out = json.loads(res.stdout)
    assert [r["mapping"] for r in out["runs"]] == ["rrn", str(m)]
    assert [t["node"] for t in out["runs"][1]["tasks"]] == [1, 0]
    params = json.loads((Path(out["run"]) / "run.json").read_text())["params"]
    assert params["mappings"] == ["rrn"] and params["mapping_files"] == [str(m)]
    # the spelling of earlier versions still works, with a note
    old = run_cli(["sim", "app", str(p), "--mapping", f"rrn,{m}", "--json"], check=True)
    assert [r["mapping"] for r in json.loads(old.stdout)["runs"]] == ["rrn", str(m)]
    assert "--mapping-file" in old.stderr
    bad = run_cli(["sim", "app", str(p), "--mapping", "rrx"])
    assert bad.returncode == 2 and "unknown mapping 'rrx'" in bad.stderr and "--mapping-file" in bad.stderr


def test_cpu_clock_without_cpu_time_is_refused(tmp_path):
    """--cpu-clock chooses what --cpu-time records: alone, the trace would silently hold no CPU time."""
    out = tmp_path / "x.trace"
    res = run_cli(["trace", "-o", str(out), "--cpu-clock", "user", "--", "true"])
    assert res.returncode == 2 and "--cpu-clock" in res.stderr and "Add --cpu-time" in res.stderr, res.stderr
    assert not out.exists()


def test_trace_without_subcommand_means_run(tmp_path):
    # 'hpcvar trace -o X -- CMD' is routed to 'trace run': the launcher check of 'run' answers
    res = run_cli(["trace", "-o", str(tmp_path / "x.trace"), "--", "no-such-launcher-xyz", "-n", "2"])
    assert res.returncode == 2
    assert "command 'no-such-launcher-xyz' not found" in res.stderr
    res = run_cli(["trace", "--output", str(tmp_path / "x.trace"), "--timeout", "5s", "--", "no-such-launcher-xyz"])
    assert res.returncode == 2 and "not found" in res.stderr
    # the subcommands keep working, and --help still shows the group
    res = run_cli(["trace", "--help"])
    assert res.returncode == 0 and "import" in res.stdout and "show" in res.stdout
    res = run_cli(["trace", "show", str(tmp_path / "missing.trace")])
    assert res.returncode != 0 and "no such trace file" in res.stderr
    res = run_cli(["trace", "bogus"])
    assert res.returncode == 2 and "bogus" in res.stderr


def test_otf2_without_the_c_reader_uses_the_package(tmp_path, monkeypatch):
    """hpcvar built without libotf2: auto reads through the otf2 package, native is an error with the remedy."""
    from hpcvar.errors import MissingToolError
    from hpcvar.traces import otf2_native
    from hpcvar.traces.otf2_import import read_otf2, used_engine

    anchor = _write_otf2(tmp_path / "arch")

    def missing():
        raise MissingToolError("the native library 'libhv_otf2.so' is not installed", None, "install libotf2")

    monkeypatch.setattr(otf2_native, "available", lambda: False)
    monkeypatch.setattr(otf2_native, "lib", missing)
    assert used_engine() == "python"
    assert read_otf2(anchor).ntasks == 2
    with pytest.raises(MissingToolError, match="libhv_otf2.so"):
        read_otf2(anchor, "native")


def test_cli_sim_app_flops_rate_flag_and_cluster_key(tmp_path, runs_dir):
    """sim app reads a TIT trace's flops at --flops-rate, else at the cluster file's flops_rate (both: refused)."""
    f = tmp_path / "t.tit"
    f.write_text("0 init\n1 init\n0 compute 4e6\n1 compute 2e6\n0 reduce 8 2e6 1 6\n1 reduce 8 2e6 1 6\n"
                 "0 finalize\n1 finalize\n")

    def makespan(*args):
        res = run_cli(["sim", "app", str(f), "--json", "--no-plots", *args])
        assert res.returncode == 0, res.stderr
        return json.loads(res.stdout)["runs"][0]["makespan_s"]

    base = makespan("--nodes", "2", "--latency", "0")
    assert base == pytest.approx(6e-3, abs=1e-5)  # 4 ms, the reduce, then its 2e6 flops at 1e9 flop/s
    assert makespan("--nodes", "2", "--latency", "0", "--flops-rate", "2e9") == pytest.approx(3e-3, abs=1e-5)
    cluster = tmp_path / "c.txt"
    cluster.write_text("nodes 2\ncores_per_node 1\nbandwidth 1gbit\nlatency 0s\nflops_rate 4e9\n")
    assert makespan("--cluster", str(cluster)) == pytest.approx(1.5e-3, abs=1e-5)
    res = run_cli(["sim", "app", str(f), "--cluster", str(cluster), "--flops-rate", "1e9"])
    assert res.returncode == 2 and "(--flops-rate)" in res.stderr and "'flops_rate RATE'" in res.stderr
    cluster.write_text("nodes 2\ncores_per_node 1\nbandwidth 1gbit\nlatency 0s\nflops_rate 0\n")
    res = run_cli(["sim", "app", str(f), "--cluster", str(cluster)])
    assert res.returncode == 2 and f"{cluster}:5" in res.stderr, res.stderr


def test_cli_pair_messages(tmp_path, runs_dir):
    """--pair-messages: task 0's three 1 MB eager messages to task 2 flow one after the other (serial, the default)
    or side by side (shared); task 1's message to 2 arrives at 2 ms or 4 ms, and 2 computes 1 ms after it (the
    hand-worked case of test_replay_native). Stored with the run's cluster."""
    f = tmp_path / "p.tit"
    f.write_text("0 init\n1 init\n2 init\n" + "0 send 2 1 1000000 6\n" * 3 + "1 send 2 1 1000000 6\n"
                 "2 recv 1 1 1000000 6\n2 compute 1e6\n" + "2 recv 0 1 1000000 6\n" * 3
                 + "0 finalize\n1 finalize\n2 finalize\n")
    got = {}
    for pm in ("serial", "shared", None):
        res = run_cli(["sim", "app", str(f), "--nodes", "3", "--bandwidth", "1GB/s", "--latency", "0s", "--model",
                       "maxmin", "--eager", "2MiB", "--json", "--no-plots", *(["--pair-messages", pm] if pm else [])])
        assert res.returncode == 0, res.stderr
        out = json.loads(res.stdout)
        got[pm] = out["runs"][0]["makespan_s"]
        assert out["cluster"]["pair_messages"] == (pm or "serial")
    assert got == pytest.approx({"serial": 4e-3, "shared": 5e-3, None: 4e-3}, rel=1e-9)
    res = run_cli(["sim", "app", str(f), "--pair-messages", "fifo"])
    assert res.returncode == 2 and "--pair-messages" in res.stderr


def test_cli_dialect_flag(tmp_path, runs_dir):
    f = tmp_path / "t.tit"
    f.write_text("0 send 1 2 6\n1 recv 0 2 6\n")  # ambiguous without --dialect
    res = run_cli(["trace", "import", str(f), "-o", str(tmp_path / "t.trace")])
    assert res.returncode == 2 and f"{f}:1" in res.stderr and "--dialect 3.19" in res.stderr
    res = run_cli(["trace", "import", str(f), "-o", str(tmp_path / "t.trace"), "--dialect", "3.32", "--json"])
    assert res.returncode == 0, res.stderr
    assert read_parquet(tmp_path / "t.trace").events["bytes"].tolist()[:1] == [6]
    res = run_cli(["sim", "app", str(f), "--dialect", "3.19", "--json", "--no-plots"])
    assert res.returncode == 0, res.stderr
    res = run_cli(["sim", "app", str(f), "--dialect", "three"])
    assert res.returncode == 2 and "(--dialect)" in res.stderr
