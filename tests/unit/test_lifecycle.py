"""One run lifecycle (issue #19): ``hpcvar.results.store.run_lifecycle`` ends every job's run complete on
success, and failed, or interrupted (Ctrl-C, SIGTERM), on any exception, which goes on unchanged."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

from hpcvar.bench.runner import BenchContext, Benchmark, Params, run_benchmark
from hpcvar.errors import HpcvarError, LaunchError
from hpcvar.launch import LaunchSpec
from hpcvar.results import Run
from hpcvar.results.store import run_lifecycle


def _status(run: Run) -> dict:
    info = json.loads((run.path / "run.json").read_text())  # what is stored, not the object in memory
    return {"status": info["status"], "exit_status": info["exit_status"], "ended": info["ended_utc"] is not None,
            "result": info["result"]}


def test_success_marks_the_run_complete_with_its_result(runs_dir):
    run = Run.create("bench latency", {})
    with run_lifecycle(run) as r:
        assert r is run and _status(run)["status"] == "running"
        run.info["result"] = {"sizes": []}
    assert _status(run) == {"status": "complete", "exit_status": 0, "ended": True, "result": {"sizes": []}}


def test_an_exception_inside_leaves_the_run_failed(runs_dir):
    run = Run.create("bench latency", {})
    with pytest.raises(ZeroDivisionError):
        with run_lifecycle(run):
            _ = 1 / 0
    assert _status(run) == {"status": "failed", "exit_status": 1, "ended": True, "result": None}


def test_a_keyboard_interrupt_leaves_the_run_interrupted(runs_dir):
    """SIGTERM takes the same path: the command line turns it into KeyboardInterrupt."""
    run = Run.create("bench latency", {})
    with pytest.raises(KeyboardInterrupt):
        with run_lifecycle(run):
            raise KeyboardInterrupt
    assert _status(run)["status"] == "interrupted" and _status(run)["exit_status"] == 1


def test_a_status_the_job_set_itself_is_kept(runs_dir):
    """A composite run (characterize) ends failed when one of its steps failed, without raising."""
    run = Run.create("characterize", {})
    with run_lifecycle(run):
        run.finish("failed", {"steps": []}, exit_status=1)
    assert _status(run) == {"status": "failed", "exit_status": 1, "ended": True, "result": {"steps": []}}


def test_an_exception_after_the_job_finished_still_marks_the_run_failed(runs_dir):
    run = Run.create("bench latency", {})
    with pytest.raises(HpcvarError):
        with run_lifecycle(run):
            run.finish("complete", {"sizes": []})
            raise HpcvarError("figure failed")
    assert _status(run)["status"] == "failed"


# ---- the benchmark path (run_benchmark) with a launcher that starts nothing -------------------------------------
class _Launcher:
    name = "local"

    def __init__(self, fail: BaseException | None = None):
        self.fail = fail

    def describe(self) -> dict:
        return {"name": "fake"}

    def slots(self) -> int | None:
        return None

    def layout_args(self, spec: LaunchSpec) -> list[str]:
        return []

    def command(self, spec: LaunchSpec):
        return [str(spec.exe), *spec.args], {}

    def run(self, spec, log_dir, label="launch", poll=None):
        if self.fail is not None:
            raise self.fail

        class _Res:
            elapsed_s = 0.0

        return _Res()


@dataclass(frozen=True)
class _Params(Params):
    """No parameters: run.json keeps {}."""


class _Bench(Benchmark[_Params]):
    name = "latency"
    program = "hv_latency"

    def __init__(self, tables_fail: bool = False):
        self.tables_fail = tables_fail

    def point_fields(self):
        return ["size"]

    def points(self, params):
        return [{"size": 8}]

    def argv(self, params, points):
        return []

    def estimate_s(self, params, points):
        return 1.0

    def tables(self, raws, params):
        if self.tables_fail:
            raise HpcvarError("cannot read the raw output")
        return {}

    def result(self, tables, params):
        return {"benchmark": "latency"}


def _run(bench: Benchmark, launcher: _Launcher, after=None) -> Run:
    from hpcvar._native import find_program

    try:
        find_program("hv_latency", needs_mpi=True)
    except HpcvarError:
        pytest.skip("hv_latency is not built")
    ctx = BenchContext(launcher=launcher, np=2, argv=["hpcvar", "bench", "latency"])
    run_benchmark(bench, _Params(), ctx, after=after)
    raise AssertionError("run_benchmark returned")


def _only_run(runs_dir) -> Run:
    (d,) = list(runs_dir.iterdir())
    return Run.open(d)


@pytest.mark.parametrize("fail,status", [(KeyboardInterrupt(), "interrupted"),
                                         (LaunchError("the MPI job died"), "failed")])
def test_run_benchmark_ends_the_run_on_a_launch_failure(runs_dir, fail, status):
    with pytest.raises(type(fail)) as e:
        _run(_Bench(), _Launcher(fail))
    run = _only_run(runs_dir)
    assert run.info["status"] == status
    if status == "failed":  # the resume hint is still added
        assert f"--resume {run.id}" in e.value.todo


def test_run_benchmark_marks_failed_when_its_tables_fail(runs_dir):
    with pytest.raises(HpcvarError, match="raw output"):
        _run(_Bench(tables_fail=True), _Launcher())
    assert _only_run(runs_dir).info["status"] == "failed"


def test_run_benchmark_after_step_runs_inside_the_lifecycle(runs_dir):
    def after(run: Run, result: dict) -> None:
        assert run.info["status"] == "running"
        result["plots"] = ["x.png"]

    ctx = BenchContext(launcher=_Launcher(), np=2, argv=["hpcvar"])
    try:
        run, result = run_benchmark(_Bench(), _Params(), ctx, after=after)
    except HpcvarError as e:
        pytest.skip(f"hv_latency is not built: {e}")
    stored = Run.open(run.path).info
    assert stored["status"] == "complete" and stored["result"]["plots"] == ["x.png"] == result["plots"]
    assert list(result) == ["benchmark", "run", "steal_pct", "plots"]

    def broken(run: Run, result: dict) -> None:
        raise HpcvarError("cannot draw")

    with pytest.raises(HpcvarError, match="draw"):
        run_benchmark(_Bench(), _Params(), ctx, after=broken)
    assert sorted(Run.open(d).info["status"] for d in runs_dir.iterdir()) == ["complete", "failed"]

