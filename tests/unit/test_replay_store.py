"""hpcvar sim app: the stored run (tables, plots, report section, terminal renderer) and cosched jitter."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from hpcvar.sim.replay import Cluster, Simulator
from hpcvar.traces.parquet import Trace, make_events, write_parquet
from tests.conftest import run_cli

FANOUT = []
for _t in (1, 2):
    FANOUT += [dict(task=_t, op="init", t_start_ns=0, t_end_ns=0),
               dict(task=_t, op="recv", peer=0, bytes=10**6, t_start_ns=0, t_end_ns=2_000_000),
               dict(task=_t, op="finalize", t_start_ns=2_000_000, t_end_ns=2_000_000)]
FANOUT += [dict(task=0, op="init", t_start_ns=0, t_end_ns=0),
           dict(task=0, op="isend", peer=1, bytes=10**6, t_start_ns=0, t_end_ns=0),
           dict(task=0, op="isend", peer=2, bytes=10**6, t_start_ns=0, t_end_ns=0),
           dict(task=0, op="wait", req=1, t_start_ns=0, t_end_ns=2_000_000),
           dict(task=0, op="wait", req=2, t_start_ns=2_000_000, t_end_ns=2_000_000),
           dict(task=0, op="finalize", t_start_ns=2_000_000, t_end_ns=2_000_000)]


def test_sim_app_stores_a_run_with_tables_plots_and_section(tmp_path, runs_dir):
    p = write_parquet(Trace(make_events(FANOUT), 3), tmp_path / "fan.trace")
    res = run_cli(["sim", "app", str(p), "--bandwidth", "1GB/s", "--latency", "0", "--eager", "0",
                   "--model", "none,maxmin", "--mapping", "rrn", "--json", "--plots"])
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    run = Path(out["run"])
    assert run.parent == runs_dir
    info = json.loads((run / "run.json").read_text())
    assert info["command"] == "sim app" and info["status"] == "complete"
    assert set(info["tables"]) == {"replay.replicas", "replay.tasks", "replay.runs"}
    runs = pd.read_parquet(run / "replay.runs.parquet")
    assert list(runs["model"]) == ["none", "maxmin"]
    tasks = pd.read_parquet(run / "replay.tasks.parquet")
    mm = tasks[(tasks["model"] == "maxmin")].set_index("task")
    # two 1 MB transfers from node 0 at 1 GB/s share its link: 2 ms each; measured 2 ms: E_abs 0
    assert mm.loc[1, "comm_s"] == pytest.approx(2e-3, rel=1e-12)
    assert mm.loc[1, "e_abs_pct"] == pytest.approx(0.0, abs=1e-9)
    assert mm.loc[0, "conflicts_out"] == 2 and mm.loc[0, "avg_penalty"] == pytest.approx(2.0)
    nn = tasks[(tasks["model"] == "none")].set_index("task")
    assert nn.loc[1, "e_abs_pct"] == pytest.approx(50.0)
    assert runs.set_index("model").loc["none", "mean_e_abs_pct"] == pytest.approx(50.0)  # tasks 0, 1, 2: 1 of 2 ms
    assert (run / "plots" / "comm_per_task.png").is_file() and (run / "plots" / "e_abs.svg").is_file()
    # the stored run renders in the terminal and in the HTML report
    show = run_cli(["runs", "show", str(run)])
    assert show.returncode == 0, show.stderr
    assert "comparison" in show.stdout and "maxmin" in show.stdout
    from hpcvar.report.sections import section_for
    from hpcvar.results.store import Run

    sec = section_for(Run.open(run))
    assert sec is not None and sec.title.startswith("Application replay")
    assert any(h.label == "smallest mean E_abs" and h.value == "0.0 %" for h in sec.headlines)
    assert len(sec.figures) == 2
    rep = run_cli(["report", str(run), "-o", str(tmp_path / "r.html")])
    assert rep.returncode == 0, rep.stderr
    assert "Application replay" in (tmp_path / "r.html").read_text()


def test_figures_are_drawn_when_asked_or_by_the_report(tmp_path, runs_dir):
    """sim app draws no figure by default (it would cost more than a small replay) and says so; the report draws
    the stored run's figures into its own file, leaving the run as it was."""
    p = write_parquet(Trace(make_events(FANOUT), 3), tmp_path / "fan.trace")
    res = run_cli(["sim", "app", str(p), "--model", "none,maxmin"])
    assert res.returncode == 0, res.stderr
    assert "figures: none drawn ('hpcvar sim app --plots' or 'hpcvar report " in res.stdout
    run = next(runs_dir.iterdir())
    assert not list(run.glob("plots/*"))
    rep = run_cli(["report", str(run), "-o", str(tmp_path / "r.html")])
    assert rep.returncode == 0, rep.stderr
    html = (tmp_path / "r.html").read_text()
    assert "Measured and predicted communication time per task" in html and "data:image/png" in html
    assert not list(run.glob("plots/*"))  # the report draws into its own directory


def test_cosched_alignment_puts_every_task_in_the_same_window(tmp_path):
    from hpcvar.sim.replay_jitter import jitter_factory as _jitter

    f = tmp_path / "j.txt"
    f.write_text("100 900\n")  # 100 ns of jitter at the start of every 1000 ns (1 GHz cycles)
    rows = []
    for t in range(3):
        rows += [dict(task=t, op="init", t_start_ns=0, t_end_ns=0),
                 dict(task=t, op="finalize", t_start_ns=9000, t_end_ns=9000)]
    tr = Trace(make_events(rows), 3)
    cl = Cluster(3, 1, 1e9, 0.0)
    for origin in (None, 500e-9):
        make = _jitter(str(f), 1e9, "cosched", 1000e-9, origin)
        for replica in range(4):
            res = Simulator(tr, cl, [0, 1, 2], jitter=make(3, 11, replica)).run()
            # one window per trace lap: every task starts at the window start r = origin mod 1000 ns, so
            # 9000 ns of work cross exactly 10 detours of 100 ns (from 0: absorbed at 0, 1000, ..., 9000;
            # from 500: at 1000, ..., 10000 relative to the trace), whatever the replica
            assert list(res.total_s) == pytest.approx([10e-6] * 3, rel=1e-12)
    # unsync offsets differ per task: not every task can start exactly in the window
    res = [Simulator(tr, cl, [0, 1, 2], jitter=_jitter(str(f), 1e9, "unsync")(3, 11, r)).run().total_s
           for r in range(4)]
    assert any(len(set(x.round(12))) > 1 for x in res)


def test_cosched_flag_checks(tmp_path, runs_dir):
    p = write_parquet(Trace(make_events(FANOUT), 3), tmp_path / "fan.trace")
    j = tmp_path / "j.txt"
    j.write_text("100 900\n")
    res = run_cli(["sim", "app", str(p), "--window", "1ms"])
    assert res.returncode == 2 and "--window is only for --align cosched" in res.stderr
    res = run_cli(["sim", "app", str(p), "--jitter", str(j), "--jitter-freq", "1e9", "--align", "cosched"])
    assert res.returncode == 2 and "needs the window length" in res.stderr
    res = run_cli(["sim", "app", str(p), "--jitter", str(j), "--jitter-freq", "1e9", "--align", "cosched",
                   "--window", "1us", "--window-origin", "5us"])
    assert res.returncode == 2 and "beyond the end of the jitter trace" in res.stderr
    res = run_cli(["sim", "app", str(p), "--eager", "0", "--jitter", str(j), "--jitter-freq", "1e9", "--align",
                   "cosched", "--window", "1us", "--replicas", "3", "--json"])
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    from hpcvar.sim import replay_native

    # jitter runs in the C core when it is built (a ReplayJitter), else in the reference
    assert out["runs"][0]["engine"] == ("native" if replay_native.available() else "python")
    assert out["runs"][0]["replicas"] == 3
    if replay_native.available():  # myrinet and jitter now run in the C core too
        res = run_cli(["sim", "app", str(p), "--model", "myrinet", "--engine", "native", "--json", "--no-plots"])
        assert res.returncode == 0, res.stderr
        assert json.loads(res.stdout)["runs"][0]["engine"] == "native"


def test_the_terminal_lists_the_tasks_that_matter_beyond_sixteen():
    """A trace of thousands of ranks printed a row per task for every mapping x model. Up to TASK_ROWS tasks the
    table lists them all; beyond, the TASK_ROWS with the largest communication time (with measured times: the
    largest E_abs), in task order, and a caption with the range over every task and where every task is."""
    from rich.console import Console

    from hpcvar.kinds.sim_app.views import TASK_ROWS, _tasks_table

    def one(n: int) -> dict:
        tasks = [{"task": i, "node": i // 4, "total_s": 2.0, "comm_s": 1.0 + (i % 7) / 10, "avg_penalty": 1.0,
                  "conflicts": {}, "measured_comm_s": 1.0, "e_abs_pct": float((i * 37) % 101)} for i in range(n)]
        return {"mapping": "rrp", "model": "maxmin", "replicas": 1, "tasks": tasks}

    def rows(table) -> list[int]:
        return [int(c) for c in table.columns[0]._cells]

    small = _tasks_table(one(TASK_ROWS), False, "RUN")
    assert rows(small) == list(range(TASK_ROWS)) and small.caption is None
    big = one(100)
    t = _tasks_table(big, False, "RUN")
    want = sorted(sorted(range(100), key=lambda i: -big["tasks"][i]["comm_s"])[:TASK_ROWS])
    # the longest communication times (the 14 tasks at 1.6 s, two at 1.5 s), in task order
    assert rows(t) == want and sum(i % 7 == 6 for i in want) == 14
    assert t.caption.startswith(f"the {TASK_ROWS} of 100 tasks with the largest communication time; comm over "
                                "all of them 1 to 1.6 s, median 1.3 s")
    assert "hpcvar runs show RUN --format csv" in t.caption
    timed = _tasks_table(big, True, "RUN")
    assert rows(timed) == sorted(sorted(range(100), key=lambda i: -big["tasks"][i]["e_abs_pct"])[:TASK_ROWS])
    mean = sum(r["e_abs_pct"] for r in big["tasks"]) / 100
    assert "largest E_abs" in timed.caption and f"mean E_abs {mean:.1f} %" in timed.caption
    c = Console(record=True, width=200)
    c.print(t)
    assert c.export_text().count("\n") < TASK_ROWS + 6
