"""The streaming replay (hpcvar.sim.replay_stream: the trace read task by task, the ops in a file read back
through a small buffer per task) against the in-memory C replay: the same results bit for bit (clock, comm
time, penalties, conflicts, events, measured side), the same errors, and its refusals."""

from __future__ import annotations

import numpy as np
import pyarrow.parquet as pq
import pytest

from hpcvar.errors import InputFileError, UsageError
from hpcvar.sim import replay_native, replay_stream
from hpcvar.sim.replay import Cluster, Simulator, mapping
from hpcvar.traces.parquet import Trace, make_events, write_parquet
from tests.unit.test_replay_native import probe_case, random_case, random_jitter, random_rows

pytestmark = pytest.mark.skipif(not replay_native.available(),
                                reason="libhv_replay.so is not built (set HPCVAR_NATIVE_DIR to a CMake build's bin/)")

MODELS = ["none", "maxmin", "gige", "myrinet"]


def small_row_groups(path, rows: int = 7) -> None:
    """The trace rewritten with row groups of a few rows: tasks span row groups, chunks end mid-task."""
    t = pq.read_table(path)
    pq.write_table(t, path, row_group_size=rows)


def stream_of(tr: Trace, tmp_path, name: str = "t.parquet", rg: int | None = 7, algo: str = "binomial",
              compute: str = "wall") -> replay_stream.StreamEncoded:
    path = write_parquet(tr, tmp_path / name)
    if rg:
        small_row_groups(path, rg)
    return replay_stream.lower(replay_stream.open_trace(str(path)), algo, compute, tmpdir=str(tmp_path))


def identical(a, b) -> None:
    """Bit for bit, except the per-row times the streaming replay does not keep."""
    assert a.total_s.tolist() == b.total_s.tolist()
    assert a.comm_s.tolist() == b.comm_s.tolist()
    assert a.avg_penalty.tolist() == b.avg_penalty.tolist()
    assert a.conflicts == b.conflicts and a.events == b.events


def compare(tr, cl, node_of, model, enc_s, algo="binomial", compute="wall", **kw):
    enc = replay_native.lower_native(tr, algo, compute=compute)
    mem = Simulator(tr, cl, node_of, model=model, engine="native", encoded=enc, keep_rows=False, algo=algo,
                    **kw).run()
    st = Simulator(tr, cl, node_of, model=model, engine="native", encoded=enc_s, algo=algo, **kw).run()
    identical(mem, st)
    assert enc_s.nops == len(enc.kind)
    assert enc_s.task_off.tolist() == enc.task_off.tolist()
    for a, b in zip(enc.measured, enc_s.measured, strict=True):
        assert a.tolist() == b.tolist()
    return mem, st


@pytest.fixture(params=[40, 1 << 16], ids=["tiny-buffer", "default-buffer"])
def buffer(request, monkeypatch):
    """A per-task buffer of 40 bytes forces a refill every op or two."""
    monkeypatch.setenv(replay_stream.BUFFER_ENV, str(request.param))
    monkeypatch.setenv(replay_stream.CHUNK_ENV, "5")  # a lowering chunk every row group or so
    monkeypatch.setenv(replay_stream.PRUNE_ENV, "1")  # the keys of lowered tasks leave the map at every chunk
    return request.param


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("model", MODELS)
def test_random_traces_stream_identically(seed, model, buffer, tmp_path):
    """Nonblocking exchanges waited for in random order (waits on several requests), blocking sends,
    sendrecv rings and every collective, for every model, mapping and collective algorithm."""
    _, tr, cl, params = random_case(seed, model)
    algo = ("binomial", "recdoub", "ring")[seed % 3]
    enc_s = stream_of(tr, tmp_path, algo=algo)
    try:
        for mp in ("rrn", "rrp", "random"):
            compare(tr, cl, mapping(mp, tr.ntasks, cl, seed), model, enc_s, algo=algo, params=params)
    finally:
        enc_s.close()


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("model", MODELS)
def test_probes_polls_and_cpu_time_stream_identically(seed, model, buffer, tmp_path):
    tr, cl, params = probe_case(seed, model)
    for compute in ("wall", "cpu"):
        enc_s = stream_of(tr, tmp_path, name=f"{compute}.parquet", compute=compute)
        try:
            for eager in (0, 4096):
                compare(tr, cl, mapping("rrn", tr.ntasks, cl, seed), model, enc_s, compute=compute, params=params,
                        eager_bytes=eager)
        finally:
            enc_s.close()


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("align", ["unsync", "cosched"])
def test_jitter_streams_identically(seed, align, tmp_path, monkeypatch):
    monkeypatch.setenv(replay_stream.BUFFER_ENV, "48")
    model = MODELS[seed % 4]
    rng, tr, cl, params = random_case(seed, model)
    enc_s = stream_of(tr, tmp_path)
    try:
        for replica in range(2):
            jit = random_jitter(rng, tr.ntasks, align, seed, replica)
            compare(tr, cl, mapping("rrn", tr.ntasks, cl, seed), model, enc_s, params=params, jitter=jit)
    finally:
        enc_s.close()


def test_requests_are_recycled_per_task(tmp_path):
    """A long ring (two requests live at a time per task): the pool holds a few requests per task, not one per
    row, and the ops file is at most 25 bytes per op."""
    rng = np.random.default_rng(3)
    n = 4
    rows = []
    for t in range(n):
        rows.append(dict(task=t, op="init"))
        for i in range(200):
            rows.append(dict(task=t, op="irecv", peer=(t - 1) % n, bytes=int(rng.integers(1, 9000)), tag=1,
                             t_start_ns=10 * i, t_end_ns=10 * i))
            rows.append(dict(task=t, op="isend", peer=(t + 1) % n, bytes=100, tag=1, t_start_ns=10 * i,
                             t_end_ns=10 * i))
            k = 1 + 4 * i
            rows.append(dict(task=t, op="wait", req=k, t_start_ns=10 * i, t_end_ns=10 * i + 3))
            rows.append(dict(task=t, op="wait", req=k + 1, t_start_ns=10 * i + 3, t_end_ns=10 * i + 4))
        rows.append(dict(task=t, op="finalize"))
    tr = Trace(make_events(rows), n)
    enc_s = stream_of(tr, tmp_path, rg=50)
    try:
        assert enc_s.nreqs <= 1 + 2 * n
        assert enc_s.nbytes_file <= 25 * enc_s.nops
        cl = Cluster(2, 2, 1e9, 1e-6)
        for model in MODELS:
            compare(tr, cl, mapping("rrn", n, cl), model, enc_s)
        assert enc_s.nkeys == n and 0 < enc_s.key_slots <= n
    finally:
        enc_s.close()


def test_unmatched_and_deadlock_are_reported_the_same_way(tmp_path):
    cl = Cluster(2, 1, 1e9, 0.0)
    cases = [([dict(task=0, op="init"), dict(task=0, op="isend", peer=1, bytes=8), dict(task=0, op="finalize"),
               dict(task=1, op="init"), dict(task=1, op="finalize")],
              r"unmatched send: rank 0 seq 1 to rank 1 has no matching receive \(1 unmatched"),
             ([dict(task=0, op="init"), dict(task=0, op="finalize"),
               dict(task=1, op="init"), dict(task=1, op="recv", peer=0, bytes=8), dict(task=1, op="finalize")],
              "blocked at rank 1 seq 1"),
             ([dict(task=0, op="init"), dict(task=0, op="wait", req=5), dict(task=0, op="finalize"),
               dict(task=1, op="init"), dict(task=1, op="finalize")],
              "blocked at rank 0 seq 1")]
    for i, (rows, msg) in enumerate(cases):
        tr = Trace(make_events(rows), 2)
        enc_s = stream_of(tr, tmp_path, name=f"e{i}.parquet", rg=2)
        try:
            errs = []
            for enc in (replay_native.lower_native(tr), enc_s):
                with pytest.raises(InputFileError, match=msg) as e:
                    Simulator(tr, cl, [0, 1], eager_bytes=1024, engine="native", encoded=enc, keep_rows=False).run()
                errs.append(str(e.value))
            assert errs[0] == errs[1]
        finally:
            enc_s.close()


def test_tasks_without_rows_and_a_single_row_group(tmp_path):
    """Tasks 0, 1, 3 of 5 talk (their world is a communicator of the three), task 2 only starts and ends, task 4
    has no rows; one row group holds the whole trace."""
    rng = np.random.default_rng(11)
    world = [0, 1, 3]
    rows = random_rows(rng, 3, 10)
    for r in rows:
        r["task"] = world[r["task"]]
        if r.get("peer", -1) >= 0:
            r["peer"] = world[r["peer"]]
    rows += [dict(task=2, op="init"), dict(task=2, op="finalize")]
    tr = Trace(make_events(rows), 5, comms={0: world})
    cl = Cluster(5, 1, 1e9, 1e-6)
    enc_s = stream_of(tr, tmp_path, rg=None)
    try:
        compare(tr, cl, list(range(5)), "maxmin", enc_s)
        assert enc_s.task_off[4] == enc_s.task_off[5] and enc_s.task_off[2] < enc_s.task_off[3]
    finally:
        enc_s.close()


def test_unsorted_trace_and_other_formats_are_refused(tmp_path):
    rows = [dict(task=0, op="init"), dict(task=0, op="finalize"), dict(task=1, op="init"),
            dict(task=1, op="finalize")]
    path = write_parquet(Trace(make_events(rows), 2), tmp_path / "t.parquet")
    t = pq.read_table(path)
    pq.write_table(t.take([2, 3, 0, 1]).replace_schema_metadata(t.schema.metadata), path)
    with pytest.raises(InputFileError, match="not sorted by task then seq"):
        replay_stream.lower(replay_stream.open_trace(str(path)), tmpdir=str(tmp_path))
    assert not list(tmp_path.glob("hpcvar-ops-*"))  # the ops file is removed on an error
    with pytest.raises(UsageError, match="Parquet traces only") as e:
        replay_stream.open_trace(str(tmp_path / "app.tit"))
    assert e.value.where == "--stream"


def test_cli_stream_matches_in_memory_and_refuses_chrome(tmp_path):
    from hpcvar.kinds.sim_app.job import AppParams, job
    from hpcvar.results.context import JobContext

    _, tr, _, _ = random_case(4, "gige")
    path = write_parquet(tr, tmp_path / "t.parquet")
    small_row_groups(path, 5)
    out = {}
    for stream in (False, True):
        run = job(AppParams(trace=str(path), nodes=2, models=("none", "gige", "myrinet", "maxmin"), stream=stream),
                  JobContext(runs_dir=str(tmp_path / f"runs{stream}"), argv=["test"], progress=False))
        res = run.info["result"]
        assert res["stream"] is stream
        out[stream] = [(r["model"], r["makespan_s"], r.get("mean_e_abs_pct"), r["tasks"]) for r in res["runs"]]
    assert out[True] == out[False]
    with pytest.raises(UsageError, match="--chrome needs the time of every trace row") as e:
        job(AppParams(trace=str(path), stream=True, chrome_path=str(tmp_path / "x.json")),
            JobContext(runs_dir=str(tmp_path / "runs"), argv=["test"], progress=False))
    assert e.value.where == "--chrome"


def test_cli_flag_refuses_chrome(tmp_path):
    from tests.conftest import run_cli

    rows = [dict(task=0, op="init"), dict(task=0, op="finalize")]
    path = write_parquet(Trace(make_events(rows), 1), tmp_path / "t.parquet")
    (tmp_path / "runs").mkdir()
    r = run_cli(["sim", "app", str(path), "--stream", "--chrome", str(tmp_path / "x.json"), "--runs-dir",
                 str(tmp_path / "runs")])
    assert r.returncode != 0
    assert "--chrome" in r.stderr and "--no-stream" in r.stderr


def test_automatic_choice(tmp_path, monkeypatch):
    """By default a trace streams when its in-memory replay would take more than half of MemAvailable (with a
    note), never when the per-row times are asked for or the trace is not Parquet; the flags decide otherwise."""
    from hpcvar.kinds.sim_app import job as jobmod

    _, tr, _, _ = random_case(1, "none")
    path = str(write_parquet(tr, tmp_path / "t.parquet"))
    need = tr.nrows * jobmod.IN_MEMORY_BYTES_PER_EVENT
    monkeypatch.setattr(jobmod, "_mem_available", lambda: 2 * need + 2)
    assert jobmod._stream_choice(jobmod.AppParams(trace=path)) == (False, None)
    monkeypatch.setattr(jobmod, "_mem_available", lambda: 2 * need - 2)
    on, note = jobmod._stream_choice(jobmod.AppParams(trace=path))
    assert on and note is not None and "--no-stream" in note
    for p in (jobmod.AppParams(trace=path, chrome_path="x.json"), jobmod.AppParams(trace=path, breakdown=True),
              jobmod.AppParams(trace=path, engine="python"), jobmod.AppParams(trace=str(tmp_path / "a.tit")),
              jobmod.AppParams(trace=path, stream=False)):
        assert jobmod._stream_choice(p) == (False, None)
    assert jobmod._stream_choice(jobmod.AppParams(trace=path, stream=True)) == (True, None)
    for kw, flag in ((dict(breakdown=True), "--breakdown"), (dict(engine="python"), "--engine")):
        with pytest.raises(UsageError) as e:
            jobmod.AppParams(trace=path, stream=True, **kw).check()
        assert e.value.where == flag


def test_bad_rows_are_reported_like_the_in_memory_lowering(tmp_path, monkeypatch):
    """A receive from no task, in a later chunk than the first: the same task, seq and remedy."""
    monkeypatch.setenv(replay_stream.CHUNK_ENV, "2")
    rows = [dict(task=t, op=o) for t in range(3) for o in ("init", "finalize")]
    rows.insert(5, dict(task=2, op="recv", peer=-1, bytes=8))
    tr = Trace(make_events(rows), 3)
    with pytest.raises(InputFileError) as mem:
        replay_native.lower_native(tr)
    with pytest.raises(InputFileError) as st:
        stream_of(tr, tmp_path, rg=2)
    assert "task 2 seq 1: recv from peer -1 (not a task)" in str(st.value)
    assert str(st.value) == str(mem.value) and st.value.todo == mem.value.todo
    assert not list(tmp_path.glob("hpcvar-ops-*"))


def test_collective_keys_are_recycled(tmp_path, monkeypatch):
    """Each allreduce's messages have keys of their own (600 here); the core holds those in use only."""
    monkeypatch.setenv(replay_stream.BUFFER_ENV, "64")
    n, calls = 4, 100
    rows = []
    for t in range(n):
        rows.append(dict(task=t, op="init"))
        for i in range(calls):
            rows.append(dict(task=t, op="allreduce", bytes=8 if i % 2 else 200_000, t_start_ns=100 * i + 10 * t,
                             t_end_ns=100 * i + 50))
        rows.append(dict(task=t, op="finalize", t_start_ns=100 * calls, t_end_ns=100 * calls))
    tr = Trace(make_events(rows), n)
    enc_s = stream_of(tr, tmp_path, rg=30)
    try:
        cl = Cluster(2, 2, 1e9, 1e-6)
        for model in MODELS:
            compare(tr, cl, mapping("rrn", n, cl), model, enc_s)
        assert enc_s.nkeys == 6 * calls and enc_s.key_slots <= 24
    finally:
        enc_s.close()


@pytest.mark.parametrize("order,rg,msg", [([0, 1, 3, 2, 4, 5], 3, r"task 0 seq 2 after task 1\)"),  # 0 after 1
                                          ([0, 1, 2, 3, 5, 4], 4, r"task 1 seq 2 after task 1\)")])  # seq 1 skipped
def test_disorder_at_a_row_group_boundary_is_refused(order, rg, msg, tmp_path, monkeypatch):
    """Row groups lowered one by one, the last task of each carried to the next: the carried task's rows and the
    next group's are checked together (the next group's first row continues the carried task or starts a later
    one at seq 0)."""
    monkeypatch.setenv(replay_stream.CHUNK_ENV, "1")
    rows = [dict(task=0, op="init"), dict(task=0, op="barrier"), dict(task=0, op="finalize"),
            dict(task=1, op="init"), dict(task=1, op="barrier"), dict(task=1, op="finalize")]
    path = write_parquet(Trace(make_events(rows), 2), tmp_path / "t.parquet")
    t = pq.read_table(path)
    # rows 0-2 are task 0, 3-5 task 1
    pq.write_table(t.take(order).replace_schema_metadata(t.schema.metadata), path, row_group_size=rg)
    with pytest.raises(InputFileError, match=msg):
        replay_stream.lower(replay_stream.open_trace(str(path)), tmpdir=str(tmp_path))
