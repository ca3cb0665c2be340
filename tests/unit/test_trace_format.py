"""Which reader a trace goes to (hpcvar.traces.load.trace_format): by its extension, else by its content, so
that SMPI's index files, which often have no extension, are read as TIT rather than refused as broken Parquet."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from hpcvar.sim.replay_stream import is_parquet
from hpcvar.traces.load import load_trace, trace_format
from hpcvar.traces.tit import read_tit

TIT = Path(__file__).resolve().parents[1] / "data" / "tit" / "simgrid_3.32.txt"


@pytest.mark.parametrize("name,want", [("a.otf2", "otf2"), ("a.txt", "tit"), ("a.tit", "tit"),
                                       ("a.parquet", "parquet")])
def test_a_known_extension_decides_without_reading(tmp_path, name, want):
    # the content says otherwise: the extension wins, and nothing need exist
    (tmp_path / name).write_bytes(b"PAR1" if want != "parquet" else b"0 init\n")
    assert trace_format(tmp_path / name) == want
    assert trace_format(tmp_path / "missing" / name) == want


@pytest.mark.parametrize("content,want", [(b"PAR1\x00\x15rest", "parquet"), (b"0 init\n0 send 1 8 0\n", "tit"),
                                          (b"rank-0.txt\nrank-1.txt\n", "tit"), (b"\x89\x00\xffbinary", "parquet"),
                                          (b"text with a \x00", "parquet"), (b"", "parquet")])
def test_without_an_extension_the_content_decides(tmp_path, content, want):
    p = tmp_path / "app.trace"
    p.write_bytes(content)
    assert trace_format(p) == want
    assert is_parquet(str(p), "auto") == (want == "parquet")
    assert trace_format(p, "otf2") == "otf2"  # --from is obeyed as given


def test_a_missing_file_goes_to_the_parquet_reader_which_names_it(tmp_path):
    assert trace_format(tmp_path / "nothing") == "parquet"


def test_a_tit_trace_without_extension_reads_as_with_one(tmp_path):
    bare = tmp_path / "smpi_index"  # SMPI's layout: the index and, beside it, the per-rank files it names
    shutil.copy(TIT, bare)
    shutil.copytree(TIT.parent / "simgrid_3.32", tmp_path / "simgrid_3.32")
    a, b = load_trace(str(bare), flops_rate=2e9), read_tit(TIT, 2e9)
    assert a.ntasks == b.ntasks and sorted(a._columns) == sorted(b._columns)
    assert all(np.array_equal(a._columns[k], b._columns[k]) for k in a._columns)
