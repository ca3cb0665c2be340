"""The compiled SimGrid TIT parser (native/sim/tit.c) against the Python reference (hpcvar.traces.tit._Parser):
the same frame (columns, dtypes, values, row order) and ntasks, or the same first error (type, message, file:line,
remedy), on the golden files and on random TIT texts of both of SimGrid's dialects, read with each --dialect
(hypothesis, derandomised)."""

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
GOLDEN = [DATA / "simgrid_3.19.tit", DATA / "simgrid_3.32.txt"]
DIALECTS = ["auto", "3.19", "3.20", "3.22", "3.23", "3.25", "3.32"]
SETTINGS = settings(max_examples=300, deadline=None, derandomize=True, database=None,
                    suppress_health_check=list(HealthCheck))


def assert_same(path, flops_rate: float = 1e9, dialect: str = "auto"):
    return assert_same_import(lambda p, rate, engine: read_tit(p, rate, engine, dialect), path, flops_rate)


@pytest.mark.parametrize("path", GOLDEN, ids=lambda p: p.name)
def test_golden_files_same_frames(path):
    assert used_engine([(str(path), path.read_bytes())], "auto") == "native"
    res = assert_same(path)
    assert res[0] == "ok" and len(res[1]) > 10


@pytest.mark.parametrize("dialect", DIALECTS)
def test_golden_files_with_each_dialect(dialect):
    for path in GOLDEN:
        assert_same(path, dialect=dialect)


# ---- random TIT texts --------------------------------------------------------------------------------------

RANKS = ["0", "1", "2", "3", "p0", "p1", "p2", "p3", "+1", "-0", "p-0", "01", "0_1", "1__0", "_1", "p", "x", "-1",
         "p16777215", "16777216", "9" * 30, "0" * 4301 + "1", "p+2"]
ACTIONS = ["init", "finalize", "compute", "sleep", "send", "Isend", "isend", "recv", "Irecv", "irecv", "wait",
           "waitAll", "waitall", "test", "barrier", "bcast", "reduce", "allReduce", "allreduce", "gather", "scatter",
           "allGather", "allgather", "allToAll", "alltoall", "sendRecv", "location", "comm_size", "comm_split",
           "comm_dup", "gatherv", "allToAllV", "scan", "INIT", "WaitAll", "ISend", "Ssend", "teleport", "#",
           "comm-size", "isend\x00"]
NUMBERS = ["0", "1", "2", "3", "8", "1024", "1e3", "2e6", "-1", "-0", "1.5", ".5", "5.", ".", "1e400", "1e-400",
           "nan", "-nan", "inf", "-inf", "Infinity", "iNf", "infinit", "1_000", "1__0", "_1", "1_", "1_.5", "1._5",
           "1e1_0", "0x10", "1e", "1e+3", "1E-3", "+7", "++7", "p1", "p2", "p0", "9" * 30, "1e17", "2e16", "9e7",
           "1125899906842624", "1125899906842625", "4.6e18", "1e16", "0.0000000015", "12345678901234567", "\x00",
           "7\x00", "2.5e-10", "1e9", "1e11", "1e17", "2147483647", "2147483648", "6", "7", "40", "44", "51", "53",
           "55", "56", "57", "59", "60", "00", "07", "99", "100"]
DATATYPES = ["0", "1", "2", "3", "4", "5", "6", "7", "14", "27", "39", "40", "41", "42", "44", "45", "50", "51", "53",
             "54", "55", "56", "57", "58", "59", "60", "-1", "00", "07", "+1", "x"]
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
    toks += draw(st.lists(st.sampled_from(NUMBERS[:12]) | st.sampled_from(NUMBERS) | st.sampled_from(DATATYPES),
                          max_size=7))
    lead = draw(st.sampled_from(["", "", "", " ", "\t"]))
    return lead + "".join(t + draw(st.sampled_from(SEPS)) for t in toks[:-1]) + toks[-1]


@st.composite
def tit_text(draw) -> str:
    lines = draw(st.lists(tit_line(), min_size=1, max_size=25))
    return "".join(ln + draw(st.sampled_from(BREAKS)) for ln in lines)[:None if draw(st.booleans()) else -1]


def _vcolls(r: int, n: int, peer: int, dt: str, old: bool) -> list[str]:
    """v-collectives with a count per rank (n of them), in the names of either dialect."""
    c = " ".join(str(8 * (k + 1)) for k in range(n))
    names = ("gatherV", "allGatherV", "allToAllV", "scatterV", "reduceScatter") if old else \
        ("gatherv", "allgatherv", "alltoallv", "scatterv", "reducescatter")
    return [f"{r} {names[0]} 8 {c} {peer}{dt}{dt}", f"{r} {names[1]} 8 {c}{dt}", f"{r} {names[2]} 9 {c} 9 {c}{dt}{dt}",
            f"{r} {names[3]} {c} 8 {peer}{dt}", f"{r} {names[4]} {c} 1e3{dt}"]


def _old_lines(draw, r: int, peer: int, size: str, dt: str, pend: list[int]) -> list[str]:
    out = [f"p{r} send p{peer} {size}{dt}", f"p{r} Irecv {peer} {size}{dt}", f"p{r} Isend {peer} {size}{dt}",
           f"p{r} allReduce {size} 1{dt}", f"p{r} allToAll {size} {size}{dt}{dt}", f"p{r} allGather 8 8{dt}",
           f"p{r} waitAll", f"p{r} test"]
    if pend[r]:
        out += [f"p{r} wait"] * 3
    return out


def _new_lines(draw, r: int, peer: int, size: str, dt: str, pend: list[int]) -> list[str]:
    tag = draw(st.sampled_from(["0", "7", "0", "2147483647"]))
    out = [f"{r} send {peer} {tag} {size}{dt}", f"{r} irecv {peer} {tag} {size}{dt}",
           f"{r} isend {peer} {tag} {size}{dt}", f"{r} allreduce {size} 1e3{dt}", f"{r} alltoall {size} {size}{dt}",
           f"{r} allgather 8 8{dt}{dt}", f"{r} waitall 2", f"{r} sleep 1e-5", f"{r} sendRecv 8 {peer} 16 {peer}{dt}",
           f"{r} test {r} {peer} {tag}", f"{r} location a.c 3"]
    if pend[r]:
        out += [f"{r} wait {peer} {r} {tag}", f"{r} wait {r} {peer} {tag}", f"{r} wait {r} {peer} 0"] * 2
    return out


@st.composite
def valid_text(draw) -> str:
    """A trace that mostly parses, in one dialect: ranks 0..n-1, waits mostly where a request is pending."""
    n, old = draw(st.integers(1, 4)), draw(st.booleans())
    lines = [f"p{r} init" + draw(st.sampled_from(["", "", " 1"])) for r in range(n)]
    pend = [0] * n
    for _ in range(draw(st.integers(0, 30))):
        r, peer = draw(st.integers(0, n - 1)), draw(st.integers(0, n - 1))
        size = draw(st.sampled_from(["8", "1024", "1e6", "65536", "1_000", "0"]))
        dt = draw(st.sampled_from(["", "", " 0", " 1", " 6"] + ([] if old else [" 7", " 24", " 57"])))
        choices = [f"{r} compute {draw(st.sampled_from(['1e6', '123456', '0', '2.5e3', '7']))}",
                   f"p{r} bcast {size} {peer}{dt}", f"p{r} reduce {size} 10 {peer}{dt}", f"p{r} gather 8 8",
                   f"p{r} scatter 8 16 {peer}{dt}{dt}", f"p{r} barrier"]
        choices += (_old_lines if old else _new_lines)(draw, r, peer, size, dt, pend)
        choices += _vcolls(r, n if draw(st.integers(0, 5)) else n + 1, peer, dt, old)  # sometimes a count too many
        line = draw(st.sampled_from(choices))
        name = line.split()[1]
        pend[r] = 0 if name in ("waitAll", "waitall") else pend[r] + (name in ("Isend", "Irecv", "isend", "irecv")) \
            - (name == "wait")
        lines.append(line)
    lines += [f"p{r} finalize" for r in range(n) if draw(st.booleans())]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("text", [
    "p0 init\n" + "p0 sleep 9e7\n" * 3,  # the clock beyond MAX_NS
    "p0 init\np1 init\np0 send p2 8\np1 bcast 8 5\n",  # peers without actions: the highest, first named
    "p4096 init\np0 allToAll 1125899906842624 8\np1 allToAll 1125899906842624 8\n",  # beyond MAX_BYTES
    "p2 allToAll 1125899906842624 8\np4096 init\np1 allToAll 1125899906842624 8\n",
    "", "# nothing\n\n", "p3 comm_size 4\n", "p1 compute 5\np0 finalize\np1 test\n", "p0 init\r\np0 finalize",
    "p0 Isend 1 8\np1 Irecv 0 8\np0 wait\np1 wait\np0 wait\n", "p0 wait\n", "p0 teleport\n",
    "0 isend 1 3 8\n1 irecv 0 3 8\n0 wait 0 1 3\n1 wait 0 1 3\n0 wait 0 1 3\n", "0 send 1 2 6\n",
    "0 Isend 1 8\n0 isend 1 0 8\n", "0 isend 1 0 8 53\n", "0 bcast 1 0 53\n", "0 isend 0 0 8 -1\n",
    "  # indented comment first\np0 init\n", " #x\np0 init\n", "init\n", "p0 bcast\np0 alltoall\n"])
def test_edge_cases_same_result(tmp_path, text):
    p = tmp_path / "t.tit"
    p.write_bytes(text.encode())
    assert_same(p)


@SETTINGS
@given(text=tit_text(), rate=st.sampled_from([1e9, 1.0, 3e7, 1e20]), dialect=st.sampled_from(DIALECTS))
def test_random_texts_same_result(tmp_path_factory, text, rate, dialect):
    p = tmp_path_factory.mktemp("tit") / "t.tit"
    p.write_bytes(text.encode())
    assert_same(p, rate, dialect)


@SETTINGS
@given(text=valid_text(), dialect=st.sampled_from(["auto"] * 4 + DIALECTS))
def test_random_valid_traces_same_frames(tmp_path_factory, text, dialect):
    p = tmp_path_factory.mktemp("tit") / "t.tit"
    p.write_text(text)
    assert_same(p, dialect=dialect)


@SETTINGS
@given(parts=st.lists(tit_text() | valid_text(), min_size=1, max_size=3), dialect=st.sampled_from(DIALECTS))
def test_random_per_rank_sets_same_result(tmp_path_factory, parts, dialect):
    d = tmp_path_factory.mktemp("titset")
    for i, text in enumerate(parts):
        (d / f"rank{i}.txt").write_bytes(text.encode())
    (d / "index.txt").write_text("".join(f"rank{i}.txt\n" for i in range(len(parts))))
    assert_same(d / "index.txt", dialect=dialect)


def test_random_valid_traces_mostly_parse(tmp_path_factory):
    """The generator of valid traces makes traces that parse (else the equality above tests only errors)."""
    ok = []

    @settings(max_examples=100, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(text=valid_text())
    def run(text):
        p = tmp_path_factory.mktemp("tit") / "t.tit"
        p.write_text(text)
        ok.append(assert_same(p)[0] == "ok")

    run()
    assert sum(ok) >= len(ok) // 3, f"{sum(ok)} of {len(ok)} parse"


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


def test_arrow_is_imported_from_the_c_parse_on_once(tmp_path):
    """Issue 30: Arrow's import (for the tables stored next) runs in a thread from the C parse on, not while the
    files are read (its GIL made each read wait); one thread per process, none once Arrow is there."""
    import subprocess
    import sys

    code = f"""
import sys, threading
from hpcvar.results import store
from hpcvar.traces import tit
started = []
start = threading.Thread.start
def counted(self):
    started.append((self.name, "pyarrow.parquet" in sys.modules))
    start(self)
threading.Thread.start = counted
reads = []
sources = tit._sources
tit._sources = lambda path: (reads.append(len(started)), sources(path))[1]
tit.read_tit({str(GOLDEN[1])!r})
store.prefetch_arrow()
for t in threading.enumerate():
    if t.name == store.ARROW_THREAD:
        t.join()
store.prefetch_arrow()
print(reads, started, "pyarrow.parquet" in sys.modules)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True).stdout
    assert out.split() == ["[0]", "[('hpcvar-import-arrow',", "False)]", "True"], out


def test_sim_app_imports_arrow_while_the_c_core_replays_not_while_it_reads(tmp_path):
    """Issue 30: 'sim app' starts Arrow's import (for its tables) when the replay starts, so that the import
    overlaps the C core (no GIL) rather than the Python work between read and replay: once, after the trace
    was read and lowered."""
    import subprocess
    import sys

    trace = tmp_path / "pair.txt"
    trace.write_text("0 init\n1 init\n0 compute 1e6\n0 send 1 0 1000 0\n1 recv 0 0 1000 0\n0 finalize\n1 finalize\n")
    code = f"""
import sys, threading
from hpcvar.results import store
from hpcvar.kinds.sim_app import job
state = {{"lowered": False}}
started = []
start = threading.Thread.start
def counted(self):
    started.append((self.name, state["lowered"]))
    start(self)
threading.Thread.start = counted
lower = job._lower
def lowered(*a, **k):
    out = lower(*a, **k)
    state["lowered"] = True
    return out
job._lower = lowered
from hpcvar.cli import main
sys.argv = ["hpcvar", "sim", "app", {str(trace)!r}, "--no-plots", "--json", "--runs-dir", {str(tmp_path)!r}]
try:
    main()
except SystemExit:
    pass
print("ARROW", [s for n, s in started if n == store.ARROW_THREAD], file=sys.stderr)
"""
    err = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True).stderr
    assert "ARROW [True]" in err, err
