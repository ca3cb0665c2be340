"""SimGrid TIT traces of both dialects, hand-written with known byte counts (tests/data/tit), and the lines that
are refused (with file:line and what to do): both parsers, the C one and the Python reference."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpcvar.errors import InputFileError, UsageError
from hpcvar.traces import tit_native
from hpcvar.traces.tit import read_tit

DATA = Path(__file__).resolve().parents[1] / "data" / "tit"
ENGINES = ["python", "native"] if tit_native.available() else ["python"]


def rows(path, task: int, engine: str, **kw) -> list[tuple]:
    """(op, peer, bytes, tag, req, t_start_ns) of a task's rows."""
    ev = read_tit(path, engine=engine, **kw).events
    t = ev[ev["task"] == task]
    return list(zip(t["op"], t["peer"], t["bytes"], t["tag"], t["req"], t["t_start_ns"], strict=True))


@pytest.mark.parametrize("engine", ENGINES)
def test_simgrid_3_19_dialect(engine):
    """Counts of the datatype ids 0-6 (double, int, char, short, long, float, byte; none: bytes), no tags, 'wait'
    completes the most recent request, reduce/allReduce run their flops after the collective (1 GHz)."""
    f = DATA / "simgrid_3.19.tit"
    assert rows(f, 0, engine) == [
        ("init", -1, 0, 0, -1, 0), ("send", 1, 1024, 0, -1, 2_000_000), ("send", 1, 128 * 8, 0, -1, 2_000_000),
        ("isend", 3, 100, 0, -1, 2_000_000), ("isend", 2, 200 * 2, 0, -1, 2_000_000),
        ("wait", 3, 100, 0, 3, 2_000_000), ("wait", 2, 400, 0, 4, 2_000_000), ("barrier", -1, 0, 0, -1, 2_000_000),
        ("bcast", 0, 4096, 0, -1, 2_000_000), ("bcast", 2, 64 * 4, 0, -1, 2_000_000),
        ("reduce", 1, 8 * 8, 0, -1, 2_000_000), ("allreduce", -1, 64 * 8, 0, -1, 2_001_000),
        ("gather", 3, 16 * 4, 0, -1, 2_501_000), ("scatter", 0, 32, 0, -1, 2_501_000),
        ("allgather", -1, 8 * 8, 0, -1, 2_501_000), ("alltoall", -1, 100 * 4, 0, -1, 2_501_000),
        ("finalize", -1, 0, 0, -1, 3_001_000)]
    # rank 2: two Irecv then two waits: the most recent first (the 2 ints from 3, then the 65536 bytes from 1)
    assert rows(f, 2, engine)[1:5] == [("irecv", 1, 65536, 0, -1, 0), ("irecv", 3, 2 * 4, 0, -1, 0),
                                       ("wait", 3, 8, 0, 2, 0), ("wait", 1, 65536, 0, 1, 0)]
    tr = read_tit(f, engine=engine)
    assert tr.ntasks == 4 and tr.meta["tit_dialect"] == ["SimGrid <= 3.19"]
    assert rows(f, 3, engine)[-1] == ("finalize", -1, 0, 0, -1, 501_000)  # added: rank 3 has no finalize


@pytest.mark.parametrize("engine", ENGINES)
def test_simgrid_3_32_index_as_recorded(engine):
    """An index of per-rank files as smpirun -trace-ti writes them (trailing spaces, 'waitall 2', CRLF in one
    file): tags, datatype ids (0 double, 1 int, 5 float, 7 long long), 'wait SRC DST TAG', sendRecv, sleep."""
    f = DATA / "simgrid_3.32.txt"
    assert rows(f, 0, engine) == [
        ("init", -1, 0, 0, -1, 0), ("isend", 1, 2048 * 8, 7, -1, 1_000_000), ("isend", 2, 16 * 8, 7, -1, 1_000_000),
        ("irecv", 2, 3 * 4, 9, -1, 1_000_000), ("wait", 1, 16384, 7, 1, 1_000_000), ("wait", 2, 128, 7, 2, 1_000_000),
        ("wait", 2, 12, 9, 3, 1_000_000), ("allreduce", -1, 8 * 8, 0, -1, 1_000_000),
        ("reduce", 2, 4 * 4, 0, -1, 2_000_000), ("bcast", 1, 50 * 8, 0, -1, 2_000_000),
        ("sendrecv", 1, 10 * 4, 0, -1, 2_000_000), ("sendrecv_recv", 1, 20 * 8, 0, -1, 2_000_000),
        ("finalize", -1, 0, 0, -1, 2_000_000)]
    assert rows(f, 1, engine) == [
        ("init", -1, 0, 0, -1, 0), ("recv", 0, 16384, 7, -1, 0), ("allreduce", -1, 64, 0, -1, 100_000),
        ("reduce", 2, 16, 0, -1, 1_100_000), ("bcast", 1, 400, 0, -1, 1_100_000),
        ("sendrecv", 0, 20 * 8, 0, -1, 1_100_000), ("sendrecv_recv", 0, 10 * 4, 0, -1, 1_100_000),
        ("finalize", -1, 0, 0, -1, 4_100_000)]  # added, after the last compute
    # rank 2: the waits find their request by (source, destination, tag); alltoall: 4 int64 to each of 3 ranks
    assert rows(f, 2, engine)[3:5] == [("wait", 0, 128, 7, 1, 0), ("wait", 0, 12, 9, 2, 0)]
    assert rows(f, 2, engine)[-2] == ("alltoall", -1, 4 * 8 * 3, 0, -1, 1_000_000)


@pytest.mark.parametrize("engine", ENGINES)
def test_init_argument_makes_counts_doubles(tmp_path, engine):
    """SimGrid's default datatype: MPI_BYTE, or MPI_DOUBLE after an 'init' with an argument (per rank)."""
    f = tmp_path / "t.tit"
    f.write_text("0 init 1\n1 init\n0 send 1 10\n1 recv 0 10\n0 bcast 3\n1 bcast 3\n")
    assert [r[2] for r in rows(f, 0, engine)[1:3]] == [80, 24]
    assert [r[2] for r in rows(f, 1, engine)[1:3]] == [10, 3]


@pytest.mark.parametrize("engine", ENGINES)
def test_dialect_given_picks_the_datatype_table(tmp_path, engine):
    """Ids whose type changed between SimGrid versions are refused without --dialect, read with it."""
    f = tmp_path / "t.tit"
    f.write_text("0 isend 0 0 1 53\n0 wait 0 0 0\n0 isend 0 0 1 40\n0 wait 0 0 0\n")
    with pytest.raises(InputFileError, match="datatype 53 has a size that changed") as e:
        read_tit(f, engine=engine)
    assert e.value.where == f"{f}:1" and "--dialect 3.32" in e.value.todo
    for version, sizes in (("3.20", [1, 4]), ("3.22", [1, 8]), ("3.26", [1, 8]), ("3.32", [16, 8]), ("4.0", [16, 8])):
        assert [r[2] for r in rows(f, 0, engine, dialect=version) if r[0] == "isend"] == sizes, version
    with pytest.raises(UsageError, match="unknown TIT dialect '3.x'") as e:
        read_tit(f, engine=engine, dialect="3.x")
    assert e.value.where == "--dialect"


BAD = [  # (text, line of the error, words of the message)
    ("0 Isend 1 100\n0 wait\n0 isend 1 0 100\n", 3, "'isend' with 3 arguments is SimGrid >= 3.20's dialect, but "
                                                   "line 1 of the file is SimGrid <= 3.19's"),
    ("0 init\n0 send 1 2 6\n", 2, "reads as SimGrid <= 3.19's 'PEER COUNT DATATYPE' and as >= 3.20's"),
    ("0 isend 1 0 100 -1\n", 1, "datatype -1: a derived datatype"),
    ("0 Isend 1 100 7\n", 1, "'7' is not a datatype id of SimGrid <= 3.19 (0..6"),
    ("0 isend 1 0 100 60\n", 1, "'60' is not a datatype id of SimGrid (0..59"),
    ("0 isend 1 0 100 56\n", 1, "datatype 56 has no size"),
    ("0 isend 1 0 100 007\n", 1, "'007' is not a datatype id"),
    ("0 irecv 1 -1 100 0\n", 1, "'-1' is not a tag"),
    ("0 isend 1 0 8 0\n0 wait 1 0\n", 2, "'wait' takes SRC DST TAG (3 arguments) in SimGrid >= 3.20's dialect, not 2"),
    ("0 Isend 1 8\n0 wait 1 0 0\n", 2, "'wait' with 3 arguments is SimGrid >= 3.20's dialect"),
    ("0 isend 1 0 8 0 0\n", 1, "'isend' takes PEER TAG COUNT [DATATYPE] (3 or 4 arguments)"),
    ("0 ISend 1 100\n", 1, "unknown action 'ISend'"),
    ("0 Ssend 1 0 100 6\n", 1, "unknown action 'Ssend' (SimGrid's recorder writes it"),
    ("0 gatherv 4 1 1 0 0 0\n", 1, "'gatherv' takes SEND RECV_COUNT*1 [ROOT [SEND_DATATYPE [RECV_DATATYPE]]] (2 "
                                    "to 5 arguments) in SimGrid >= 3.20's dialect (a count per rank: the trace has 1 "
                                    "ranks)"),
    ("0 init\n3 init\n0 alltoallv 1 1 1 1\n", 3, "(10 to 12 arguments)"),
    ("0 scan 4 0 1\n", 1, "hpcvar does not read 'scan' lines"),
    ("0 allgatherv 2 2 1e50 0 0\n1 init\n", 1, "'1e50' is not a count"),
    ("0 allgatherv 2 2 1e15 0 0\n1 init\n", 1, "the counts from '2' on, of 8-byte elements, add up to more than"),
    ("0 isend 1 0 1e15 0\n", 1, "'1e15' elements of 8 bytes are more than 1125899906842624 bytes"),
    ("0 isend 1 7 10 0\n0 wait 0 1 5\n", 2, "no pending isend/irecv from rank 0 to rank 1 with tag 5"),
    ("0 Isend 1 10\n0 wait\n0 wait\n", 3, "wait without a pending Isend/Irecv"),
    ("0 reduce 8 x 0\n", 1, "'x' is not an amount of flops"),
    ("0 allreduce 8\n", 1, "'allreduce' takes COUNT FLOPS [DATATYPE] (2 or 3 arguments)"),
    ("0 sleep 1\n0 send 1 2\n", 2, "'send' with 2 arguments is SimGrid <= 3.19's dialect, but line 1"),
    ("0 init\n0\n", 2, "a rank without an action"),
    ("x init\n", 1, "'x' is not a rank"),
]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(("text", "line", "words"), BAD, ids=[b[2][:40] for b in BAD])
def test_bad_lines_name_file_and_line(tmp_path, engine, text, line, words):
    f = tmp_path / "bad.tit"
    f.write_text(text)
    with pytest.raises(InputFileError) as e:
        read_tit(f, engine=engine)
    assert e.value.where == f"{f}:{line}", e.value.render()
    assert words in e.value.what, e.value.what


@pytest.mark.parametrize("engine", ENGINES)
def test_dialect_given_against_the_lines(tmp_path, engine):
    f = tmp_path / "t.tit"
    f.write_text("0 Isend 1 100\n0 wait\n")
    with pytest.raises(InputFileError, match="but --dialect 3.32 is SimGrid >= 3.20's") as e:
        read_tit(f, engine=engine, dialect="3.32")
    assert e.value.where == f"{f}:1"
    f.write_text("0 send 1 2 6\n1 recv 0 2 6\n")  # ambiguous without --dialect, read with it
    assert rows(f, 0, engine, dialect="3.19")[0][:4] == ("send", 1, 2, 0)
    assert rows(f, 0, engine, dialect="3.32")[0][:4] == ("send", 1, 6, 2)


@pytest.mark.parametrize("engine", ENGINES)
def test_v_collectives(tmp_path, engine):
    """A count per rank (the trace's ranks: its highest rank + 1): this rank's bytes, the root's the sum; reducescatter
    as a reduce of the sum to rank 0, a scatterv of each rank's count, then its flops (1 GHz)."""
    f = DATA / "vcollectives.tit"
    assert [r[:3] for r in rows(f, 0, engine)[1:]] == [
        ("gatherv", 2, 3 * 4), ("allgatherv", -1, 12 * 8), ("alltoallv", -1, 6 * 1), ("scatterv", 0, 60 * 4),
        ("reduce", 0, 6 * 8), ("scatterv", 0, 6 * 8), ("finalize", -1, 0)]
    assert [r[:3] for r in rows(f, 2, engine)[1:6]] == [
        ("gatherv", 2, 12 * 4), ("allgatherv", -1, 96), ("alltoallv", -1, 3), ("scatterv", 0, 30 * 4),
        ("reduce", 0, 48)]
    assert rows(f, 1, engine)[6][:3] == ("scatterv", 0, 2 * 8) and rows(f, 1, engine)[7][5] == 2000
    old = tmp_path / "old.tit"  # the names of SimGrid <= 3.19
    old.write_text(f.read_text().replace("gatherv", "gatherV").replace("allgatherV", "allGatherV")
                   .replace("alltoallv", "allToAllV").replace("scatterv", "scatterV")
                   .replace("reducescatter", "reduceScatter"))
    ev_old, ev_new = read_tit(old, engine=engine).events, read_tit(f, engine=engine).events
    assert ev_old.equals(ev_new)


def test_the_old_misreading_is_gone(tmp_path):
    """The bug of issue 29: SimGrid's current 'isend DST TAG COUNT DATATYPE' was read as 'Isend DST SIZE' (the tag
    as the size, a zero-byte message). A 4-rank ring of MPI_DOUBLEs, as smpirun -trace-ti writes it."""
    f = tmp_path / "ring.txt"
    f.write_text("".join(f"{r} init\n{r} irecv {(r - 1) % 4} 0 1000 0\n{r} isend {(r + 1) % 4} 0 1000 0\n"
                         f"{r} wait {(r - 1) % 4} {r} 0\n{r} wait {r} {(r + 1) % 4} 0\n{r} finalize\n"
                         for r in range(4)))
    for engine in ENGINES:
        ev = read_tit(f, engine=engine).events
        assert set(ev.loc[ev["op"].isin(["isend", "irecv", "wait"]), "bytes"]) == {8000}
