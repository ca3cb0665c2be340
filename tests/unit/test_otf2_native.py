"""The compiled OTF2 reader (native/sim/otf2_read.c on libotf2) against the Python reference (the otf2 package):
the same events frame and ntasks on the archive of tests/unit/test_replay_traces.py and on random archives
written with the otf2 package (communicators with their own groups, Sendrecv, nonblocking requests, rooted
and unknown collectives, missing Init/Finalize, nested and unclosed calls, threads, records outside calls,
another timer resolution and clock offset). Skipped without libhv_otf2.so (hpcvar built without libotf2:
apt-get install libotf2-trace-dev, then make install) or without the otf2 package (it writes the archives)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hpcvar.errors import InputFileError
from hpcvar.traces import otf2_native
from hpcvar.traces.otf2_import import read_otf2
from tests.conftest import assert_same_import

otf2 = pytest.importorskip("otf2", reason="the optional otf2 package is not installed (pip install 'hpcvar[otf2]')")
pytestmark = pytest.mark.skipif(not otf2_native.available(),
                                reason="libhv_otf2.so is not built: hpcvar was built without libotf2 (apt-get install "
                                       "libotf2-trace-dev, then make install)")


def assert_same(anchor):
    return assert_same_import(read_otf2, anchor)


def test_the_unit_test_archive(tmp_path):
    from tests.unit.test_replay_traces import _write_otf2

    res = assert_same(_write_otf2(tmp_path / "arch"))
    assert res[0] == "ok" and res[2] == 2 and len(res[1]) == 12


# ---- random archives ---------------------------------------------------------------------------------------

CALLS = ["MPI_Send", "MPI_Recv", "MPI_Sendrecv", "MPI_Isend", "MPI_Irecv", "MPI_Wait", "MPI_Waitall", "MPI_Bcast",
         "MPI_Allreduce", "MPI_Gatherv", "MPI_Scan", "MPI_Alltoall", "user_fn", "nested", "stray", "unclosed"]


@st.composite
def programs(draw):
    n = draw(st.integers(1, 4))
    ranks = [dict(init=draw(st.sampled_from(["MPI_Init", "MPI_Init_thread", None])),
                  calls=draw(st.lists(st.sampled_from(CALLS), max_size=12)), finalize=draw(st.booleans()))
             for _ in range(n)]
    return dict(ranks=ranks, res=draw(st.sampled_from([1_000_000_000, 2_400_000_000, 1_000_000, 3])),
                offset=draw(st.sampled_from([0, 12345, 10**12])), thread=draw(st.booleans()),
                accel=draw(st.booleans()), seed=draw(st.integers(0, 2**16)))


class _Writer:
    """Writes one rank's calls: Enter, the MPI records, Leave, at increasing times."""

    def __init__(self, w, rank, n, comms, reg, rnd):
        self.w, self.rank, self.n, self.comms, self.reg, self.rnd = w, rank, n, comms, reg, rnd
        self.t, self.reqs = 10_000 + 777 * rank, []

    def tick(self):
        self.t += self.rnd.randint(1, 5000)
        return self.t

    def call(self, name, records=()):
        self.w.enter(self.tick(), self.reg[name])
        for rec in records:
            rec(self.tick())
        self.w.leave(self.tick(), self.reg[name])

    def peer(self):
        return self.rnd.choice([*range(self.n + 1), 0xFFFFFFFF])

    def comm(self):
        return self.rnd.choice(self.comms)

    def write(self, call):
        w, rnd = self.w, self.rnd
        size, tag = rnd.choice([0, 8, 4096, 1 << 20]), rnd.randint(0, 99)
        if call in ("MPI_Send", "MPI_Recv", "MPI_Sendrecv"):
            send = [lambda t: w.mpi_send(t, self.peer(), self.comm(), tag, size)]
            recv = [lambda t: w.mpi_recv(t, self.peer(), self.comm(), tag, size)]
            self.call(call, {"MPI_Send": send, "MPI_Recv": recv, "MPI_Sendrecv": send + recv}[call])
        elif call in ("MPI_Isend", "MPI_Irecv"):
            req = rnd.randint(0, 2**40)
            self.reqs.append((call, req))
            rec = (lambda t: w.mpi_isend(t, self.peer(), self.comm(), tag, size, req)) if call == "MPI_Isend" \
                else (lambda t: w.mpi_irecv_request(t, req))
            self.call(call, [rec])
        elif call in ("MPI_Wait", "MPI_Waitall"):
            self.wait(call, size, tag)
        elif call in ("MPI_Bcast", "MPI_Allreduce", "MPI_Gatherv", "MPI_Scan", "MPI_Alltoall"):
            from otf2.enums import CollectiveOp

            op = getattr(CollectiveOp, call[4:].upper())
            recv = rnd.choice([0, 64])
            self.call(call, [lambda t: w.mpi_collective_begin(t),
                             lambda t: w.mpi_collective_end(t, op, self.comm(), self.peer(), size, recv)])
        else:
            self.odd(call, size, tag)

    def wait(self, call, size, tag):
        w, rnd = self.w, self.rnd
        k = len(self.reqs) if call == "MPI_Waitall" else min(1, len(self.reqs))
        done = [self.reqs.pop(rnd.randrange(len(self.reqs))) for _ in range(k)] or [("MPI_Isend", 999)]
        recs = [(lambda t, req=req: w.mpi_isend_complete(t, req)) if kind == "MPI_Isend" else
                (lambda t, req=req: w.mpi_irecv(t, self.peer(), self.comm(), tag, size, req)) for kind, req in done]
        self.call(call, recs)

    def odd(self, call, size, tag):
        w = self.w
        if call == "user_fn":
            self.call("user_fn", [lambda t: w.mpi_send(t, 0, self.comm(), tag, size)])
        elif call == "nested":  # an MPI call inside another: the inner one replaces the outer
            w.enter(self.tick(), self.reg["MPI_Wait"])
            self.call("MPI_Send", [lambda t: w.mpi_send(t, self.peer(), self.comm(), tag, size)])
            w.leave(self.tick(), self.reg["MPI_Wait"])
        elif call == "stray":  # a record outside any call
            w.mpi_send(self.tick(), self.peer(), self.comm(), tag, size)
        elif call == "unclosed":
            w.enter(self.tick(), self.reg["MPI_Recv"])
            w.mpi_recv(self.tick(), self.peer(), self.comm(), tag, size)


def write_archive(path, prog):
    import random

    from otf2.definitions import ClockProperties
    from otf2.enums import GroupType, LocationGroupType, Paradigm
    from otf2.registry import DefinitionRegistry

    rnd = random.Random(prog["seed"])
    defs = DefinitionRegistry()
    defs.strings.create("")
    defs.clock_properties = ClockProperties(None, timer_resolution=prog["res"], global_offset=prog["offset"])
    n = len(prog["ranks"])
    with otf2.writer.open(str(path), definitions=defs) as trace:
        d = trace.definitions
        root = d.system_tree_node("node")
        if prog["accel"]:  # not a process: its events are not read
            g = d.location_group("GPU", system_tree_parent=root, location_group_type=LocationGroupType.ACCELERATOR)
            extra = trace.event_writer("stream", group=g)
        groups = [d.location_group(f"Rank {r}", system_tree_parent=root) for r in range(n)]
        ws = [trace.event_writer(f"Master {r}", group=groups[r]) for r in range(n)]
        d.group("locs", group_type=GroupType.COMM_LOCATIONS, paradigm=Paradigm.MPI, members=[w._location for w in ws])
        world = d.comm("MPI_COMM_WORLD", group=d.group("world", group_type=GroupType.COMM_GROUP,
                                                           paradigm=Paradigm.MPI, members=list(range(n))))
        rev = d.comm("rev", group=d.group("rev", group_type=GroupType.COMM_GROUP, paradigm=Paradigm.MPI,
                                          members=list(range(n))[::-1][: max(1, n - 1)]))
        self_comm = d.comm("self", group=d.group("self", group_type=GroupType.COMM_SELF, paradigm=Paradigm.MPI,
                                                 members=[]))
        reg = {c: d.region(c) for c in CALLS + ["MPI_Init", "MPI_Init_thread", "MPI_Finalize"]}
        if prog["thread"]:
            th = trace.event_writer("Thread 1", group=groups[0])
            _Writer(th, 0, n, [world], reg, rnd).write("MPI_Send")
        if prog["accel"]:
            _Writer(extra, 0, n, [world], reg, rnd).write("MPI_Send")
        for r, spec in enumerate(prog["ranks"]):
            wr = _Writer(ws[r], r, n, [world, world, rev, self_comm], reg, rnd)
            if spec["init"]:
                wr.call(spec["init"])
            for call in spec["calls"]:
                wr.write(call)
            if spec["finalize"]:
                wr.call("MPI_Finalize")
    return path / "traces.otf2"


@settings(max_examples=40, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
@given(prog=programs())
def test_random_archives_same_frames(tmp_path_factory, prog):
    assert_same(write_archive(tmp_path_factory.mktemp("otf2") / "arch", prog))


def test_errors_name_the_archive(tmp_path):
    from tests.unit.test_replay_traces import _write_otf2

    anchor = _write_otf2(tmp_path / "arch")
    (tmp_path / "arch" / "traces" / "0.def").write_bytes(b"\x03B")  # truncated local definitions
    with pytest.raises(InputFileError) as e:
        read_otf2(anchor, "native")
    assert "traces.otf2" in e.value.where and "cannot" in e.value.what
    (tmp_path / "arch" / "traces.def").write_bytes(b"")
    with pytest.raises(InputFileError, match="cannot open the OTF2 archive"):
        read_otf2(anchor, "native")
    with pytest.raises(InputFileError, match="no such OTF2 anchor file"):
        read_otf2(tmp_path / "none.otf2", "native")
