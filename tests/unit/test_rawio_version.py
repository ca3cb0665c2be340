"""The raw reader checks the raw format's version (results/rawio.py, native/common/hv_out.h)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from hpcvar.errors import HpcvarError, InputFileError, ResultsError
from hpcvar.results import read_raw
from hpcvar.results.rawio import RAW_FORMAT_READABLE, RAW_FORMAT_VERSION

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"

BODY = "#@encoding=csv\n#@program=hv_test\n#@columns=iter,rtt_ns\n#@point size=8\n0,10.5\n1,11\n#@point_end rows=2\n"


def _write(tmp_path, head: str) -> Path:
    p = tmp_path / "launch-001.raw"
    p.write_text(head + BODY)
    return p


def test_current_version_is_read(tmp_path):
    raw = read_raw(_write(tmp_path, f"#@hpcvar_raw={RAW_FORMAT_VERSION}\n"))
    assert raw.meta["hpcvar_raw"] == str(RAW_FORMAT_VERSION) and len(raw.points) == 1


@pytest.mark.parametrize("folder", ["ace_ba3e1d1", "fanin_ba3e1d1"])
def test_files_of_older_hpcvar_are_read(folder):
    raw = read_raw(DATA / folder / "launch-001.raw")
    assert int(raw.meta["hpcvar_raw"]) in RAW_FORMAT_READABLE and raw.points


def test_newer_version_is_refused_with_the_remedy(tmp_path):
    p = _write(tmp_path, f"#@hpcvar_raw={RAW_FORMAT_VERSION + 1}\n")
    with pytest.raises(ResultsError) as e:
        read_raw(p)
    assert e.value.where == f"{p}:1"
    assert f"version {RAW_FORMAT_VERSION + 1} is newer" in e.value.what
    assert "upgrade hpcvar" in e.value.todo and "re-run" in e.value.todo
    assert str(p) in e.value.render()


@pytest.mark.parametrize("head", ["#@encoding=csv\n", "#@hpcvar_raw\n", "# @hpcvar_raw=1\n", "x",
                                  "#@program=hv_test\n#@hpcvar_raw=1\n"])
def test_missing_version_is_refused(tmp_path, head):
    p = _write(tmp_path, head)
    with pytest.raises(InputFileError) as e:
        read_raw(p)
    assert e.value.where == f"{p}:1" and "#@hpcvar_raw=N" in e.value.what and "re-run" in e.value.todo


@pytest.mark.parametrize("data", [b"", b"#@hpc", b"#@hpcvar_raw="])
def test_a_launch_stopped_before_its_header_measured_nothing(tmp_path, data):
    """Issue #32: a launch killed or timed out while MPI started leaves an empty file, or one cut inside its first
    line: no point was measured (--resume measures them), not a damaged file."""
    p = tmp_path / "launch-001.raw"
    p.write_bytes(data)
    raw = read_raw(p)
    assert raw.unstarted and raw.points == [] and raw.incomplete == 0


def test_a_launch_stopped_after_its_header_keeps_its_complete_points(tmp_path):
    p = tmp_path / "launch-001.raw"
    p.write_text(f"#@hpcvar_raw={RAW_FORMAT_VERSION}\n#@program=hv_x\n#@columns=a,b\n#@point n=1\n1,2\n"
                 "#@point_end rows=1\n#@point n=2\n3,")
    raw = read_raw(p)
    assert not raw.unstarted and len(raw.points) == 1 and raw.incomplete == 1 and raw.meta["program"] == "hv_x"


@pytest.mark.parametrize("value", ["", "x", "1.5", "0", "-1"])
def test_unknown_version_is_refused(tmp_path, value):
    p = _write(tmp_path, f"#@hpcvar_raw={value}\n")
    with pytest.raises(HpcvarError) as e:
        read_raw(p)
    assert e.value.where == f"{p}:1" and e.value.todo


def test_native_writer_and_reader_agree():
    h = (ROOT / "native" / "common" / "hv_out.h").read_text()
    m = re.search(r"#define\s+HV_RAW_FORMAT_VERSION\s+(\d+)", h)
    assert m and int(m.group(1)) == RAW_FORMAT_VERSION
    assert RAW_FORMAT_VERSION in RAW_FORMAT_READABLE
    c = (ROOT / "native" / "common" / "hv_out.c").read_text()
    assert '"#@hpcvar_raw=%d\\n' in c and "HV_RAW_FORMAT_VERSION" in c
