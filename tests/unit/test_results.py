import json
import os

import numpy as np
import pandas as pd
import pytest

from hpcvar.errors import InputFileError, ResultsError, UsageError
from hpcvar.results import SCHEMA_VERSION, Run, atomic_write_text, list_runs, read_raw, resolve_run
from hpcvar.results.schema import check_table
from tests.conftest import run_cli


def _latency_frames():
    s = pd.DataFrame({"size_bytes": [8, 8], "iter": [0, 1], "rtt_ns": [2.0, 4.0], "oneway_ns": [1.0, 2.0],
                      "send_ns": [0.5, 0.7]})
    return s


def test_run_round_trip(runs_dir):
    run = Run.create("bench latency", {"sizes": [8]}, argv=["hpcvar", "bench", "latency"], metadata={"host": "h"})
    assert run.path.parent == runs_dir and run.path.name.endswith("-bench-latency")
    run.write_table("latency.samples", _latency_frames())
    run.finish("complete", {"sizes": []})
    again = Run.open(run.path)
    assert again.info["schema_version"] == SCHEMA_VERSION
    assert again.info["status"] == "complete" and again.info["params"] == {"sizes": [8]}
    pd.testing.assert_frame_equal(again.read_table("latency.samples"), _latency_frames())
    assert [r.id for r in list_runs()] == [run.id]
    assert resolve_run("latest") == run.path
    assert resolve_run(run.id) == run.path


def test_two_runs_in_the_same_second_get_distinct_directories(runs_dir):
    a = Run.create("bench latency", {})
    b = Run.create("bench latency", {})
    assert a.path != b.path


def test_unknown_schema_version_is_an_error(runs_dir):
    run = Run.create("bench latency", {})
    info = json.loads((run.path / "run.json").read_text())
    info["schema_version"] = 999
    (run.path / "run.json").write_text(json.dumps(info))
    with pytest.raises(ResultsError) as e:
        Run.open(run.path)
    assert "999" in e.value.what and "run.json" in e.value.where


def test_undeclared_or_incomplete_tables_are_refused(runs_dir):
    run = Run.create("bench latency", {})
    with pytest.raises(ResultsError):
        run.write_table("no.such.table", pd.DataFrame({"a": [1]}))
    with pytest.raises(ResultsError):
        check_table("latency.samples", pd.DataFrame({"size_bytes": [1]}))


def test_atomic_write_leaves_old_file_on_failure(tmp_path, monkeypatch):
    target = tmp_path / "f.txt"
    atomic_write_text(target, "old")

    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(ResultsError):  # a refused write is one clean error (docs/robustness.md)
        atomic_write_text(target, "new")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["f.txt"]  # no temporary left behind


def test_resolve_unknown_run(runs_dir):
    with pytest.raises(UsageError):
        resolve_run("nope")


RAW = """#@hpcvar_raw=1
#@encoding=csv
#@program=hv_test
#@columns=iter,rtt_ns
#@point size=8 iters=2
0,10.5
1,11
#@point_end rows=2
#@point size=64 iters=2
0,1
"""


def test_raw_reader_keeps_complete_points_only(tmp_path):
    p = tmp_path / "a.raw"
    p.write_text(RAW)
    raw = read_raw(p)
    assert raw.meta["program"] == "hv_test"
    assert raw.columns == ["iter", "rtt_ns"]
    assert len(raw.points) == 1 and raw.incomplete == 1
    assert raw.points[0].params == {"size": "8", "iters": "2"}
    np.testing.assert_array_equal(raw.column(raw.points[0], "rtt_ns"), [10.5, 11.0])


def test_raw_reader_binary_rows(tmp_path):
    rows = np.array([[0, 1.25], [1, 2.5]], dtype="<f8")
    data = (b"#@hpcvar_raw=1\n#@encoding=binary\n#@columns=iter,rtt_ns\n#@point size=8\n#@rows_binary=2\n"
            + rows.tobytes() + b"\n#@point_end rows=2\n")
    p = tmp_path / "b.raw"
    p.write_bytes(data)
    raw = read_raw(p)
    np.testing.assert_array_equal(raw.points[0].rows, rows)


def test_raw_reader_errors_name_file_and_line(tmp_path):
    p = tmp_path / "c.raw"
    p.write_text("#@hpcvar_raw=1\n#@columns=a\n1\n")
    with pytest.raises(InputFileError) as e:
        read_raw(p)
    assert e.value.where == f"{p}:3"
    q = tmp_path / "d.raw"
    q.write_text("hello\n")
    with pytest.raises(InputFileError):
        read_raw(q)


def test_a_runs_directory_that_is_a_file_is_named(tmp_path):
    f = tmp_path / "runs"
    f.write_text("not a directory")
    with pytest.raises(ResultsError, match="the runs directory is not a directory") as e:
        Run.create("bench latency", {}, runs_dir=f)
    assert e.value.where == str(f) and "HPCVAR_RUNS" in (e.value.todo or "")


def test_a_running_run_whose_process_is_gone_is_lost(runs_dir):
    """A run stored 'running' by a process killed with SIGKILL (which no handler sees) lists as 'lost'; a live
    writer's run stays 'running', and a resumed run belongs to its new process."""
    import signal
    import subprocess
    import sys

    code = ("import sys, time; from hpcvar.results import Run; r = Run.create('bench latency', {}, sys.argv[1]); "
            "print(r.path, flush=True); time.sleep(60)")
    p = subprocess.Popen([sys.executable, "-c", code, str(runs_dir)], stdout=subprocess.PIPE, text=True)
    path = p.stdout.readline().strip()
    try:
        assert Run.open(path).status == "running"
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=30)
    run = Run.open(path)
    assert run.info["status"] == "running" and run.status == "lost"
    res = run_cli(["runs", "list"], env={"HPCVAR_RUNS": str(runs_dir)})
    assert "lost" in res.stdout, res.stdout
    run.claim()
    assert run.status == "running" and run.info["owner"]["pid"] == os.getpid()


@pytest.mark.parametrize("ref", ["20260101", "latest", "20260101T000000Z-bench-latency"])
def test_an_unreadable_run_is_called_unreadable(tmp_path, ref):
    """Issue #27: runs show, report and compare said "no run" for a run whose run.json is damaged (given by a part
    of its name or as 'latest', which silently fell back to an older run)."""
    from hpcvar.results.store import resolve_run

    runs = tmp_path / "runs"
    (runs / "20251231T000000Z-bench-latency").mkdir(parents=True)
    (runs / "20251231T000000Z-bench-latency" / "run.json").write_text("{}")
    (runs / "20260101T000000Z-bench-latency").mkdir()
    (runs / "20260101T000000Z-bench-latency" / "run.json").write_text("{broken")
    if not ref.endswith("latency"):  # the exact name resolves; opening it says the same
        with pytest.raises(ResultsError) as e:
            resolve_run(ref, runs)
        assert "is unreadable" in e.value.what and "not valid JSON" in e.value.what
    for args in (["runs", "show", ref], ["report", ref, "-o", str(tmp_path / "r.html")], ["compare", ref, ref]):
        res = run_cli([*args, "--runs-dir", str(runs)])
        assert res.returncode != 0 and "not valid JSON" in res.stderr and "no run" not in res.stderr, res.stderr


def test_the_source_trees_sha_is_what_git_says_without_running_git(tmp_path):
    """metadata.git_sha reads HEAD through the ref files (no git process: 15-20 ms of every command): the same
    SHA as ``git rev-parse HEAD`` on a branch, after the refs are packed, detached, and in a linked worktree."""
    import shutil
    import subprocess

    from hpcvar.metadata import sha_of_checkout

    if shutil.which("git") is None:
        pytest.skip("git not installed")

    def git(*args, cwd=tmp_path / "repo") -> str:
        env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
               "GIT_COMMITTER_EMAIL": "t@t", "GIT_CONFIG_GLOBAL": os.devnull}
        return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True,
                              text=True).stdout.strip()

    repo = tmp_path / "repo"
    (repo / "src" / "pkg").mkdir(parents=True)
    git("init", "-q", "-b", "main", cwd=repo)
    (repo / "a").write_text("1")
    git("add", "a")
    git("commit", "-q", "-m", "one")
    deep = repo / "src" / "pkg"
    assert sha_of_checkout(deep) == git("rev-parse", "HEAD")
    (repo / "a").write_text("2")
    git("commit", "-q", "-am", "two")
    git("pack-refs", "--all")
    assert not (repo / ".git" / "refs" / "heads" / "main").exists()
    assert sha_of_checkout(deep) == git("rev-parse", "HEAD")
    first = git("rev-parse", "HEAD~1")
    git("checkout", "-q", "--detach", first)
    assert sha_of_checkout(deep) == first
    git("checkout", "-q", "main")
    git("worktree", "add", "-q", "-b", "side", str(tmp_path / "wt"), first)
    assert sha_of_checkout(tmp_path / "wt") == first and sha_of_checkout(deep) == git("rev-parse", "main")
    assert sha_of_checkout(tmp_path / "elsewhere") is None
