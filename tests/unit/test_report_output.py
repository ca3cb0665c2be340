"""'hpcvar report' says where it wrote, refuses to overwrite a file that is not an hpcvar report (--force to
override), and names a characterization's missing step (issue #27)."""

from __future__ import annotations

import shutil

from hpcvar.report import verdict
from hpcvar.report.document import is_report, write_report
from tests.conftest import run_cli
from tests.unit.test_compare_report import fake_latency_run
from tests.unit.test_report_verdict import _characterization


def test_without_o_it_says_where_it_wrote_and_keeps_a_foreign_file(runs_dir, tmp_path):
    run = fake_latency_run(1.0, 1)
    res = run_cli(["report", str(run.path)], cwd=tmp_path, check=True)
    out = tmp_path / "report.html"
    assert f"report written to {out.resolve()}" in res.stdout
    assert is_report(out)
    # a report of hpcvar is replaced without a word
    run_cli(["report", str(run.path)], cwd=tmp_path, check=True)
    # a file of someone else's is not
    out.write_text("<html>my own notes</html>")
    res = run_cli(["report", str(run.path)], cwd=tmp_path)
    assert res.returncode != 0 and "is a file that is not an hpcvar report" in res.stderr
    assert "--force" in res.stderr and "Traceback" not in res.stderr
    assert out.read_text() == "<html>my own notes</html>"
    run_cli(["report", str(run.path), "--force"], cwd=tmp_path, check=True)
    assert is_report(out)


def test_markdown_reports_are_marked_too(runs_dir, tmp_path):
    run = fake_latency_run(1.0, 1)
    md = write_report([run], tmp_path / "r.md")
    assert is_report(md)
    (tmp_path / "notes.md").write_text("# my notes\n")
    assert not is_report(tmp_path / "notes.md") and not is_report(tmp_path / "none.md")


def test_characterize_o_refuses_a_foreign_file(runs_dir, tmp_path):
    (tmp_path / "notes.html").write_text("mine")
    res = run_cli(["characterize", "--steps", "latency", "-o", str(tmp_path / "notes.html")])
    assert res.returncode != 0 and "not an hpcvar report" in res.stderr and "--force" not in res.stderr


def test_a_missing_step_is_named(runs_dir, tmp_path):
    parent = _characterization(runs_dir)
    lost = parent.info["steps"]["latency"]["run"]
    shutil.rmtree(parent.path / "steps" / lost)
    lines = {s.name: s for s in verdict.step_lines(parent)}
    assert lines["latency"].status == "missing" and f"steps/{lost} is gone" in lines["latency"].detail
    vs: list = []
    html = write_report(parent.children(), tmp_path / "r.html", tops=[parent], verdict_out=vs).read_text()
    assert "missing" in html and f"steps/{lost} is gone" in html
    assert any("step latency missing" in r for r in vs[0].answer.reasons)
