"""Concurrent and failing writes into a runs directory (docs/robustness.md).

- Two hpcvar processes writing into one runs directory at once keep both runs intact: ids never collide
  (the id is the run directory, made with an atomic mkdir).
- A write the system refuses (a read-only or a full file system: a small tmpfs mounted by the test, root
  only) ends in one clean ``error:`` line, leaves no temporary file, and never a run that claims to be
  complete."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from hpcvar.errors import ResultsError
from hpcvar.results import Run
from hpcvar.results.store import atomic_write_text, list_runs
from tests.conftest import hpcvar_cmd, run_cli


def _writer(root: str, n: int, tag: int) -> None:
    for i in range(n):
        run = Run.create("bench latency", {"writer": tag, "i": i}, root, argv=["test"])
        run.write_table("noise.periods", pd.DataFrame({"host": ["h"], "cpu": [0], "rank": [0], "hz": [1.0],
                                                       "strength": [1.0], "harmonics": [1]}))
        run.finish("complete", {"writer": tag, "i": i})


def test_two_processes_writing_runs_at_once_keep_every_run(tmp_path):
    root = tmp_path / "runs"
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_writer, args=(str(root), 25, t)) for t in (1, 2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    runs = list_runs(root)
    assert len(runs) == 50 and len({r.id for r in runs}) == 50
    assert sorted((r.info["result"]["writer"], r.info["result"]["i"]) for r in runs) == \
        sorted((t, i) for t in (1, 2) for i in range(25))
    assert all(r.info["status"] == "complete" and r.info["id"] == r.id for r in runs)
    assert not list(root.rglob("*.tmp"))


@pytest.mark.mpi
@pytest.mark.timeout(300)
def test_two_benchmarks_at_once_in_one_runs_dir(tmp_path):
    env = dict(os.environ, HPCVAR_RUNS=str(tmp_path / "runs"), COLUMNS="120")
    args = ["bench", "latency", "--sizes", "8,1KiB", "--iters", "200", "--warmup", "10", "--np", "2"]
    procs = [subprocess.Popen(hpcvar_cmd() + args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for _ in range(2)]
    outs = [p.communicate(timeout=240) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    runs = list_runs(tmp_path / "runs")
    assert len(runs) == 2 and runs[0].id != runs[1].id
    assert all(r.info["status"] == "complete" and r.has_table("latency.samples") for r in runs), \
        [(r.id, r.info["status"], r.info["tables"]) for r in runs]


def test_a_refused_write_is_a_results_error_and_leaves_no_temporary_file(tmp_path, monkeypatch):
    target = tmp_path / "run.json"
    atomic_write_text(target, "old\n")

    def full(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(ResultsError) as e:
        atomic_write_text(target, "new\n")
    assert "No space left" in e.value.what and "disk is full" in e.value.todo
    assert target.read_text() == "old\n" and not list(tmp_path.glob("*.tmp"))


# ---- real file systems that refuse writes (root) ----------------------------------------------------------
@contextlib.contextmanager
def tmpfs(path: Path, size: str):
    path.mkdir()
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "o17-tmpfs", str(path)],
                         capture_output=True, text=True)
    if res.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {res.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def _one_clean_line(res) -> str:
    err = res.stderr.strip()
    assert res.returncode != 0
    assert "Traceback" not in err, err
    lines = [ln for ln in err.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1, err
    return lines[0]


def _no_complete_run(root: Path) -> None:
    for f in root.rglob("run.json"):
        try:
            info = Run.open(f.parent).info
        except ResultsError:
            continue
        assert info["status"] != "complete", f
    assert not list(root.rglob("*.tmp"))


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")


@needs_root
@pytest.mark.mpi
@pytest.mark.timeout(200)
def test_read_only_runs_dir_gives_one_clean_line(tmp_path):
    with tmpfs(tmp_path / "ro", "1m") as mnt:
        (mnt / "runs").mkdir()
        subprocess.run(["mount", "-o", "remount,ro", str(mnt)], check=True)
        res = run_cli(["bench", "latency", "--sizes", "8", "--iters", "20"], env={"HPCVAR_RUNS": str(mnt / "runs")},
                      timeout=120)
        line = _one_clean_line(res)
        assert "read-only" in line.lower(), line
        _no_complete_run(mnt)


@needs_root
@pytest.mark.mpi
@pytest.mark.timeout(200)
def test_full_disk_gives_one_clean_line_and_no_complete_run(tmp_path):
    with tmpfs(tmp_path / "full", "256k") as mnt:
        runs = mnt / "runs"
        runs.mkdir()
        # fill the file system but for a few KiB: run.json fits, the raw samples do not
        fd = os.open(mnt / "filler", os.O_WRONLY | os.O_CREAT)
        with contextlib.suppress(OSError):
            while os.write(fd, b"\1" * 4096):
                pass
        os.close(fd)
        os.truncate(mnt / "filler", os.path.getsize(mnt / "filler") - 3 * 4096)
        res = run_cli(["bench", "latency", "--sizes", "8,64KiB", "--iters", "5000", "--warmup", "10"],
                      env={"HPCVAR_RUNS": str(runs)}, timeout=150)
        _one_clean_line(res)
        _no_complete_run(runs)
