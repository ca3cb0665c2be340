"""hpcvar.report.plots.save: what a report draws again and what it takes from the run, and vector files that
stay small (issue 30: figures without adding seconds)."""

from __future__ import annotations

import numpy as np

from hpcvar.report.plots import baselines, figure, redirect, save


def _line(ys) -> object:
    fig, ax = figure()
    ax.plot(range(len(ys)), ys, "o-")
    return fig


def test_a_report_takes_the_figure_its_run_stored_and_draws_the_rest_as_png_only(tmp_path):
    stem = tmp_path / "run" / "plots" / "latency"
    stem.parent.mkdir(parents=True)
    stored = save(_line([3, 4, 5]), stem)  # the run's own figure, when the run was made
    assert [p.suffix for p in stored] == [".png", ".svg"]
    before = stored[0].read_bytes()
    with redirect(tmp_path / "report"):  # a report, no baseline: the stored figure, nothing drawn
        assert save(_line([5, 4, 3]), stem) == [stem.with_suffix(".png")]
    assert stored[0].read_bytes() == before and not list((tmp_path / "report").iterdir())
    with redirect(tmp_path / "report"), baselines({str(tmp_path / "run"): object()}):  # overlaid: drawn again
        got = save(_line([5, 4, 3]), stem)
    assert got == [tmp_path / "report" / "run-latency.png"] and got[0].read_bytes() != before
    with redirect(tmp_path / "report2"):  # nothing stored (a run made with --no-plots): drawn, PNG only
        got = save(_line([1, 2]), tmp_path / "run2" / "plots" / "sweep")
    assert [p.name for p in (tmp_path / "report2").iterdir()] == ["run2-sweep.png"] == [p.name for p in got]


def test_dense_artists_are_images_inside_the_svg_and_the_rest_stays_vectors(tmp_path):
    rng = np.random.default_rng(1)
    fig, ax = figure()
    ax.plot(np.arange(20_000), rng.random(20_000), ".", ms=2)  # a noise recording's detours
    ax.plot([0, 20_000], [0.5, 0.5], "-", label="mean")
    ax.legend()
    png, svg = save(fig, tmp_path / "dense")
    text = svg.read_text()
    assert text.count("<image") == 1 and svg.stat().st_size < 400_000  # 20,000 paths were 2.4 MB
    assert 'id="legend_1"' in text and "<!-- mean -->" in text  # the legend and its label are still vectors
    fig, ax = figure()
    ax.plot(np.arange(100), rng.random(100), ".")
    assert "<image" not in save(fig, tmp_path / "sparse")[1].read_text()
