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
    assert "median (us)" in text and "95% CI (us)" in text and "max (ms)" in text and "bandwidth (GB/s)" in text
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
