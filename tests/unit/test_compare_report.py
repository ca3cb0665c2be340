"""compare (statistics, refusals, exit code) and the report (HTML self-contained, Markdown)."""

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hpcvar.compare import cliffs_delta_from_u, compare_runs, holm
from hpcvar.errors import UsageError
from hpcvar.results import Run
from tests.conftest import run_cli

META = {"host": "node1", "cpu_model": "cpu", "cores": 2}


def fake_latency_run(scale: float, seed: int, meta=META) -> Run:
    rng = np.random.default_rng(seed)
    run = Run.create("bench latency", {"sizes": [8, 1024]}, metadata=dict(meta))
    frames, rows = [], []
    for size, base in ((8, 2000.0), (1024, 2500.0)):
        v = base * scale * (1 + rng.exponential(0.05, 800))
        frames.append(pd.DataFrame({"size_bytes": size, "iter": np.arange(v.size), "rtt_ns": 2 * v, "oneway_ns": v,
                                    "send_ns": np.nan}))  # as a run recorded before send times were kept
        rows.append({"size_bytes": size, "n": v.size, "median_ns": np.median(v), "mean_ns": v.mean(), "min_ns": v.min(),
                     "max_ns": v.max(), "p90_ns": np.percentile(v, 90), "p99_ns": np.percentile(v, 99),
                     "p99_9_ns": np.percentile(v, 99.9), "mad_ns": 0.0, "cv": 0.0,
                     "median_ci_lo_ns": np.median(v) * .99, "median_ci_hi_ns": np.median(v) * 1.01, "outliers": 0,
                     "bw_bytes_per_s": size / np.median(v) * 1e9, "send_median_ns": np.nan,
                     "buffered_bytes": np.nan})
    run.write_table("latency.samples", pd.concat(frames, ignore_index=True))
    run.write_table("latency.summary", pd.DataFrame(rows))
    run.finish("complete", {"sizes": []})
    return run


def test_holm_and_cliffs_delta():
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert cliffs_delta_from_u(100, 10, 10) == 1.0 and cliffs_delta_from_u(50, 10, 10) == 0.0


def test_same_machine_no_change_then_degradation(runs_dir):
    a, b = fake_latency_run(1.0, 1), fake_latency_run(1.0, 2)
    same = compare_runs(a, b)
    assert same["degraded"] == [] and all(r["verdict"] == "unchanged" for r in same["metrics"])
    worse = compare_runs(a, fake_latency_run(1.5, 3))
    assert len(worse["degraded"]) == 2
    better = compare_runs(fake_latency_run(1.5, 4), a)
    assert len(better["improved"]) == 2 and better["degraded"] == []


def test_different_machines_refused_unless_forced(runs_dir):
    a = fake_latency_run(1.0, 1)
    b = fake_latency_run(1.0, 2, meta={**META, "host": "node2"})
    with pytest.raises(UsageError) as e:
        compare_runs(a, b)
    assert "different machines" in e.value.what and "--force" in e.value.todo
    assert compare_runs(a, b, force=True)["forced_despite"]


def test_compare_cli_exit_codes(runs_dir):
    a, b, c = fake_latency_run(1.0, 1), fake_latency_run(1.0, 2), fake_latency_run(2.0, 3)
    res = run_cli(["compare", str(a.path), str(b.path), "--json"])
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["degraded"] == []
    res = run_cli(["compare", str(a.path), str(c.path)])
    assert res.returncode == 3 and "degraded" in res.stdout
    d = fake_latency_run(1.0, 4, meta={**META, "host": "other"})
    res = run_cli(["compare", str(a.path), str(d.path)])
    assert res.returncode == 2 and "different machines" in res.stderr


def test_html_report_is_self_contained(runs_dir, tmp_path):
    run = fake_latency_run(1.0, 1)
    out = tmp_path / "r.html"
    res = run_cli(["report", str(run.path), "-o", str(out)])
    assert res.returncode == 0, res.stderr
    html = out.read_text()
    assert "Point-to-point latency and bandwidth" in html
    imgs = re.findall(r'<img[^>]+src="([^"]+)"', html)
    assert len(imgs) == 3 and all(src.startswith("data:image/png;base64,") for src in imgs)  # latency, bandwidth, CCDF
    assert not re.search(r'(src|href)="(http|//)', html)  # nothing fetched from a network
    assert "latency, 8B (one-way median)" in html


def test_markdown_report_copies_the_stored_figures_and_the_drawn_ones(runs_dir, tmp_path):
    """A .md report links its figures in <stem>_files, relative to the report: the figure a run stored when it was
    made, copied as it is (not drawn again), and the ones it lacks, drawn for the report."""
    from hpcvar.report.document import write_report
    from hpcvar.report.plots import figure, save

    run = fake_latency_run(1.0, 1)
    fig, ax = figure()
    ax.plot([0, 1], [1, 0])
    stored = save(fig, run.plots_dir() / "latency_vs_size")[0]  # the run's own figure (the others are not stored)
    out = write_report([run], tmp_path / "r.md")
    md = out.read_text()
    links = re.findall(r"!\[[^]]*\]\(([^)]+)\)", md)
    assert len(links) == 3 and all(link.startswith("r_files/") for link in links), links
    files = {Path(link).name: tmp_path / link for link in links}
    assert all(f.is_file() and f.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for f in files.values()), files
    assert files[f"{run.path.name}-latency_vs_size.png"].read_bytes() == stored.read_bytes()
    assert {f"{run.path.name}-bandwidth_vs_size.png", f"{run.path.name}-latency_ccdf.png"} < set(files)
    assert not (run.plots_dir() / "latency_ccdf.png").exists()  # drawn for the report, not into the run


def test_markdown_report_and_bad_extension(runs_dir, tmp_path):
    run = fake_latency_run(1.0, 1)
    out = tmp_path / "r.md"
    assert run_cli(["report", str(run.path), "-o", str(out)]).returncode == 0
    md = out.read_text()
    assert md.startswith("<!-- generator: hpcvar report -->\n\n# hpcvar report") and "| size (B) |" in md
    res = run_cli(["report", str(run.path), "-o", str(tmp_path / "r.pdf")])
    assert res.returncode == 2 and "(-o)" in res.stderr
