"""Every terminal view reads the stored Run: a command prints what 'hpcvar runs show' ends with."""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console

from hpcvar.report.terminal import render_run
from hpcvar.results import kinds
from hpcvar.results.store import Run
from tests.conftest import run_cli


def test_command_output_is_the_stored_runs_view(runs_dir):
    out = run_cli(["sim", "jitter", "--synthetic", "250Hz:2us", "--tasks", "1,2", "--phases", "5",
                   "--trace-length", "2s", "--no-plots"], check=True).stdout
    run = Path(out.strip().splitlines()[-1].removeprefix("stored in "))
    shown = run_cli(["runs", "show", str(run)], check=True).stdout
    assert "jitSim" in out and shown.endswith(out)
    # --json stays the job's result, the one stored with the run
    js = json.loads(run_cli(["runs", "show", str(run), "--json"], check=True).stdout)
    assert js["result"]["points"] and js["result"]["run"] == str(run)


def test_render_run_picks_the_kinds_renderer_from_the_run(tmp_path):
    run = Run.create("sim jitter", {}, tmp_path, ["hpcvar"])
    run.finish("complete", {"phases_n": 3, "work_cycles": 10, "barrier": "tree", "baseline_cycles": 30,
                            "points": [], "warnings": ["w1"], "run": str(run.path)})
    con = Console(record=True, width=120)
    render_run(con, Run.open(run.path))
    text = con.export_text()
    assert "jitSim: 3 phases" in text and "warning: w1" in text and f"stored in {run.path}" in text


def test_render_run_of_a_kind_without_renderer_prints_the_result(tmp_path):
    run = Run.create("something new", {}, tmp_path, ["hpcvar"])
    run.finish("complete", {"answer": 42})
    con = Console(record=True, width=120)
    render_run(con, Run.open(run.path))
    assert "'answer': 42" in con.export_text()


def test_every_renderer_takes_a_run():
    """The kind table's renderers are (console, run): their second parameter is named run."""
    import inspect

    for k in kinds.KINDS.values():
        fn = k.view("render")
        if fn is not None:
            assert list(inspect.signature(fn).parameters)[:2] == ["console", "run"], k.render
