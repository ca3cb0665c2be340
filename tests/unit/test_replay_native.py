"""The C replay core (native/sim/replay.c) against the Python reference engine: same times, same errors."""

from __future__ import annotations

import numpy as np
import pytest

from hpcvar.errors import InputFileError, UsageError
from hpcvar.sim import replay_native
from hpcvar.sim.app import Cluster, Simulator, lower, mapping
from hpcvar.traces.native import Trace, make_events

pytestmark = pytest.mark.skipif(not replay_native.available(),
                                reason="libhv_replay.so is not built (set HPCVAR_NATIVE_DIR to a CMake build's bin/)")

COLLS = ["barrier", "bcast", "reduce", "allreduce", "gather", "scatter", "allgather", "alltoall", "gatherv",
         "allgatherv", "alltoallv", "scatterv"]


def random_rows(rng: np.random.Generator, n: int, rounds: int) -> list[dict]:
    """A trace that cannot deadlock: rounds of nonblocking exchanges (random pairs, random sizes around
    the eager limit), blocking sends to a higher rank, sendrecv rings, and collectives, with random compute."""
    rows: list[list[dict]] = [[dict(task=t, op="init", t_start_ns=0, t_end_ns=0)] for t in range(n)]
    clock = [0] * n

    def add(t, **kw):
        gap = int(rng.integers(0, 3000)) if rng.random() < 0.7 else 0
        clock[t] += gap
        dur = int(rng.integers(0, 2000))
        rows[t].append(dict(task=t, t_start_ns=clock[t], t_end_ns=clock[t] + dur, **kw))
        clock[t] += dur
        return len(rows[t]) - 1

    for _ in range(rounds):
        kind = rng.integers(0, 4)
        if kind == 0:  # random messages, posted nonblocking, then waited for in random order
            msgs = [(int(a), int(b)) for a, b in rng.integers(0, n, (int(rng.integers(1, 2 * n)), 2)) if a != b]
            reqs: dict[int, list[int]] = {t: [] for t in range(n)}
            for s, d in msgs:
                nb = int(rng.choice([0, 100, 4000, 70_000, 300_000]))
                tag = int(rng.integers(0, 2))
                reqs[d].append(add(d, op="irecv", peer=s, bytes=nb, tag=tag))
                reqs[s].append(add(s, op="isend", peer=d, bytes=nb, tag=tag))
            for t in range(n):
                for r in rng.permutation(reqs[t]).tolist():
                    add(t, op="wait", req=int(r))
        elif kind == 1:
            op = str(rng.choice(COLLS))
            root = int(rng.integers(0, n))
            nb = int(rng.choice([8, 5000, 200_000]))
            for t in range(n):
                add(t, op=op, peer=root, bytes=nb)
        elif kind == 2:  # sendrecv around a ring
            nb = int(rng.choice([64, 100_000]))
            for t in range(n):
                add(t, op="sendrecv", peer=(t + 1) % n, bytes=nb, tag=5)
                add(t, op="sendrecv_recv", peer=(t - 1) % n, bytes=nb, tag=5)
        else:  # blocking send from lower to higher rank, receives posted first by the higher one
            a, b = sorted(int(x) for x in rng.choice(n, 2, replace=False))
            nb = int(rng.choice([10, 150_000]))
            r = add(b, op="irecv", peer=a, bytes=nb, tag=9)
            add(a, op="send", peer=b, bytes=nb, tag=9)
            add(b, op="wait", req=r)
    for t in range(n):
        add(t, op="finalize")
    return [r for lst in rows for r in lst]


def both(tr, cl, node_of, model, **kw):
    py = Simulator(tr, cl, node_of, model=model, engine="python", **kw).run()
    nat_sim = Simulator(tr, cl, node_of, model=model, engine="native", **kw)
    assert nat_sim.engine == "native"
    return py, nat_sim.run()


def same(py, nat):
    np.testing.assert_allclose(nat.total_s, py.total_s, rtol=1e-9, atol=0)
    np.testing.assert_allclose(nat.comm_s, py.comm_s, rtol=1e-9, atol=1e-18)
    np.testing.assert_allclose(nat.avg_penalty, py.avg_penalty, rtol=1e-9)
    assert nat.conflicts == py.conflicts
    assert nat.events == py.events
    assert set(nat.row_start) == set(py.row_start)
    for r, t0 in py.row_start.items():
        assert nat.row_start[r] == pytest.approx(t0, rel=1e-9, abs=1e-18)
        if py.row_end.get(r) is None:
            assert nat.row_end.get(r) is None
        else:
            assert nat.row_end[r] == pytest.approx(py.row_end[r], rel=1e-9, abs=1e-18)


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("model", ["none", "maxmin", "gige"])
def test_random_traces_give_identical_results(seed, model):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 8))
    tr = Trace(make_events(random_rows(rng, n, 12)), n)
    nodes = int(rng.integers(1, n + 1))
    cl = Cluster(nodes, -(-n // nodes), 1e9, float(rng.choice([0.0, 2e-6])), 5e9, 5e-7,
                 links={(0, nodes - 1): (4e8, 1e-5)} if nodes > 1 and seed % 2 else {})
    for mp in ("rrn", "rrp", "random"):
        node_of = mapping(mp, n, cl, seed)
        algo = ("binomial", "recdoub", "ring")[seed % 3]
        params = {"beta": 0.8, "gamma_in": 0.05, "gamma_out": 0.2} if model == "gige" and seed % 2 else None
        same(*both(tr, cl, node_of, model, algo=algo, eager_bytes=65536, params=params))


def test_hand_worked_fanout_under_maxmin_and_gige():
    rows = [dict(task=0, op="init"), dict(task=0, op="isend", peer=1, bytes=10**6),
            dict(task=0, op="isend", peer=2, bytes=10**6), dict(task=0, op="wait", req=1),
            dict(task=0, op="wait", req=2), dict(task=0, op="finalize")]
    for t in (1, 2):
        rows += [dict(task=t, op="init"), dict(task=t, op="recv", peer=0, bytes=10**6), dict(task=t, op="finalize")]
    tr = Trace(make_events(rows), 3)
    cl = Cluster(3, 1, 1e9, 0.0)
    py, nat = both(tr, cl, [0, 1, 2], "maxmin", eager_bytes=0)
    same(py, nat)
    assert nat.comm_s[1:] == pytest.approx([2e-3, 2e-3], rel=1e-12)
    py, nat = both(tr, cl, [0, 1, 2], "gige", eager_bytes=0)
    same(py, nat)
    assert nat.comm_s[1:] == pytest.approx([1.5e-3, 1.5e-3], rel=1e-12)  # penalty 2 x 0.75


def test_native_core_reports_unmatched_and_deadlock_like_python():
    cl = Cluster(2, 1, 1e9, 0.0)
    rows = [dict(task=0, op="init"), dict(task=0, op="isend", peer=1, bytes=8), dict(task=0, op="finalize"),
            dict(task=1, op="init"), dict(task=1, op="finalize")]
    tr = Trace(make_events(rows), 2)
    for engine in ("python", "native"):
        with pytest.raises(InputFileError,
                           match=r"unmatched send: rank 0 seq 1 to rank 1 has no matching receive \(1 unmatched"):
            Simulator(tr, cl, [0, 1], eager_bytes=1024, engine=engine).run()
    rows = [dict(task=0, op="init"), dict(task=0, op="finalize"),
            dict(task=1, op="init"), dict(task=1, op="recv", peer=0, bytes=8), dict(task=1, op="finalize")]
    tr = Trace(make_events(rows), 2)
    for engine in ("python", "native"):
        with pytest.raises(InputFileError, match="blocked at rank 1 seq 1"):
            Simulator(tr, cl, [0, 1], engine=engine).run()


def test_engine_choice():
    rows = [dict(task=0, op="init"), dict(task=0, op="finalize")]
    tr = Trace(make_events(rows), 1)
    cl = Cluster(1, 1, 1e9, 0.0)
    assert Simulator(tr, cl, [0], model="maxmin").engine == "native"
    assert Simulator(tr, cl, [0], model="myrinet").engine == "python"
    assert Simulator(tr, cl, [0], jitter=lambda t, s, d: d).engine == "python"
    with pytest.raises(UsageError, match="does not do model 'myrinet'"):
        Simulator(tr, cl, [0], model="myrinet", engine="native")
    with pytest.raises(UsageError, match="unknown replay engine"):
        Simulator(tr, cl, [0], engine="gpu")


def test_one_encoding_serves_several_mappings():
    rng = np.random.default_rng(99)
    tr = Trace(make_events(random_rows(rng, 6, 10)), 6)
    ops = lower(tr)[0]
    enc = replay_native.encode(ops)
    cl = Cluster(3, 2, 1e9, 1e-6)
    for mp in ("rrn", "rrp"):
        node_of = mapping(mp, 6, cl)
        py = Simulator(tr, cl, node_of, "maxmin", lowered=ops, engine="python").run()
        nat = Simulator(tr, cl, node_of, "maxmin", lowered=ops, encoded=enc, engine="native").run()
        same(py, nat)
