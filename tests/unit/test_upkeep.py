"""Storage upkeep (issue 26): raw files stored compressed and read in either form, runs removed and pruned
without ever touching a run in progress or a run a kept run refers to, and a --runs-dir that does not exist is an
error instead of a new empty store."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from hpcvar.errors import InputFileError
from hpcvar.results import Run, list_runs
from hpcvar.results.rawio import compress_raw, raw_bytes, raw_files, read_raw
from hpcvar.results.upkeep import plan_prune, plan_removal, references
from tests.conftest import run_cli

RAW = "#@hpcvar_raw=1\n#@columns=iter,rtt_ns\n#@point size=8\n0,1000.5\n1,1001.25\n#@point_end rows=2\n"


def test_compressed_raw_reads_back_the_same(tmp_path):
    p = tmp_path / "launch-001.raw"
    p.write_text(RAW)
    plain = read_raw(p)
    packed = compress_raw(p)
    assert packed.name == "launch-001.raw.zst" and not p.exists()
    assert packed.read_bytes()[:4] == b"\x28\xb5\x2f\xfd"  # a standard zstd frame: zstd -dc reads it
    assert raw_bytes(packed).decode() == RAW
    again = read_raw(packed)
    assert again.columns == plain.columns and again.points[0].params == {"size": "8"}
    np.testing.assert_array_equal(again.points[0].rows, plain.points[0].rows)
    assert read_raw(p).points[0].rows.shape == (2, 2)  # the old name still finds the compressed file


def test_raw_files_lists_either_form_once(tmp_path):
    for k in (1, 2, 3):
        (tmp_path / f"launch-00{k}.raw").write_text(RAW)
    compress_raw(tmp_path / "launch-001.raw")
    # an interrupted compression: the copy was written, the original not yet removed
    (tmp_path / "launch-002.raw.zst").write_bytes((tmp_path / "launch-001.raw.zst").read_bytes())
    assert [p.name for p in raw_files(tmp_path, "launch-*.raw")] == [
        "launch-001.raw.zst", "launch-002.raw.zst", "launch-003.raw"]


def test_damaged_compressed_raw_is_named(tmp_path):
    p = tmp_path / "launch-001.raw"
    p.write_text(RAW * 50)
    packed = compress_raw(p)
    packed.write_bytes(packed.read_bytes()[:20])
    with pytest.raises(InputFileError) as e:
        read_raw(packed)
    assert e.value.where == str(packed) and "re-run" in (e.value.todo or "")


def _run(runs_dir, command, age_days, params=None, status="complete"):
    r = Run.create(command, params or {}, runs_dir, ["hpcvar"], {"host": "h1"})
    r.info["started_utc"] = (dt.datetime.now(dt.UTC) - dt.timedelta(days=age_days)).isoformat(
        timespec="seconds").replace("+00:00", "Z")
    r.info["status"] = status
    r.save()
    return r


def _dead_pid() -> int:
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def test_prune_keeps_new_runs_the_last_n_and_what_kept_runs_refer_to(runs_dir):
    now = dt.datetime.now(dt.UTC)
    old_lat = [_run(runs_dir, "bench latency", d) for d in (60, 50, 40, 35)]
    baseline = _run(runs_dir, "characterize", 90)
    kept_char = _run(runs_dir, "characterize", 1, {"baseline": baseline.id})
    recent = _run(runs_dir, "bench latency", 2)
    plan = plan_prune(list_runs(runs_dir), now, 30 * 86400.0, 2)
    removed = {d.run.id for d in plan.removed}
    # the two newest latency runs are the recent one and the 35-day one; the other three are old: removed
    assert removed == {old_lat[0].id, old_lat[1].id, old_lat[2].id}
    why = {d.run.id: d.why for d in plan.kept}
    assert why[baseline.id] == "kept: among the 2 newest of its group"  # 2 characterizations
    assert "not old enough" in why[recent.id] or "newest" in why[recent.id]
    plan = plan_prune(list_runs(runs_dir), now, 30 * 86400.0, 1)
    why = {d.run.id: d.why for d in plan.kept}
    assert why[baseline.id] == f"kept: run {kept_char.id} refers to it"
    assert kept_char.id not in {d.run.id for d in plan.removed}


def test_prune_never_removes_a_run_in_progress(runs_dir):
    now = dt.datetime.now(dt.UTC)
    live = _run(runs_dir, "bench latency", 40, status="running")  # owned by this (live) process
    lost = _run(runs_dir, "bench latency", 40, status="running")
    lost.info["owner"]["pid"] = _dead_pid()
    lost.save()
    plan = plan_prune(list_runs(runs_dir), now, 30 * 86400.0, None)
    assert {d.run.id for d in plan.removed} == {lost.id}  # its process is gone: 'lost', removable
    assert "in progress" in {d.run.id: d.why for d in plan.kept}[live.id]


def test_references_count_any_mention_in_run_json_and_steps(runs_dir):
    lat = _run(runs_dir, "bench latency", 5)
    sim = _run(runs_dir, "sim jitter", 4, {"send_cycles": f"run:{lat.path}"})
    char = _run(runs_dir, "characterize", 3)
    step = Run.create("sim jitter", {"latency_intra": f"run:{sim.id}"}, char.steps_dir(), ["hpcvar"], {})
    assert step.path.parent.parent == char.path
    refs = references(list_runs(runs_dir))
    assert refs[lat.id] == {sim.id} and refs[sim.id] == {char.id} and refs[char.id] == set()
    plan = plan_removal(list_runs(runs_dir), [lat])
    assert plan.removed == [] and "refers to it" in plan.kept[0].why
    # the characterization's step refers to the simulation: both stay while it does
    assert plan_removal(list_runs(runs_dir), [lat, sim]).removed == []
    assert {d.run.id for d in plan_removal(list_runs(runs_dir), [lat, sim, char]).removed} == {lat.id, sim.id, char.id}


def test_runs_rm_and_prune_on_the_command_line(runs_dir):
    a = _run(runs_dir, "bench latency", 40)
    b = _run(runs_dir, "bench latency", 39, {"uses": a.id})
    char = _run(runs_dir, "characterize", 1)
    step = Run.create("bench latency", {}, char.steps_dir(), ["hpcvar"], {})
    res = run_cli(["runs", "rm", a.id])
    assert res.returncode == 2 and f"run {b.id} refers to it" in res.stderr, res.stderr
    res = run_cli(["runs", "rm", f"{char.id}/steps/{step.id}"])
    assert res.returncode == 2 and "step of characterization" in res.stderr, res.stderr
    res = run_cli(["runs", "prune"])
    assert res.returncode == 2 and "--older-than" in res.stderr
    dry = json.loads(run_cli(["runs", "prune", "--older-than", "30d", "--dry-run", "--json"], check=True).stdout)
    assert sorted(r["id"] for r in dry["removed"]) == sorted([a.id, b.id]) and dry["bytes"] > 0
    assert a.path.is_dir()  # a dry run removes nothing
    out = run_cli(["runs", "prune", "--older-than", "30d"], check=True).stdout
    assert "2 run(s) removed" in out
    assert not a.path.exists() and not b.path.exists() and char.path.is_dir() and step.path.is_dir()
    assert not any(p.name.startswith(".removing-") for p in runs_dir.iterdir())
    out = run_cli(["runs", "rm", char.id, "--json"], check=True).stdout
    assert json.loads(out)["removed"][0]["id"] == char.id and not char.path.exists()


def test_a_runs_dir_that_does_not_exist_is_an_error(tmp_path):
    missing = tmp_path / "hpcvar-rnus"  # a typo
    for args in (["runs", "list"], ["bench", "latency", "--sizes", "8"], ["runs", "prune", "--keep-last", "1"]):
        res = run_cli([*args, "--runs-dir", str(missing)])
        assert res.returncode == 2, res.stderr
        assert res.stderr.strip() == (f"error: the runs directory '{missing}' does not exist (--runs-dir). Check its "
                                      f"spelling, or create it first (mkdir -p {missing}); without --runs-dir runs go "
                                      "to $HPCVAR_RUNS or ./hpcvar-runs, created on first use")
    assert not missing.exists()
    # the default store is created on first use
    env = {k: v for k, v in os.environ.items() if k != "HPCVAR_RUNS"}
    res = subprocess.run([sys.executable, "-c", "from hpcvar.results import Run; print(Run.create('x', {}).path)"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, check=True)
    assert (tmp_path / res.stdout.strip()).parent == tmp_path / "hpcvar-runs"
