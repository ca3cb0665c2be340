"""A TIT trace parsed in C while the command imports the rest (hpcvar.traces.tit_prefetch): the reader takes the
parse started before when it is of the same files, flop rate and dialect, and gives the trace it reads alone;
anything else is read again, and errors are the reader's."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from hpcvar.errors import InputFileError
from hpcvar.traces import tit_native, tit_prefetch
from hpcvar.traces.tit import read_tit

DATA = Path(__file__).resolve().parents[1] / "data" / "tit"
GOLDEN = [DATA / "simgrid_3.19.tit", DATA / "simgrid_3.32.txt"]

pytestmark = pytest.mark.skipif(not tit_native.available(), reason="libhv_replay.so is not built")


def same(a, b) -> bool:
    return (a.ntasks == b.ntasks and a.meta == b.meta and sorted(a._columns) == sorted(b._columns)
            and all(np.array_equal(a._columns[k], b._columns[k]) for k in a._columns))


@pytest.fixture(autouse=True)
def nothing_left():
    yield
    assert not tit_prefetch._started  # every test takes what it started


@pytest.mark.parametrize("path", GOLDEN)
def test_the_parse_started_before_gives_the_trace_read_alone(path, monkeypatch):
    alone = read_tit(path, 2e9)
    assert tit_prefetch.start(str(path), "auto", 2e9, "auto")
    monkeypatch.setattr(tit_native, "parse", lambda *a: pytest.fail("parsed again"))
    assert same(read_tit(path, 2e9), alone)


def test_another_flop_rate_or_dialect_is_read_again():
    path = GOLDEN[1]
    assert tit_prefetch.start(str(path), "auto", 1e9, "auto")
    assert same(read_tit(path, 3e9), read_tit(path, 3e9))  # the first took and dropped the 1e9 parse
    assert tit_prefetch.start(str(path), "auto", 1e9, "auto")
    assert same(read_tit(path, 1e9, dialect="3.32"), read_tit(path, 1e9, dialect="3.32"))


def test_what_is_not_a_tit_trace_is_left_to_the_reader(tmp_path):
    assert not tit_prefetch.start(str(tmp_path / "app.trace"), "auto", 1e9, "auto")  # parquet by its name
    assert not tit_prefetch.start(str(GOLDEN[1]), "parquet", 1e9, "auto")
    assert not tit_prefetch.start(str(tmp_path / "missing.txt"), "auto", 1e9, "auto")
    assert not tit_prefetch.start(str(GOLDEN[1]), "auto", 1e9, "no-such-version")


def test_an_error_is_the_readers_with_its_line(tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_text("0 init\n0 send 1 zero 0\n1 init\n")
    assert tit_prefetch.start(str(bad), "auto", 1e9, "auto")
    with pytest.raises(InputFileError) as e:
        read_tit(bad)
    assert e.value.line == 2
    with pytest.raises(InputFileError) as again:  # the same message without the parse started before
        read_tit(bad)
    assert str(e.value) == str(again.value)


def test_a_parse_never_read_is_dropped_by_the_next():
    assert tit_prefetch.start(str(GOLDEN[0]), "auto", 1e9, "auto")  # a command that stopped before reading
    assert tit_prefetch.start(str(GOLDEN[1]), "auto", 1e9, "auto")
    assert tit_prefetch._started["key"][0] == str(GOLDEN[1])
    assert same(read_tit(GOLDEN[1]), read_tit(GOLDEN[1]))


def test_starting_imports_no_numpy():
    code = (f"import sys; from hpcvar.traces import tit_prefetch; "
            f"print(tit_prefetch.start({str(GOLDEN[1])!r}, 'auto', 1e9, 'auto'), 'numpy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True).stdout
    assert out.split() == ["True", "False"]
