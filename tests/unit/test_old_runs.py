"""Runs stored by hpcvar 55a5545 (the layout before src/hpcvar/kinds/) still load, show, report and compare.

tests/data/runs_55a5545.tar.xz holds one small run of every kind of that version (tests/data/runs_55a5545.sh
made them); tests/integration/test_old_runs.py resumes its interrupted latency sweep."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest
from rich.console import Console

from hpcvar.compare import metrics_of
from hpcvar.report.sections import section_for
from hpcvar.report.terminal import render_run
from hpcvar.results.store import Run, list_runs
from tests.conftest import run_cli

ARCHIVE = Path(__file__).resolve().parents[1] / "data" / "runs_55a5545.tar.xz"

# the kinds of runs 55a5545 stored, and a phrase of each one's terminal view
KINDS_55 = {
    "bench latency": "one-way latency", "bench queues posted": "posted", "bench queues unexpected": "unexpected",
    "bench ace": "ea0", "bench sharing": "penalty", "bench fanin": "fan-in", "bench bsp": "phases",
    "noise record": "OS jitter per CPU", "sim jitter": "jitSim", "sim app": "comparison",
}
NO_METRICS = {"sim jitter", "sim app"}  # kinds that had (and have) nothing for 'hpcvar compare'


def old_runs(tmp: Path) -> Path:
    """The runs unpacked under ``tmp``: returns the runs directory."""
    with tarfile.open(ARCHIVE) as tar:
        # the "data" filter (PEP 706) where this Python has it: Debian 12's 3.11.2 does not (the archive is ours)
        if hasattr(tarfile, "data_filter"):
            tar.extractall(tmp, filter="data")
        else:
            tar.extractall(tmp)
    return tmp / "runs"


@pytest.fixture(scope="module")
def runs_55(tmp_path_factory) -> Path:
    return old_runs(tmp_path_factory.mktemp("old"))


def _by_command(root: Path) -> dict[str, list[Run]]:
    out: dict[str, list[Run]] = {}
    for r in list_runs(root):
        out.setdefault(r.info["command"], []).append(r)
    return out


def test_the_archive_holds_a_run_of_every_kind_of_55a5545(runs_55):
    assert ARCHIVE.stat().st_size < 200_000
    runs = _by_command(runs_55)
    assert set(runs) == set(KINDS_55)
    assert [r.status for r in runs["bench latency"]] == ["complete", "failed"]  # the second one resumes


@pytest.mark.parametrize("command", sorted(KINDS_55))
def test_an_old_run_renders_reports_and_gives_metrics(runs_55, command):
    for run in _by_command(runs_55)[command]:
        con = Console(record=True, width=200)
        render_run(con, run)
        text = con.export_text()
        assert f"stored in {run.path}" in text
        if run.status != "complete":
            assert "no result: the run is failed" in text
            continue
        assert KINDS_55[command].lower() in text.lower(), text  # where it is now, not where it was made
        for w in run.info["warnings"]:
            assert w in text  # the run's warnings, once
            assert text.count(w) == 1
        sec = section_for(run)
        assert sec is not None and (sec.headlines or sec.tables), command
        metrics = metrics_of(run)
        assert bool(metrics) == (command not in NO_METRICS), command
        assert all(m.samples.size for m in metrics.values())


def test_the_command_line_shows_and_reports_old_runs(runs_55, tmp_path):
    listed = run_cli(["runs", "list", "--runs-dir", str(runs_55), "--json"], check=True).stdout
    assert listed.count('"status": "complete"') == len(list_runs(runs_55)) - 1
    for run in list_runs(runs_55):
        shown = run_cli(["runs", "show", str(run.path)], check=True).stdout
        assert f"path: {run.path}" in shown
        if run.info["result"] is not None:
            assert shown.rstrip().endswith(f"stored in {run.path}")
        csv = run_cli(["runs", "show", str(run.path), "--format", "csv"], check=True).stdout
        assert csv.strip(), run.id
    out = tmp_path / "old.html"
    run_cli(["report", *[str(r.path) for r in list_runs(runs_55)], "-o", str(out)], check=True)
    html = out.read_text()
    for title in ("Point-to-point latency", "jitSim", "Application replay", "OS jitter"):
        assert title in html, title


def test_two_old_runs_compare(runs_55):
    lat = next(r for r in _by_command(runs_55)["bench latency"] if r.status == "complete")
    res = run_cli(["compare", str(lat.path), str(lat.path), "--json"], check=True).stdout
    assert '"verdict": "unchanged"' in res
