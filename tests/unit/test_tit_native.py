"""The compiled SimGrid TIT parser (native/sim/tit.c) against the Python reference (hpcvar.traces.tit._Parser):
the same frame (columns, dtypes, values, row order) and ntasks, or the same first error (type, message, file:line,
remedy), on the golden files and on random TIT texts (hypothesis, derandomised)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hpcvar.errors import HpcvarError
from hpcvar.traces import tit_native
from hpcvar.traces.tit import read_tit, used_engine
from tests.conftest import assert_same_import

pytestmark = pytest.mark.skipif(not tit_native.available(), reason="libhv_replay.so is not built (make install)")
DATA = Path(__file__).resolve().parents[1] / "data" / "tit"
GOLDEN = [DATA / "all_actions.tit", DATA / "per_rank" / "app.txt"]
SETTINGS = settings(max_examples=300, deadline=None, derandomize=True, database=None,
                    suppress_health_check=list(HealthCheck))


def assert_same(path, flops_rate: float = 1e9):
    return assert_same_import(read_tit, path, flops_rate)


@pytest.mark.parametrize("path", GOLDEN, ids=lambda p: p.name)
def test_golden_files_same_frames(path):
    assert used_engine([(str(path), path.read_bytes())], "auto") == "native"
    res = assert_same(path)
    assert res[0] == "ok" and len(res[1]) > 10


def test_golden_per_rank_set_values():
    ev = read_tit(GOLDEN[1], engine="native").events
    t0 = ev[ev["task"] == 0]
    assert list(t0["op"]) == ["init", "isend", "isend", "wait", "wait", "allreduce", "finalize"]
    assert list(t0["req"].iloc[3:5]) == [1, 2] and int(t0["t_start_ns"].iloc[1]) == 1_000_000
    last = ev.iloc[-1]  # rank 1 ends without finalize: added last, with its final compute
    assert (last["task"], last["op"], last["t_start_ns"]) == (1, "finalize", 3_000_000)


# ---- random TIT texts --------------------------------------------------------------------------------------

RANKS = ["0", "1", "2", "3", "p0", "p1", "p2", "p3", "+1", "-0", "p-0", "01", "0_1", "1__0", "_1", "p", "x", "-1",
         "p16777215", "16777216", "9" * 30, "0" * 4301 + "1", "p+2"]
ACTIONS = ["init", "finalize", "compute", "sleep", "send", "Isend", "recv", "Irecv", "wait", "waitall", "barrier",
           "bcast", "reduce", "allreduce", "gather", "scatter", "allgather", "allToAll", "comm_size", "comm_split",
           "comm_dup", "test", "INIT", "WaitAll", "teleport", "#", "comm-size", "isend\x00"]
NUMBERS = ["0", "1", "2", "3", "8", "1024", "1e3", "2e6", "-1", "-0", "1.5", ".5", "5.", ".", "1e400", "1e-400",
           "nan", "-nan", "inf", "-inf", "Infinity", "iNf", "infinit", "1_000", "1__0", "_1", "1_", "1_.5", "1._5",
           "1e1_0", "0x10", "1e", "1e+3", "1E-3", "+7", "++7", "p1", "p2", "p0", "9" * 30, "1e17", "2e16", "9e7",
           "1125899906842624", "1125899906842625", "4.6e18", "1e16", "0.0000000015", "12345678901234567", "\x00",
           "7\x00", "2.5e-10", "1e9", "1e11", "1e17"]
SEPS = [" ", " ", " ", "\t", "\x1f", "  "]
BREAKS = ["\n"] * 8 + ["\r\n", "\r", "\v", "\f", "\x1c", "\x1d", "\x1e"]


@st.composite
def tit_line(draw) -> str:
    kind = draw(st.sampled_from(["action"] * 12 + ["comment", "blank", "junk"]))
    if kind == "comment":
        return draw(st.sampled_from(["# a comment", "  # indented", "#", "\t#x 1 2"]))
    if kind == "blank":
        return draw(st.sampled_from(["", "   ", "\t", "\x1f"]))
    if kind == "junk":
        return draw(st.text(alphabet="p0123 _.e#\t", max_size=8))
    toks = [draw(st.sampled_from(RANKS[:8]) if draw(st.integers(0, 9)) else st.sampled_from(RANKS)),
            draw(st.sampled_from(ACTIONS))]
    toks += draw(st.lists(st.sampled_from(NUMBERS[:12]) | st.sampled_from(NUMBERS), max_size=4))
    lead = draw(st.sampled_from(["", "", "", " ", "\t"]))
    return lead + "".join(t + draw(st.sampled_from(SEPS)) for t in toks[:-1]) + toks[-1]


@st.composite
def tit_text(draw) -> str:
    lines = draw(st.lists(tit_line(), min_size=1, max_size=25))
    return "".join(ln + draw(st.sampled_from(BREAKS)) for ln in lines)[:None if draw(st.booleans()) else -1]


@st.composite
def valid_text(draw) -> str:
    """A trace that mostly parses: ranks 0..n-1, waits only where a request is pending."""
    n = draw(st.integers(1, 4))
    lines, pend = [f"p{r} init" for r in range(n)], [0] * n
    for _ in range(draw(st.integers(0, 30))):
        r, peer = draw(st.integers(0, n - 1)), draw(st.integers(0, n - 1))
        size = draw(st.sampled_from(["8", "1024", "1e6", "65536", "1_000", "0"]))
        choices = [f"{r} compute {draw(st.sampled_from(['1e6', '123456', '0', '2.5e3', '7']))}", f"p{r} sleep 1e-5",
                   f"p{r} send p{peer} {size}", f"p{r} Irecv {peer} {size}", f"p{r} Isend {peer} {size}",
                   f"p{r} bcast {size} {peer}", f"p{r} reduce {size} 10 {peer}", f"p{r} allToAll {size} {size}",
                   f"p{r} gather 8 8", f"p{r} barrier", f"p{r} allreduce {size} 1", f"p{r} waitall", f"p{r} test"]
        if pend[r]:
            choices += [f"p{r} wait", f"p{r} wait {peer} {r} 0", f"p{r} wait {r} {peer}"] * 2
        line = draw(st.sampled_from(choices))
        pend[r] = 0 if "waitall" in line else pend[r] + ("Isend" in line or "Irecv" in line) - (" wait" in line)
        lines.append(line)
    lines += [f"p{r} finalize" for r in range(n) if draw(st.booleans())]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("text", [
    "p0 init\n" + "p0 sleep 9e7\n" * 3,  # the clock beyond MAX_NS
    "p0 init\np1 init\np0 send p2 8\np1 bcast 8 5\n",  # peers without actions: the highest, first named
    "p4096 init\np0 allToAll 1125899906842624 8\np1 allToAll 1125899906842624 8\n",  # beyond MAX_BYTES
    "p2 allToAll 1125899906842624 8\np4096 init\np1 allToAll 1125899906842624 8\n",
    "", "# nothing\n\n", "p3 comm_size 4\n", "p1 compute 5\np0 finalize\np1 test\n", "p0 init\r\np0 finalize",
    "p0 Isend 1 8\np1 Irecv 0 8\np0 wait 0 1\np1 wait 0 1\np0 wait\n", "p0 wait\n", "p0 teleport\n",
    "  # indented comment first\np0 init\n", " #x\np0 init\n", "init\n", "p0 bcast\np0 alltoall\n"])
def test_edge_cases_same_result(tmp_path, text):
    p = tmp_path / "t.tit"
    p.write_bytes(text.encode())
    assert_same(p)


@SETTINGS
@given(text=tit_text(), rate=st.sampled_from([1e9, 1.0, 3e7, 1e20]))
def test_random_texts_same_result(tmp_path_factory, text, rate):
    p = tmp_path_factory.mktemp("tit") / "t.tit"
    p.write_bytes(text.encode())
    assert_same(p, rate)


@SETTINGS
@given(text=valid_text())
def test_random_valid_traces_same_frames(tmp_path_factory, text):
    p = tmp_path_factory.mktemp("tit") / "t.tit"
    p.write_text(text)
    assert_same(p)


@SETTINGS
@given(parts=st.lists(tit_text() | valid_text(), min_size=1, max_size=3))
def test_random_per_rank_sets_same_result(tmp_path_factory, parts):
    d = tmp_path_factory.mktemp("titset")
    for i, text in enumerate(parts):
        (d / f"rank{i}.txt").write_bytes(text.encode())
    (d / "index.txt").write_text("".join(f"rank{i}.txt\n" for i in range(len(parts))))
    assert_same(d / "index.txt")


def test_non_ascii_text_is_read_by_the_reference(tmp_path):
    p = tmp_path / "t.tit"
    p.write_text("p0 init\np0 compute \u0663e6\u2028p0 finalize\n")  # an Arabic-Indic 3, a Unicode line break
    assert used_engine([(str(p), p.read_bytes())], "native") == "python"
    ev = read_tit(p, engine="native").events
    assert list(ev["op"]) == ["init", "finalize"] and int(ev["t_start_ns"].iloc[1]) == 3_000_000


def test_engine_choice_errors(tmp_path, monkeypatch):
    p = tmp_path / "t.tit"
    p.write_text("p0 init\n")
    with pytest.raises(HpcvarError, match="unknown import engine 'fast'") as e:
        read_tit(p, engine="fast")
    assert e.value.where == "--engine"
    monkeypatch.setenv("HPCVAR_IMPORT_ENGINE", "nope")
    with pytest.raises(HpcvarError) as e:
        read_tit(p)
    assert e.value.where == "HPCVAR_IMPORT_ENGINE"
    monkeypatch.setenv("HPCVAR_IMPORT_ENGINE", "python")
    assert used_engine([(str(p), p.read_bytes())]) == "python"
