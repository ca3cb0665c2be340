"""Issue 27, "One presentation of numbers", on stored runs of a short characterization (real MPI): piped tables
at 80/100 columns, ``runs show`` of a characterization, the report's tables and parameters, ``info``."""

from __future__ import annotations

import re

import pytest

from tests.conftest import run_cli
from tests.unit.test_presentation import REPR

pytestmark = pytest.mark.mpi


@pytest.fixture(scope="module")
def demo_like(tmp_path_factory):
    """A short characterization with steps of two kinds (latency, fan-in), as the demo stores them."""
    root = tmp_path_factory.mktemp("runs")
    env = {"HPCVAR_RUNS": str(root)}
    run_cli(["characterize", "--quick", "--steps", "latency,fanin", "--np", "2"], env=env)
    parents = sorted(root.glob("*-characterize"))
    assert parents, "the characterization stored no run"
    return parents[-1], env


@pytest.mark.parametrize("columns", ["80", "100"])
def test_piped_latency_table_at_narrow_columns_is_whole(demo_like, columns):
    """`hpcvar runs show RUN | cat` with COLUMNS=80/100: every column, no '…', one unit per column."""
    parent, env = demo_like
    latency = next((parent / "steps").glob("*-bench-latency"))
    out = run_cli(["runs", "show", str(latency)], env={**env, "COLUMNS": columns}, check=True).stdout
    assert "…" not in out
    head = next(ln for ln in out.splitlines() if ln.split()[:1] == ["size"])
    assert re.search(r"median \((ns|us|ms)\) +95% CI \((ns|us|ms)\)", head)
    units = re.findall(r"median \((\w+)\) +95% CI \((\w+)\)", head)[0]
    assert units[0] == units[1]


def test_runs_show_of_a_characterization_is_a_table_of_its_steps(demo_like):
    parent, env = demo_like
    out = run_cli(["runs", "show", str(parent)], env=env, check=True).stdout
    assert "'steps':" not in out and "{'" not in out  # no dict
    head = next(ln for ln in out.splitlines() if ln.split()[:2] == ["step", "status"])
    assert "headlines" in head
    row = next(ln for ln in out.splitlines() if ln.split()[:1] == ["latency"])
    assert "one-way median" in row  # the step's headline
    assert "peak aggregate bandwidth" in next(ln for ln in out.splitlines() if ln.split()[:1] == ["fanin"])
    assert not REPR.search(out.split("Steps")[0].split("Parameters")[1])


def test_report_and_info_print_no_python_reprs(demo_like, tmp_path):
    parent, env = demo_like
    md, html = tmp_path / "r.md", tmp_path / "r.html"
    run_cli(["report", str(parent), "-o", str(md)], env=env, check=True)
    run_cli(["report", str(parent), "-o", str(html)], env=env, check=True)
    text = md.read_text()
    tables = "\n".join(ln for ln in text.splitlines() if ln.startswith("|") or ln.startswith("parameters:"))
    assert tables and not REPR.search(tables), REPR.findall(tables)
    assert not re.search(r"\|\s*[0-9]{9,}\s*\|", tables)  # no raw 11970000000
    assert not re.search(r"_ns\b|_bytes\b|_pct\b|_per_s\b", tables) and "median (" in tables
    page = html.read_text()
    params = re.findall(r'<th class="k">[^<]*</th><td class="k">([^<]*)</td>', page)
    assert params and not any(REPR.search(p) for p in params)
    info = run_cli(["info"], check=True).stdout
    assert not re.search(r"\bNone\b|\bTrue\b|\bFalse\b", info)
