"""Issue 16: output habits, --format, run ids, file modes, errors without traceback, units, one flag vocabulary."""

from __future__ import annotations

import errno
import importlib
import io
import json
import os
import re
from pathlib import Path

import click
import pandas as pd
import pytest
from rich.console import Console
from rich.table import Table

from hpcvar.results.store import Run
from tests.conftest import run_cli

JITTER = ["sim", "jitter", "--synthetic", "250Hz:2us", "--tasks", "1,2", "--phases", "5", "--duration", "2s",
          "--no-plots"]
BOX = re.compile("[\u2500-\u257f]")


def _jitter_run(env=None) -> Path:
    out = run_cli(JITTER, env=env, check=True).stdout
    return Path(out.strip().splitlines()[-1].removeprefix("stored in "))


# ---- 1. a pipe gets whole tables ------------------------------------------------------------------------------
def test_piped_tables_are_whole_and_plain(runs_dir):
    long_dir = runs_dir / ("x" * 150)
    env = {"HPCVAR_RUNS": str(long_dir), "COLUMNS": "80"}
    _jitter_run(env)
    out = run_cli(["runs", "list"], env=env, check=True).stdout
    assert "…" not in out and not BOX.search(out)
    assert str(long_dir) in out  # the title is not wrapped at 80 columns
    row = [ln for ln in out.splitlines() if "sim jitter" in ln][0]
    assert len(row.split()) >= 5  # one line per run: id, command (2 words), status, start, host


def test_console_factory_is_the_one_place():
    from hpcvar.report.terminal import PipeConsole, make_console

    assert isinstance(make_console(), PipeConsole)  # pytest's stdout is no terminal
    t = Table("name", "value")
    t.add_row("a" * 300, "1 ns")
    con = make_console()
    con.file = io.StringIO()
    con.print(t)
    text = con.file.getvalue()
    assert "a" * 300 in text and "…" not in text and not BOX.search(text)
    src = Path(importlib.import_module("hpcvar").__file__).parent
    makers = [p for p in src.rglob("*.py") if re.search(r"\bConsole\(", p.read_text())
              and p.name != "terminal.py"]
    assert makers == [], "consoles come from hpcvar.report.terminal.make_console"


def test_piped_tables_have_one_unit_per_column():
    """Typed cells (value + unit) give a pipe bare numbers in one unit per column (the smallest unit the
    column's values are written in for people), named in the header; text is left as it is."""
    from hpcvar.report.terminal import make_console, nbytes, ns, ns_interval, rate

    def table() -> Table:
        t = Table("size", "n", "median", "95% CI", "bandwidth", "note")
        t.add_row(nbytes(1), "10", ns(512), ns_interval(500, 520), rate(None), "[red]x[/]")
        t.add_row(nbytes(1 << 20), "10", ns(2.5e6), ns_interval(2.4e6, 2.6e6), rate(1.2e9), "y 2 ms")
        t.add_row(nbytes(3 << 10), "10", ns(float("nan")), "-", rate(5e8), "z")
        return t

    con = make_console()
    con.file = io.StringIO()
    con.print(table())
    lines = [ln.split() for ln in con.file.getvalue().splitlines()]
    assert lines[0] == ["size", "(B)", "n", "median", "(ns)", "95%", "CI", "(ns)", "bandwidth", "(MB/s)", "note"]
    assert lines[1] == ["1", "10", "512", "500-520", "-", "x"]
    assert lines[2] == ["1048576", "10", "2500000", "2400000-2600000", "1200", "y", "2", "ms"]
    assert lines[3] == ["3072", "10", "-", "-", "500", "z"]
    # the same cells on a terminal: as people read them
    con = Console(file=io.StringIO(), width=200, color_system=None)
    con.print(table())
    text = con.file.getvalue()
    assert "2.5 ms" in text and "2.4-2.6 ms" in text and "1MiB" in text and "1.2 GB/s" in text


# ---- 2. --format everywhere, csv and md round-trip the numbers --------------------------------------------------
SHOWING = [["bench", "latency"], ["bench", "queues", "posted"], ["bench", "queues", "unexpected"], ["bench", "ace"],
           ["bench", "sharing"], ["bench", "fanin"], ["bench", "bsp"], ["runs", "list"], ["runs", "show"],
           ["noise", "record"], ["noise", "report"], ["sim", "jitter"], ["sim", "app"], ["compare"],
           ["model", "penalties"], ["model", "fit"], ["model", "evaluate"], ["trace", "show"], ["trace", "import"],
           ["characterize"], ["report"]]


def _command(path: list[str]) -> click.Command:
    from hpcvar.cli import cli

    cmd: click.Command = cli
    ctx = click.Context(cli)
    for name in path:
        assert isinstance(cmd, click.Group)
        cmd = cmd.get_command(ctx, name)
    return cmd


@pytest.mark.parametrize("path", SHOWING, ids=" ".join)
def test_every_command_that_shows_results_has_format(path):
    opts = {o for p in _command(path).params for o in getattr(p, "opts", [])}
    assert {"--format", "--json"} <= opts


def _md_table(text: str) -> pd.DataFrame:
    rows = [ln for ln in text.splitlines() if ln.startswith("|")]
    cols = [c.strip() for c in rows[0].strip("|").split("|")]
    data = [[c.strip() for c in r.strip("|").split("|")] for r in rows[2:]]
    return pd.DataFrame(data, columns=cols)


def test_csv_and_md_round_trip_the_numbers(runs_dir):
    run = _jitter_run()
    stored = Run.open(run).read_table("jitter.points")
    for args in (JITTER + ["--format", "csv"], ["runs", "show", str(run), "--format", "csv"]):
        got = pd.read_csv(io.StringIO(run_cli(args, check=True).stdout))
        assert "total_cycles" in got.columns  # units in the column names
        if args[0] == "runs":
            for c in stored.columns:
                if pd.api.types.is_numeric_dtype(stored[c]):
                    assert got[c].tolist() == pytest.approx(stored[c].tolist(), rel=0, abs=0, nan_ok=True), c
    md = _md_table(run_cli(["runs", "show", str(run), "--format", "md"], check=True).stdout)
    for c in stored.columns:
        if pd.api.types.is_float_dtype(stored[c]):
            back = [float(v) if v else float("nan") for v in md[c]]
            assert back == pytest.approx(stored[c].tolist(), rel=0, abs=0, nan_ok=True), c


def test_format_on_results_that_are_no_run(runs_dir):
    out = run_cli(["characterize", "--list", "--format", "csv"], check=True).stdout
    assert pd.read_csv(io.StringIO(out)).columns.tolist()[:2] == ["name", "title"]
    assert json.loads(run_cli(["characterize", "--list", "--json"], check=True).stdout)["steps"]
    out = run_cli(["model", "penalties", "a: 0->1; b: 0->2", "--model", "gige", "--format", "md"], check=True).stdout
    assert out.startswith("### ") and "|" in out


# ---- 3. every printed id resolves -----------------------------------------------------------------------------
def test_every_id_of_runs_list_all_resolves(runs_dir):
    parent = Run.create("characterize", {}, runs_dir, ["hpcvar"])
    child = Run.create("sim jitter", {}, parent.steps_dir(), ["hpcvar"])
    child.finish("complete", {"points": []})
    parent.finish("complete", {})
    other = _jitter_run()
    ids = [r["id"] for r in json.loads(run_cli(["runs", "list", "--all", "--json"], check=True).stdout)["runs"]]
    assert f"{parent.id}/steps/{child.id}" in ids and other.name in ids and parent.id in ids
    for i in ids:
        shown = json.loads(run_cli(["runs", "show", i, "--json"], check=True).stdout)
        assert shown["started_utc"]
    assert json.loads(run_cli(["runs", "show", child.id, "--json"], check=True).stdout)["command"] == "sim jitter"
    # the table shows them whole, even on a narrow terminal width
    out = run_cli(["runs", "list", "--all"], env={"COLUMNS": "40"}, check=True).stdout
    for i in ids:
        assert i in out
    assert len(json.loads(run_cli(["runs", "list", "--json"], check=True).stdout)["runs"]) == 2


# ---- 4. files get the user's umask -----------------------------------------------------------------------------
@pytest.mark.parametrize("mask,mode", [(0o022, 0o644), (0o027, 0o640)])
def test_files_are_created_with_the_umask(tmp_path, mask, mode):
    from hpcvar.report.document import write_report

    old = os.umask(mask)
    try:
        run = Run.create("sim jitter", {}, tmp_path, ["hpcvar"])
        t = run.write_table("jitter.phases", pd.DataFrame(
            {c: [0] for c in __import__("hpcvar.results.schema", fromlist=["TABLES"]).TABLES["jitter.phases"]}))
        run.finish("complete", {"points": []})
        rep = write_report([Run.open(run.path)], tmp_path / "r.md", "t")
    finally:
        os.umask(old)
    for p in (run.path / "run.json", t, Path(rep)):
        assert p.stat().st_mode & 0o777 == mode, p


# ---- 5. errors are one line, never a traceback -------------------------------------------------------------------
def _one_line_error(res, *needles):
    assert res.returncode in (1, 2), res
    assert "Traceback" not in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert res.stderr.startswith("error: ")
    for n in needles:
        assert n in res.stderr, res.stderr


def test_out_into_a_missing_directory_is_an_error(runs_dir, tmp_path):
    run = _jitter_run()
    _one_line_error(run_cli(["report", str(run), "-o", str(tmp_path / "nodir" / "r.html")]),
                    "does not exist", "(--out)", "mkdir -p")
    assert not (tmp_path / "nodir").exists()
    _one_line_error(run_cli(["report", str(run), "-o", str(tmp_path)]), "is a directory")
    _one_line_error(run_cli([*JITTER, "--tasks", "2", "--per-task", str(tmp_path / "nodir" / "t.csv")]),
                    "does not exist", "(--per-task)")
    assert not (tmp_path / "nodir").exists()


def test_full_disk_on_out_is_one_line(runs_dir, tmp_path, monkeypatch, capsys):
    from hpcvar.cli import main
    from hpcvar.results import store

    run = _jitter_run()

    def full(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(store.tempfile, "mkstemp", full)
    with pytest.raises(SystemExit) as e:
        main(["report", str(run), "-o", str(tmp_path / "r.html")])
    err = capsys.readouterr().err
    assert e.value.code == 1 and len(err.strip().splitlines()) == 1, err
    assert err.startswith("error: cannot write") and "(-o)" in err and "free space" in err


def test_missing_and_non_utf8_inputs_are_named(runs_dir, tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"\xff\xfe\x00bad")
    _one_line_error(run_cli(["sim", "app", str(tmp_path / "missing.trace")]), "no such", "missing.trace")
    _one_line_error(run_cli(["bench", "ace", "--predict-only", "--config", str(tmp_path / "m.toml")]),
                    "no such config file")
    _one_line_error(run_cli(["model", "penalties", str(bad), "--model", "gige"]), "not UTF-8")
    _one_line_error(run_cli(["sim", "app", str(bad)]), "not UTF-8")
    _one_line_error(run_cli(["bench", "ace", "--predict-only", "--config", str(bad)]), "not UTF-8")


def _entry_child(tmp_path, body: str, argv: list[str]):
    """A process that runs ``body`` and then the hpcvar program (``entry``) with ``argv``."""
    import subprocess
    import sys

    code = (f"import atexit, sys, threading, time\nfrom pathlib import Path\nD = Path({str(tmp_path)!r})\n{body}\n"
            f"sys.argv = ['hpcvar', *{argv!r}]\nfrom hpcvar import cli\ncli.entry()\n"
            "Path(D / 'after-entry').write_text('entry returned')\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}  # output buffered, as by default
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)


def test_entry_leaves_after_what_a_normal_exit_does(tmp_path):
    """The program skips the interpreter's teardown (issue 30) but not what a program relies on at exit: a
    thread still working is waited for, atexit functions run, buffered output reaches a pipe, the status is kept."""
    body = ("def late():\n    time.sleep(0.5)\n    (D / 'thread').write_text('done')\n"
            "    sys.stdout.write('late output')\n"  # after the command's last echo (which flushes): still buffered
            "threading.Thread(target=late).start()\n"
            "atexit.register(lambda: (D / 'atexit').write_text(str((D / 'thread').exists())))")
    res = _entry_child(tmp_path, body, ["--version"])
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("hpcvar, version ") and res.stdout.endswith("\nlate output")
    assert (tmp_path / "thread").read_text() == "done"
    assert (tmp_path / "atexit").read_text() == "True"  # the thread was joined before the exit functions ran
    assert not (tmp_path / "after-entry").exists()  # entry does not return
    assert res.stderr == ""


def test_entry_keeps_exit_statuses(tmp_path):
    usage = _entry_child(tmp_path, "", ["sim", "app", "--no-such-flag"])
    assert usage.returncode == 2 and usage.stderr.startswith("error: no such option (--no-such-flag)")
    msg = _entry_child(tmp_path, "import hpcvar.cli\nhpcvar.cli.main = lambda: sys.exit('stopped: a message')", [])
    assert msg.returncode == 1 and msg.stderr == "stopped: a message\n"
    bug = _entry_child(tmp_path, "import hpcvar.cli\nhpcvar.cli.main = lambda: 1 / 0", [])
    assert bug.returncode == 1 and "ZeroDivisionError" in bug.stderr  # a bug leaves the normal way, traceback


def test_sim_commands_run_numpy_with_one_blas_thread(tmp_path, monkeypatch):
    """numpy's BLAS threads spin at import and take a core from a simulation; only 'sim' commands (which start no
    program) set it, and a value the user gave is kept."""
    show = "import hpcvar.cli, os\nhpcvar.cli.main = lambda: print(os.environ.get('OPENBLAS_NUM_THREADS'))"
    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    assert _entry_child(tmp_path, show, ["sim", "app", "x"]).stdout == "1\n"
    assert _entry_child(tmp_path, show, ["bench", "latency"]).stdout == "None\n"
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "2")
    assert _entry_child(tmp_path, show, ["sim", "jitter"]).stdout == "2\n"


def test_boundary_names_os_errors(capsys):
    from hpcvar.cli import _os_error

    msg = _os_error(FileNotFoundError(errno.ENOENT, "No such file or directory", "x.csv"))
    assert msg == "error: no such file or directory 'x.csv' (x.csv). Check the path"


def test_corrupt_run_is_listed_with_a_warning(runs_dir):
    _jitter_run()
    broken = runs_dir / "20260101T000000Z-broken"
    broken.mkdir()
    (broken / "run.json").write_text("{not json")
    res = run_cli(["runs", "list"], check=True)
    assert "20260101T000000Z-broken" in res.stdout and "unreadable" in res.stdout
    assert res.stderr.startswith("warning: 20260101T000000Z-broken cannot be read")


# ---- 6. a unit where it would be ambiguous ---------------------------------------------------------------------
@pytest.mark.parametrize("args,bad,remedy", [
    (["model", "penalties", "a: 0->1", "--model", "gige", "--t-ref", "84"], "'84' has no unit", "84us"),
    (["bench", "ace", "--predict-only", "--ea", "pattern=pairs,alpha=75.9,beta=1ns/B"], "'75.9' has no unit",
     "75.9us"),
    (["bench", "ace", "--predict-only", "--ea", "pattern=pairs,alpha=1us,beta=0.01"], "'0.01' has no unit",
     "0.01us/B"),
    (["sim", "app", "x.trace", "--bandwidth", "1e9"], "'1e9' has no unit", "1e9B/s"),
    (["noise", "synth", "x.jtr", "--periodic", "250Hz:5"], "'5' has no unit", "5us"),
    (["sim", "jitter", "--synthetic", "250Hz:2us", "--duration", "10"], "'10' has no unit", "10s"),
    (["noise", "record", "--duration", "10"], "'10' has no unit", "10s"),
])
def test_bare_numbers_are_refused_with_the_remedy(runs_dir, args, bad, remedy):
    _one_line_error(run_cli(args), bad, remedy)


def test_bare_zero_and_counts_are_taken():
    from hpcvar.units import parse_rate, parse_size, parse_time

    assert parse_time("0", "--latency") == 0.0 and parse_rate("0", "--rate") == 0.0
    assert parse_size("1024", "--size") == 1024


# ---- 7. one vocabulary of flags ---------------------------------------------------------------------------------
ALIASES = [  # command, new flag, old flag, other arguments, value
    (["report"], "--out", "--output", ["RUN"], "r.html"),
    (["characterize"], "--out", "--output", [], "r.html"),
    (["trace", "import"], "--out", "--output", ["."], "x.trace"),
    (["trace", "run"], "--out", "--output", ["true"], "x.trace"),
    (["bench", "sharing"], "--repeat", "--reps", ["a: 0->1"], "3"),
    (["noise", "synth"], "--duration", "--length", ["x.jtr"], "2s"),
    (["noise", "inject"], "--duration", "--time", ["--cpus", "0"], "2s"),
    (["sim", "jitter"], "--duration", "--trace-length", [], "2s"),
    (["noise", "synth"], "--ncpus", "--cpus", ["x.jtr"], "3"),
    (["noise", "report"], "--plots-dir", "--plots", ["x.jtr"], "figs"),
    (["model", "evaluate"], "--no-plots", "--no-plot", ["RUN"], None),
]


@pytest.mark.parametrize("path,new,old,rest,value", ALIASES, ids=lambda v: v if isinstance(v, str) else None)
def test_old_flag_names_are_hidden_aliases(tmp_path, monkeypatch, path, new, old, rest, value):
    monkeypatch.chdir(tmp_path)
    cmd = _command(path)
    flag_args = [value] if value is not None else []
    a = cmd.make_context(path[-1], [*rest, new, *flag_args]).params
    b = cmd.make_context(path[-1], [*rest, old, *flag_args]).params
    assert a == b
    help_text = cmd.get_help(click.Context(cmd, info_name=path[-1]))
    assert new in help_text and not re.search(rf"(?<![\w-]){re.escape(old)}(?![\w-])", help_text)


# ---- 8, 9. papers by authors and title; the vocabulary documented ------------------------------------------------
TITLES = ["Network Performance Variability in NOW Clusters", "The Impact of MPI Queue Usage on Message Latency",
          "Predictive models for bandwidth sharing in high performance clusters",
          "jitSim: A Simulator for Predicting Scalability of Parallel Applications in Presence of OS Jitter",
          "Fan-In Communications On A Cray Gemini Interconnect"]
REPO = Path(__file__).resolve().parents[2]


def _all_help() -> str:
    from hpcvar.cli import cli

    def walk(cmd, name):
        ctx = click.Context(cmd, info_name=name)
        yield cmd.get_help(ctx)
        if isinstance(cmd, click.Group):
            for n in cmd.list_commands(ctx):
                yield from walk(cmd.get_command(ctx, n), n)

    return " ".join(" ".join(walk(cli, "hpcvar")).split())


def test_help_names_papers_by_authors_and_title():
    text = _all_help()
    assert not re.search(r"\bthe paper\b|paper's", text, re.I)
    for title in TITLES[:3] + TITLES[4:]:
        assert title in text, title
    assert "jitSim: A Simulator for Predicting Scalability" in text


def test_docs_cite_papers_by_title_never_a_path_outside_the_repository():
    docs = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    for d in docs:
        text = " ".join(d.read_text().split())
        assert not re.search(r"seeds/|/work/|shared/seeds|\b00[0-4]_[0-9a-f]{16}\.txt", text), d
        if re.search(r"\bthe paper\b|paper's", text, re.I):
            assert any(t.replace("*", "") in text.replace("*", "") for t in TITLES), d
    readme = (REPO / "README.md").read_text()
    assert "docs/cli.md" in readme and "--format" in readme
    cli_md = (REPO / "docs" / "cli.md").read_text()
    for flag in ("-o, --out", "--repeat", "--duration", "--cpus LIST", "--ncpus", "--plots/--no-plots",
                 "--plots-dir", "--format table"):
        assert flag in cli_md, flag
