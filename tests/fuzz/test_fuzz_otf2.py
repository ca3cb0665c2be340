"""Fuzzing the OTF2 import (hpcvar trace import, Score-P archives): the anchor file, the definitions and the
event files of a small archive mutated. The otf2 bindings call the C library, which may crash on a damaged
archive: each parse runs in a forked child, so a crash is a reported failure, not a dead test run."""

from __future__ import annotations

import os
import signal
import tempfile
import traceback
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz.harness import FUZZ, mutated, outcome

otf2 = pytest.importorskip("otf2", reason="the optional otf2 package is not installed")


def _seed_archive() -> dict[str, bytes]:
    """Every file of a 2-rank archive (send/recv, isend/irecv/wait, allreduce), by relative path."""
    from tests.unit.test_replay_traces import _write_otf2

    with tempfile.TemporaryDirectory() as d:
        anchor = _write_otf2(Path(d) / "arch")
        base = Path(anchor).parent
        return {str(p.relative_to(base)): p.read_bytes() for p in sorted(base.rglob("*")) if p.is_file()}, \
            str(Path(anchor).relative_to(base))


FILES, ANCHOR = _seed_archive()
# libotf2 itself (both the otf2 package and hpcvar's C reader open archives through it) spends 7.2 s of CPU on an
# anchor file whose string lost its terminating byte, before it refuses it (measured on a quiet machine, the
# same in both bindings; a valid archive opens in 0.01 s): 10 s caught that bounded cost under load, not a hang
OTF2_HANG_S = 30
_DIR: list[Path] = []


@pytest.fixture(scope="module", autouse=True)
def _otf2_dir(tmp_path_factory):
    _DIR.append(tmp_path_factory.mktemp("fuzz-otf2"))
    yield
    _DIR.pop()


@st.composite
def archives(draw) -> dict[str, bytes]:
    files = dict(FILES)
    for name in draw(st.lists(st.sampled_from(sorted(files)), min_size=1, max_size=2, unique=True)):
        files[name] = draw(mutated(files[name], max_mutations=3))
    return files


def _in_child(fn) -> str | None:
    """Run ``fn`` in a forked child: None when it returned, else what went wrong (an exception's traceback
    or the signal that killed the child)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: never returns into pytest
        os.close(r)
        code = 0
        try:
            fn()
        except BaseException:  # reported to the parent
            os.write(w, traceback.format_exc()[-3000:].encode())
            code = 1
        os._exit(code)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        msg = f.read().decode(errors="replace")
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        return f"read_otf2 crashed: {signal.Signals(os.WTERMSIG(status)).name}"
    return msg or (None if os.WEXITSTATUS(status) == 0 else f"child exit {os.WEXITSTATUS(status)}")


def _engines() -> list[str]:
    from hpcvar.traces import otf2_native

    return ["python", "native"] if otf2_native.available() else ["python"]


@FUZZ
@given(archives())
def test_otf2_import(files):
    """Each reader (the otf2 package, and the C reader on libotf2 where it is built) on the same damaged
    archive: a trace with sane values or an error naming the archive; when both read it, the same rows (they
    may disagree on whether a damaged archive is readable: the package refuses definitions that name undefined
    ones, the C reader reads what it can)."""
    from hpcvar.traces.otf2_import import read_otf2

    base = _DIR[-1] / "arch"
    for name, data in files.items():
        (base / name).parent.mkdir(parents=True, exist_ok=True)
        (base / name).write_bytes(data)

    def parse():
        frames = []
        for engine in _engines():
            tr, _ = outcome(read_otf2, base / ANCHOR, engine, where=str(base), hang_s=OTF2_HANG_S)
            if tr is not None:
                ev = tr.events
                assert 1 <= tr.ntasks <= 1 << 24
                assert (ev["bytes"] >= 0).all() and ev["peer"].between(-1, tr.ntasks - 1).all()
                assert (ev["t_end_ns"] >= ev["t_start_ns"]).all()
                frames.append(ev)
        if len(frames) == 2:
            import pandas as pd

            pd.testing.assert_frame_equal(frames[0], frames[1], check_exact=True)

    problem = _in_child(parse)
    assert problem is None, problem
