"""Issue 27, "One presentation of numbers": one unit per column on a terminal and in a pipe, tables never cut on
a narrow terminal, human headers and values in the report, ``runs show`` and ``info``."""

from __future__ import annotations

import io
import re

import pandas as pd
import pytest
from rich.table import Table

REPR = re.compile(r"\bNone\b|\bTrue\b|\bFalse\b|[0-9]e[+-][0-9]|\{'|'\}|\bnan\b")


def _latency_like() -> Table:
    from hpcvar.report.terminal import nbytes, ns, ns_interval, rate

    t = Table("size", "n", "median", "95% CI", "p99", "p99.9", "max", "bandwidth", "note")
    for k in range(12):
        size = 1 << (2 * k)
        t.add_row(nbytes(size), "1000", ns(900 + size / 10), ns_interval(880 + size / 10, 950 + size / 10),
                  ns(2000 + size / 5), ns(3000 + size / 4), ns(1e6), rate(size / (900e-9 + size / 1e10)),
                  "a note that is long enough to wrap")
    return t


def _terminal(width: int):
    from hpcvar.report.terminal import TermConsole

    return TermConsole(file=io.StringIO(), width=width, color_system=None, force_terminal=True)


def test_terminal_column_has_one_unit_and_a_median_shares_it_with_its_interval():
    """Per cell, 900 ns and 420 us were two units in one column, and the CI 880-950 ns beside a median '900 ns'
    could be in another unit: now one unit per column, chosen from its values, named in the header."""
    con = _terminal(200)
    con.print(_latency_like())
    text = con.file.getvalue()
    assert "median (us)" in text and "95% CI (us)" in text and "max (ms)" in text and "bandwidth (MB/s)" in text
    row = [c.strip() for c in text.splitlines()[3].split("│")[1:-1]]
    assert row[:4] == ["1", "1000", "0.9", "0.88-0.95"]
    assert not re.search(r"\d (ns|us|ms|GB/s)\b", text)  # no unit in a cell


def test_interval_shares_the_unit_its_median_is_written_in():
    from hpcvar.report.terminal import ns, ns_interval

    t = Table("median", "95% CI")
    t.add_row(ns(990), ns_interval(950, 1020))  # per cell: '990 ns' and '0.95-1.02 us'
    con = _terminal(100)
    con.print(t)
    text = con.file.getvalue()
    assert "median (ns)" in text and "95% CI (ns)" in text and "950-1020" in text


@pytest.mark.parametrize("width", [80, 100])
def test_terminal_never_cuts_a_number(width):
    """At 100 columns rich cut 1000 into '10…': numbers stay whole, columns that do not fit are dropped and
    named in a note."""
    con = _terminal(width)
    con.print(_latency_like())
    text = con.file.getvalue()
    assert "…" not in text
    assert all(len(line) <= width for line in text.splitlines())
    assert "4194304" in text and "0.882-0.952" in text and "1000" in text
    flat = " ".join(text.split())
    dropped = re.search(r"\((\d+) column\(s\) not shown at (\d+) columns: ([^;]+);", flat)
    names = dropped.group(3).split(", ") if dropped else []
    if width == 80:
        assert dropped and dropped.group(2) == "80" and names
    for header in ("size", "median", "95% CI", "p99.9", "max", "bandwidth", "note"):
        shown = header.split()[0] in " ".join(ln for ln in text.splitlines() if ln.startswith("┃"))
        assert shown != any(n.startswith(header) for n in names), header  # shown, or named as not shown


def test_wide_enough_terminal_drops_nothing():
    con = _terminal(200)
    con.print(_latency_like())
    assert "not shown" not in con.file.getvalue()


def test_a_variance_is_in_a_squared_unit():
    from hpcvar.report.humanize import frame

    df = pd.DataFrame({"comm_variance_ns": [4e6, 9e6], "comm_stdev_ns": [2e3, 3e3],
                       "comm_within_var_ns2": [1e6, 2e6]})
    got = frame(df)
    assert list(got.columns) == ["comm variance (us²)", "comm stdev (us)", "comm within var (us²)"]
    assert got.iloc[:, 0].tolist() == ["4", "9"]


def test_report_tables_have_human_headers_and_scaled_values():
    from hpcvar.report.humanize import frame

    df = pd.DataFrame({"size_bytes": [8, 4 << 20], "median_ns": [1820.4, 2.5e6], "median_ci_lo_ns": [1800.0, 2.4e6],
                       "bw_bytes_per_s": [4.4e6, 1.197e10], "slowdown_pct": [0.5, 1234.5678], "ok": [True, None],
                       "t_run_s": [2.0, 3.0]})
    got = frame(df)
    assert list(got.columns) == ["size (B)", "median (us)", "median CI low (us)", "bandwidth (MB/s)",
                                 "slowdown (%)", "ok", "T run (s)"]
    assert got["bandwidth (MB/s)"].tolist() == ["4.4", "11970"]
    assert got["median (us)"].tolist() == ["1.82", "2500"]
    assert got["ok"].tolist() == ["yes", ""]
    assert list(frame(pd.DataFrame({"gige E_rel %": [1.0]})).columns) == ["gige E_rel %"]  # already for people
    assert not REPR.search(got.to_string())


def test_parameters_read_as_people_write_them():
    from hpcvar.report.humanize import value

    assert value("quantum_ns", 1e6) == ("quantum", "1 ms")
    assert value("quick", True) == ("quick", "yes")
    assert value("freq", None) == ("freq", "not set")
    assert value("duration_s", 3600.0) == ("duration", "3600 s")
    assert value("max_rate_per_s", 2e5) == ("max rate", "200000 /s")
    assert value("work", {"cycles": None, "seconds": 6.009e-7, "source": "/r/20261125T1-bench-latency"}) == \
        ("work", "601 ns (from 20261125T1-bench-latency)")
    assert value("tsc_hz", 2596151868.7) == ("TSC", "2.596 GHz")
    assert value("synthetics", []) == ("synthetics", "none")


def test_jitter_table_is_in_seconds_and_percent():
    from hpcvar.kinds.sim_jitter.views import points_for_people
    from hpcvar.report.humanize import frame

    pts = pd.DataFrame({"config": ["trace sync"], "tasks": [4], "total_cycles": [5.2e9], "total_ci_lo_cycles": [5e9],
                        "slowdown": [0.0235], "slowdown_ci_lo": [0.01], "sim_s": [0.3]})
    got = frame(points_for_people(pts, 2.6e9))
    assert list(got.columns) == ["config", "tasks", "total (s)", "total CI low (s)", "slowdown (%)",
                                 "slowdown CI low (%)", "sim (ms)"]
    assert got.iloc[0].tolist() == ["trace sync", "4", "2", "1.923", "2.35", "1", "300"]
    assert list(frame(points_for_people(pts, None)).columns)[2] == "total (cycles)"  # no frequency: cycles


def test_jitter_terminal_table_is_in_seconds_without_exponents(tmp_path):
    """A testbed characterization's jitSim rows read 'T (cycles) 2.62e+07': the terminal shows seconds, as the
    report does, and never an exponent."""
    import io

    from rich.console import Console

    from hpcvar.kinds.sim_jitter.views import render

    class R:
        info = {"result": {"phases_n": 10, "work_cycles": 2596153, "barrier": "tree", "baseline_cycles": 44850114,
                           "freq_hz": 2.6e9,
                           "points": [{"config": "x unsync", "tasks": 1 << 20, "total_cycles": 5.06e8,
                                       "slowdown": 10.28, "slowdown_ci": [10.0, 10.67], "replicas": 3,
                                       "coverage": 0.039, "task_phases_per_s": 2.56e7}]}}

    out = io.StringIO()
    render(Console(file=out, width=200), R())
    text = out.getvalue()
    assert "T (s)" in text and "0.1946" in text and "e+" not in text, text
    R.info["result"]["freq_hz"] = None
    out = io.StringIO()
    render(Console(file=out, width=200), R())
    assert "T (cycles)" in out.getvalue() and "506000000" in out.getvalue() and "e+" not in out.getvalue()


# ---- plots ----------------------------------------------------------------------------------------------------
def _labels(fig) -> list[str]:
    fig.canvas.draw()
    return [t.get_text() for ax in fig.axes for axis in (ax.xaxis, ax.yaxis)
            for t in axis.get_ticklabels(which="both") if t.get_visible() and t.get_text()]


@pytest.mark.parametrize("lo,hi", [(3.0, 9.0), (1.2, 40.0), (0.1, 20.0)])
def test_log_axes_over_few_decades_have_plain_ticks(lo, hi):
    """'6×10^0' was a tick of the ACE distributions: a log axis over few decades is labelled 6, 20, 0.05."""
    import matplotlib.pyplot as plt

    from hpcvar.report.plots import figure, plain_log_ticks

    fig, ax = figure()
    ax.loglog([lo, hi], [lo, hi])
    plain_log_ticks(fig)
    labels = _labels(fig)
    plt.close(fig)
    assert labels and not any("times" in t or "^" in t or "$" in t for t in labels), labels
    assert all(re.fullmatch(r"[0-9.]+", t.replace("−", "-")) for t in labels), labels


def test_log_tick_labels_do_not_overlap():
    import matplotlib.pyplot as plt

    from hpcvar.report.plots import figure, plain_log_ticks

    fig, ax = figure(figsize=(3.0, 2.5))
    ax.semilogx([2.0, 9.5], [0, 1])
    plain_log_ticks(fig)
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    boxes = sorted((t.get_window_extent(r) for t in ax.xaxis.get_ticklabels(which="both")
                    if t.get_visible() and t.get_text()), key=lambda b: b.x0)
    plt.close(fig)
    assert len(boxes) >= 2
    assert all(a.x1 <= b.x0 for a, b in zip(boxes, boxes[1:], strict=False))


def test_heat_map_text_colour_follows_the_cell():
    """White on viridis' yellow was unreadable: the text is black on light cells, white on dark ones."""
    import matplotlib.pyplot as plt
    import numpy as np

    from hpcvar.report.plots import figure, label_cells

    grid = np.array([[1.15, 1.46], [1.41, 1.19]])
    fig, ax = figure()
    im = ax.imshow(grid, cmap="viridis")
    label_cells(ax, im, grid)
    colours = {t.get_text(): t.get_color() for t in ax.texts}
    plt.close(fig)
    assert colours["1.46"] == "black" and colours["1.41"] == "black"  # yellow, light green
    assert colours["1.15"] == "white" and colours["1.19"] == "white"  # dark purple


def test_fanin_run_of_one_point_has_a_visible_marker():
    import matplotlib.pyplot as plt

    from hpcvar.kinds.fanin.views import _runs_panel
    from hpcvar.report.plots import figure

    sub = pd.DataFrame({"rep": [0], "cset": [0.0], "clients": [1], "aggregate_bytes_per_s": [2.1e9]})
    fig, ax = figure()
    _runs_panel(ax, "- chatter", sub, ("single", "deep", "any"), lambda c: "")
    line = ax.get_lines()[0]
    plt.close(fig)
    assert line.get_marker() == "o" and line.get_markersize() >= 8


def test_sharing_figure_shows_penalties_and_errors_with_the_legend_off_the_bars(tmp_path, monkeypatch):
    """Bars of 1730-1760 ms on a 0-1750 ms axis hid a 1.7% difference: the figure shows penalties and each
    model's E_rel, and its legend is under the panels."""
    from hpcvar.kinds.sharing import views
    from hpcvar.report import plots

    drawn = {}

    def keep(fig, stem, formats=("png",)):
        fig.canvas.draw()
        drawn["axes"] = [(ax.get_ylabel(), [p.get_height() for p in ax.patches]) for ax in fig.axes]
        drawn["overlap"] = plots.legend_overlap(fig)
        drawn["legends"] = [ax.get_legend() for ax in fig.axes]
        return [tmp_path / "x.png"]

    monkeypatch.setattr(plots, "save", keep)
    res = {"run_id": "r", "models": ["gige", "maxmin"], "e_abs_pct": {"gige": 1.0, "maxmin": 1.7},
           "communications": [{"name": n, "t_measured_ns": 1.73e9, "penalty_measured": 1.98,
                               "predicted": {"gige": {"penalty": 2.0, "t_ns": 1.75e9, "e_rel_pct": 1.0},
                                             "maxmin": {"penalty": 2.0, "t_ns": 1.76e9, "e_rel_pct": 1.7}}}
                              for n in ("a", "b")]}

    class FakeRun:
        def plots_dir(self):
            return tmp_path

    views.plot_evaluation(FakeRun(), res)
    labels = dict(drawn["axes"])
    assert labels["E_rel (%)"] == [1.0, 1.0, 1.7, 1.7]
    assert any(lab.startswith("penalty") for lab in labels)
    assert drawn["overlap"] == 0 and all(leg is None for leg in drawn["legends"])  # a figure legend, not on an axes
