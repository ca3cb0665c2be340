"""hpcvar trace cut: a section of a trace between collectives on MPI_COMM_WORLD (hpcvar.traces.cut)."""

from __future__ import annotations

import json

import pytest

from hpcvar.errors import InputFileError, UsageError
from hpcvar.sim.replay import Cluster, Simulator
from hpcvar.traces.cut import cut
from hpcvar.traces.parquet import Trace, make_events, write_parquet
from tests.conftest import run_cli

US = 1000


def _two_sections(cross: str = "") -> Trace:
    """Two tasks: section A (a 1 KiB message 0 -> 1), a barrier, section B (a ring exchange then 40 us of
    compute), a barrier, section C (a message 1 -> 0). ``cross``: 'message' posts B's receive on task 1
    before the first barrier; 'request' waits on an isend of A after the first barrier."""
    rows = []
    for t in (0, 1):
        ts = [0]

        def add(op, dur=1, t=t, ts=ts, **kw):
            rows.append({"task": t, "op": op, "t_start_ns": ts[0] * US, "t_end_ns": (ts[0] + dur) * US, **kw})
            ts[0] += dur

        add("init", 0)
        ts[0] += 10
        if cross == "request" and t == 0:
            add("isend", peer=1, bytes=1024, tag=1, req=7)
        else:
            add("send" if t == 0 else "recv", peer=1 - t, bytes=1024, tag=1)
        if cross == "message" and t == 1:
            add("recv", peer=0, bytes=8, tag=2)
        add("barrier", 5)
        ts[0] += 20  # compute at the start of section B
        if cross == "request" and t == 0:
            add("wait", req=7)
        if not (cross == "message" and t == 1):
            add("send" if t == 0 else "recv", peer=1 - t, bytes=8, tag=2)
        ts[0] += 40
        add("barrier", 5)
        add("recv" if t == 0 else "send", peer=1 - t, bytes=16, tag=3)
        add("finalize", 0)
    return Trace(events=make_events(rows), ntasks=2)


def test_cut_after_the_first_barrier_keeps_the_section_and_its_compute():
    part = cut(_two_sections(), after=0, before=-1)
    ev = part.events
    for t in (0, 1):
        rows = ev[ev["task"] == t]
        assert rows["op"].astype(str).tolist() == ["init", "send" if t == 0 else "recv", "finalize"]
        assert rows["seq"].tolist() == [0, 1, 2]
        # init at the end of the first barrier, finalize at the start of the second
        assert rows["t_start_ns"].iloc[0] == rows["t_end_ns"].iloc[0] == 16 * US
        assert rows["t_start_ns"].iloc[2] == 77 * US
    assert part.meta["cut"] == {"after_collective": 0, "before_collective": -1}
    # the replay keeps the 20 us before and the 40 us after the section's message
    res = Simulator(part, Cluster(nodes=2, cores_per_node=1, bandwidth=1e9, latency=1e-6), [0, 1]).run()
    assert max(res.total_s) == pytest.approx((20 + 1 + 0.008 + 40) * 1e-6, rel=1e-6)


def test_cut_after_only_and_before_only():
    after = cut(_two_sections(), after=-1).events
    assert after[after["task"] == 0]["op"].astype(str).tolist() == ["init", "recv", "finalize"]
    before = cut(_two_sections(), before=0).events
    assert before[before["task"] == 1]["op"].astype(str).tolist() == ["init", "recv", "finalize"]


def test_crossing_messages_and_requests_are_refused():
    with pytest.raises(InputFileError, match="a message crosses the cut.*from 0 to 1 .*tag 2"):
        cut(_two_sections("message"), after=0, before=1)
    with pytest.raises(InputFileError, match="a request crosses the cut.*task 0 waits on request 7"):
        cut(_two_sections("request"), after=0)


def test_bad_collective_numbers_are_usage_errors():
    with pytest.raises(UsageError, match="collective 2 does not exist: every task calls 2") as e:
        cut(_two_sections(), after=2)
    assert e.value.where == "--after-collective"
    with pytest.raises(UsageError, match="is not after"):
        cut(_two_sections(), after=1, before=0)
    with pytest.raises(UsageError, match="say where to cut"):
        cut(_two_sections())
    tr = _two_sections()
    tr.events = tr.events[~((tr.events["task"] == 1) & (tr.events["op"] == "barrier") & (tr.events["seq"] > 3))]
    with pytest.raises(InputFileError, match="different numbers of collectives"):
        cut(tr, after=0)


def test_cli_cut_and_show(tmp_path):
    src = write_parquet(_two_sections(), tmp_path / "app.trace")
    res = run_cli(["trace", "show", str(src)])
    assert "collectives on MPI_COMM_WORLD per task: 2" in res.stdout and "barrier" in res.stdout, res.stdout
    out = tmp_path / "b.trace"
    res = run_cli(["trace", "cut", str(src), "-o", str(out), "--after-collective", "0", "--before-collective", "1",
                   "--json"])
    assert res.returncode == 0, res.stderr
    s = json.loads(res.stdout)
    assert s["rows"] == 6 and s["ops"] == {"init": 2, "finalize": 2, "send": 1, "recv": 1}
    res = run_cli(["trace", "cut", str(src), "-o", str(out), "--after-collective", "9"])
    assert res.returncode != 0 and "--after-collective" in res.stderr and "0..1" in res.stderr
