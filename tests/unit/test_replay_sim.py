"""Application replay: hand-worked traces with exact expected times, collectives, bad input."""

from __future__ import annotations

import itertools

import pytest

from hpcvar.errors import InputFileError, UsageError
from hpcvar.sim.replay import Cluster, Simulator, e_abs, load_cluster, load_mapping, lower, mapping, measured
from hpcvar.traces import collectives
from hpcvar.traces.parquet import Trace, make_events

MS = 1_000_000  # ns


ENGINE = {"name": "python"}


@pytest.fixture(autouse=True, params=["python", "native"])
def engine(request):
    """Every hand-worked case runs on the Python reference and on the C core (libhv_replay.so)."""
    from hpcvar.sim import replay_native

    if request.param == "native" and not replay_native.available():
        pytest.skip("libhv_replay.so is not built (set HPCVAR_NATIVE_DIR to a CMake build's bin/)")
    ENGINE["name"] = request.param
    yield request.param
    ENGINE["name"] = "python"


def _sim(rows, ntasks, cluster, model="none", mapping_kind="rrn", eager=0, algo="binomial"):
    tr = Trace(make_events(rows), ntasks)
    engine = ENGINE["name"]
    return Simulator(tr, cluster, mapping(mapping_kind, ntasks, cluster), model=model, eager_bytes=eager,
                     algo=algo, engine=engine).run()


def _fanout_rows():
    rows = [dict(task=0, op="init"), dict(task=0, op="isend", peer=1, bytes=10**6),
            dict(task=0, op="isend", peer=2, bytes=10**6), dict(task=0, op="wait", req=1),
            dict(task=0, op="wait", req=2), dict(task=0, op="finalize")]
    for t in (1, 2):
        rows += [dict(task=t, op="init"), dict(task=t, op="recv", peer=0, bytes=10**6), dict(task=t, op="finalize")]
    return rows


def test_two_transfers_sharing_a_source_take_twice_as_long_under_maxmin():
    cl = Cluster(nodes=3, cores_per_node=1, bandwidth=1e9, latency=0.0)
    alone = _sim(_fanout_rows(), 3, cl, "none")
    shared = _sim(_fanout_rows(), 3, cl, "maxmin")
    assert alone.comm_s[1:] == pytest.approx([1e-3, 1e-3], rel=1e-12)
    assert shared.comm_s[1:] == pytest.approx([2e-3, 2e-3], rel=1e-12)
    assert shared.total_s == pytest.approx([2e-3] * 3, rel=1e-12)
    assert shared.avg_penalty[0] == pytest.approx(2.0)
    assert shared.conflicts[0] == {"out": 2}


def test_intra_node_messages_stay_out_of_the_conflict_graph():
    cl = Cluster(nodes=1, cores_per_node=3, bandwidth=1e9, latency=0.0, shm_bandwidth=4e9, shm_latency=1e-6)
    res = _sim(_fanout_rows(), 3, cl, "maxmin", "rrp")
    assert res.comm_s[1:] == pytest.approx([1e-6 + 0.25e-3] * 2, rel=1e-12)
    assert res.conflicts[0] == {}


def _ring_rows(n, nbytes, compute_ns):
    rows = []
    for t in range(n):
        rows += [dict(task=t, op="init", t_start_ns=0, t_end_ns=0),
                 dict(task=t, op="irecv", peer=(t - 1) % n, bytes=nbytes, t_start_ns=compute_ns,
                      t_end_ns=compute_ns),
                 dict(task=t, op="isend", peer=(t + 1) % n, bytes=nbytes, t_start_ns=compute_ns,
                      t_end_ns=compute_ns),
                 dict(task=t, op="wait", req=1, t_start_ns=compute_ns, t_end_ns=compute_ns + 2 * MS),
                 dict(task=t, op="wait", req=2, t_start_ns=compute_ns + 2 * MS, t_end_ns=compute_ns + 2 * MS),
                 dict(task=t, op="finalize", t_start_ns=compute_ns + 2 * MS, t_end_ns=compute_ns + 2 * MS)]
    return rows


@pytest.mark.parametrize("model", ["none", "maxmin", "gige"])
def test_ring_has_no_conflict_and_exact_times(model):
    cl = Cluster(nodes=4, cores_per_node=1, bandwidth=1e9, latency=10e-6)
    res = _sim(_ring_rows(4, 10**6, MS), 4, cl, model)
    # 1 ms compute, then 10 us latency + 1 MB / 1 GB/s: one outgoing and one incoming transfer per node
    assert res.total_s == pytest.approx([1e-3 + 10e-6 + 1e-3] * 4, rel=1e-12)
    assert res.comm_s == pytest.approx([10e-6 + 1e-3] * 4, rel=1e-12)
    m_total, m_comm = measured(Trace(make_events(_ring_rows(4, 10**6, MS)), 4))
    assert m_comm == pytest.approx([2e-3] * 4)
    assert e_abs(res.comm_s, m_comm) == pytest.approx([abs(1.01e-3 - 2e-3) / 2e-3 * 100] * 4)


def test_ring_on_two_nodes_rrp_vs_rrn():
    cl = Cluster(nodes=2, cores_per_node=2, bandwidth=1e9, latency=0.0, shm_bandwidth=1e10, shm_latency=0.0)
    rrp = _sim(_ring_rows(4, 10**6, 0), 4, cl, "maxmin", "rrp")
    rrn = _sim(_ring_rows(4, 10**6, 0), 4, cl, "maxmin", "rrn")
    # rrp: 1->2 and 3->0 cross nodes in opposite directions (no sharing), 0->1, 2->3 in shared memory
    assert rrp.total_s.max() == pytest.approx(1e-3, rel=1e-12)
    # rrn: every message crosses: node 0 sends two (0->1, 2->3) and receives two: each at half speed
    assert rrn.total_s.max() == pytest.approx(2e-3, rel=1e-12)


def test_barrier_dissemination_waits_for_the_last_arrival():
    rows = []
    for t in range(4):
        c = 5 * MS if t == 3 else MS
        rows += [dict(task=t, op="init", t_start_ns=0, t_end_ns=0),
                 dict(task=t, op="barrier", t_start_ns=c, t_end_ns=c + 1000),
                 dict(task=t, op="finalize", t_start_ns=c + 1000, t_end_ns=c + 1000)]
    cl = Cluster(nodes=4, cores_per_node=1, bandwidth=1e9, latency=10e-6)
    res = _sim(rows, 4, cl, "none", algo="recdoub")
    assert res.total_s == pytest.approx([5.01e-3, 5.01e-3, 5.02e-3, 5.0e-3], rel=1e-12)
    assert min(res.total_s) >= 5e-3  # nobody leaves before the last task arrives


OPS = ["barrier", "bcast", "reduce", "allreduce", "gather", "scatter", "allgather", "alltoall", "gatherv",
       "scatterv", "allgatherv", "alltoallv"]


@pytest.mark.parametrize("algo", collectives.ALGORITHMS)
def test_collective_decompositions_match_and_complete(algo):
    for op, n in itertools.product(OPS, range(1, 10)):
        root = n // 2
        sends, recvs = [], []
        for me in range(n):
            for s, r in collectives.steps(op, n, me, root, 8000, algo):
                sends += [(me, p) for p, _ in s]
                recvs += [(p, me) for p, _ in r]
        assert sorted(sends) == sorted(recvs), (op, n, algo)
        rows = []
        for t in range(n):
            rows += [dict(task=t, op="init"), dict(task=t, op=op, peer=root, bytes=8000), dict(task=t, op="finalize")]
        res = _sim(rows, n, Cluster(n, 1, 1e9, 1e-6), "maxmin", algo=algo, eager=1024)
        assert n == 1 or res.total_s.max() > 0


def test_binomial_bcast_of_8_takes_three_rounds():
    rows = []
    for t in range(8):
        rows += [dict(task=t, op="init"), dict(task=t, op="bcast", peer=0, bytes=10**6), dict(task=t, op="finalize")]
    res = _sim(rows, 8, Cluster(8, 1, 1e9, 0.0), "none")
    # rendezvous sends are sequential: root sends to 4, 2, 1; the deepest leaf (7) gets it after 3 rounds
    assert res.total_s[7] == pytest.approx(3e-3, rel=1e-12)
    assert res.total_s[0] == pytest.approx(3e-3, rel=1e-12)


def test_unmatched_send_names_rank_and_seq():
    rows = [dict(task=0, op="init"), dict(task=0, op="isend", peer=1, bytes=8), dict(task=0, op="finalize"),
            dict(task=1, op="init"), dict(task=1, op="finalize")]
    with pytest.raises(InputFileError, match="unmatched send: rank 0 seq 1"):
        _sim(rows, 2, Cluster(2, 1, 1e9, 0.0), eager=1024)


def test_unmatched_receive_names_rank_and_seq():
    rows = [dict(task=0, op="init"), dict(task=0, op="finalize"),
            dict(task=1, op="init"), dict(task=1, op="recv", peer=0, bytes=8), dict(task=1, op="finalize")]
    with pytest.raises(InputFileError, match="rank 1 seq 1"):
        _sim(rows, 2, Cluster(2, 1, 1e9, 0.0))


def test_unknown_model_and_algorithm():
    tr = Trace(make_events(_fanout_rows()), 3)
    cl = Cluster(3, 1, 1e9, 0.0)
    with pytest.raises(UsageError, match="unknown model"):
        Simulator(tr, cl, [0, 1, 2], model="token-ring")
    with pytest.raises(UsageError, match="unknown collective algorithm"):
        lower(tr, "bruck")


def test_mappings(tmp_path):
    cl = Cluster(nodes=2, cores_per_node=3, bandwidth=1e9, latency=0.0)
    assert mapping("rrn", 5, cl) == [0, 1, 0, 1, 0]
    assert mapping("rrp", 5, cl) == [0, 0, 0, 1, 1]
    r1, r2 = mapping("random", 6, cl, seed=3), mapping("random", 6, cl, seed=3)
    assert r1 == r2 and sorted(r1) == [0, 0, 0, 1, 1, 1]
    with pytest.raises(UsageError, match="do not fit"):
        mapping("rrn", 7, cl)
    f = tmp_path / "map.txt"
    f.write_text("0 1\n1 0\n# task 2 forgotten\n")
    with pytest.raises(InputFileError, match=r"does not cover tasks \[2\]"):
        load_mapping(str(f), 3, cl)
    f.write_text("0 1\n1 0\n2 5\n")
    with pytest.raises(InputFileError, match="node 5") as e:
        load_mapping(str(f), 3, cl)
    assert e.value.line == 3
    f.write_text("0 1\n1 0\n2 0\n")
    assert load_mapping(str(f), 3, cl) == [1, 0, 0]


def test_cluster_file(tmp_path):
    f = tmp_path / "c.txt"
    f.write_text("nodes 2\ncores_per_node 4\nbandwidth 1GB/s\nlatency 10us\nshm_latency 100ns\nlink 0 1 500MB/s 20us\n")
    c = load_cluster(str(f))
    assert (c.nodes, c.cores_per_node) == (2, 4) and c.shm_latency == pytest.approx(1e-7)
    assert c.link(1, 0) == pytest.approx((5e8, 2e-5))
    # a bare bandwidth or latency is refused with the remedy (bits or bytes? seconds or microseconds?)
    for bad, what in (("bandwidth 1e9", "'1e9' has no unit"), ("latency 5", "'5' has no unit"),
                      ("link 0 1 1gbit 2", "'2' has no unit")):
        f.write_text(f"nodes 2\ncores_per_node 1\nbandwidth 1gbit\nlatency 1us\n{bad}\n")
        with pytest.raises(InputFileError) as e:
            load_cluster(str(f))
        assert what in e.value.what and e.value.line == 5 and "e.g." in e.value.todo
    f.write_text("nodes 2\nbandwidth fast\n")
    with pytest.raises(InputFileError) as e:
        load_cluster(str(f))
    assert e.value.line == 2


def test_per_link_bandwidth_is_used():
    cl = Cluster(nodes=3, cores_per_node=1, bandwidth=1e9, latency=0.0, links={(0, 2): (5e8, 0.0)})
    res = _sim(_fanout_rows(), 3, cl, "none")
    assert res.comm_s[1:] == pytest.approx([1e-3, 2e-3], rel=1e-12)


def test_jitter_stretches_compute_with_jitsim_semantics(tmp_path):
    from hpcvar.sim.replay_jitter import jitter_factory as _jitter

    f = tmp_path / "j.txt"
    f.write_text("100 900\n")  # 100 ns of jitter every 1000 ns (cycles at 1 GHz): 10% noise
    rows = [dict(task=0, op="init", t_start_ns=0, t_end_ns=0),
            dict(task=0, op="finalize", t_start_ns=9000, t_end_ns=9000)]
    tr = Trace(make_events(rows), 1)
    cl = Cluster(1, 1, 1e9, 0.0)
    plain = Simulator(tr, cl, [0]).run().total_s[0]
    assert plain == pytest.approx(9e-6)
    for replica in range(5):
        res = Simulator(tr, cl, [0], jitter=_jitter(str(f), 1e9, "unsync")(1, 7, replica)).run()
        # 9000 ns of work cross 9 or 10 detours of 100 ns, whatever the offset
        assert 9.9e-6 - 1e-15 <= res.total_s[0] <= 10.0e-6 + 1e-15


def test_measured_mpi_time_is_a_union_of_the_call_intervals():
    from hpcvar.sim.replay import mpi_time_s

    # a Waitall of 3 requests is 3 wait rows with the call's times; a Sendrecv is 2 rows: count each call once
    rows = [dict(task=0, op="init", t_start_ns=0, t_end_ns=0),
            dict(task=0, op="irecv", peer=1, t_start_ns=10, t_end_ns=20),
            dict(task=0, op="wait", req=1, t_start_ns=30, t_end_ns=130),
            dict(task=0, op="wait", req=1, t_start_ns=30, t_end_ns=130),
            dict(task=0, op="wait", req=1, t_start_ns=30, t_end_ns=130),
            dict(task=0, op="sendrecv", peer=1, t_start_ns=200, t_end_ns=300),
            dict(task=0, op="sendrecv_recv", peer=1, t_start_ns=200, t_end_ns=300),
            dict(task=0, op="finalize", t_start_ns=300, t_end_ns=1000),
            dict(task=1, op="init", t_start_ns=0, t_end_ns=0),
            dict(task=1, op="barrier", t_start_ns=5, t_end_ns=50),
            dict(task=1, op="finalize", t_start_ns=50, t_end_ns=50)]
    tr = Trace(make_events(rows), 3)
    assert list(mpi_time_s(tr.events, 3)) == pytest.approx([210e-9, 45e-9, 0.0], abs=1e-18)
    total, comm = measured(tr)
    assert list(comm) == pytest.approx([210e-9, 45e-9, 0.0], abs=1e-18)
    assert list(total) == pytest.approx([1000e-9, 50e-9, 0.0], abs=1e-18)


def test_rendezvous_latency_is_paid_above_the_eager_limit_only():
    """A 1 MB message at 1 GB/s with 10 us latency: 1.010 ms when eager; 1.040 ms above the eager limit with a
    30 us rendezvous latency between nodes; inside a node 2 us + 0.25 ms, plus 5 us when rendezvous."""
    rows = [dict(task=0, op="init"), dict(task=0, op="send", peer=1, bytes=10**6), dict(task=0, op="finalize"),
            dict(task=1, op="init"), dict(task=1, op="recv", peer=0, bytes=10**6), dict(task=1, op="finalize")]
    net = Cluster(nodes=2, cores_per_node=1, bandwidth=1e9, latency=10e-6, rndv_latency=30e-6,
                  shm_rndv_latency=5e-6)
    assert _sim(rows, 2, net, eager=2 * 10**6).comm_s[1] == pytest.approx(1.010e-3, rel=1e-12)
    assert _sim(rows, 2, net, eager=65536).comm_s[1] == pytest.approx(1.040e-3, rel=1e-12)
    shm = Cluster(nodes=1, cores_per_node=2, bandwidth=1e9, latency=10e-6, shm_bandwidth=4e9, shm_latency=2e-6,
                  rndv_latency=30e-6, shm_rndv_latency=5e-6)
    assert _sim(rows, 2, shm, mapping_kind="rrp", eager=2 * 10**6).comm_s[1] == pytest.approx(0.252e-3, rel=1e-12)
    assert _sim(rows, 2, shm, mapping_kind="rrp", eager=65536).comm_s[1] == pytest.approx(0.257e-3, rel=1e-12)


def test_cluster_file_takes_rendezvous_latencies(tmp_path):
    f = tmp_path / "c.txt"
    f.write_text("nodes 2\ncores_per_node 1\nbandwidth 1gbit\nlatency 50us\nrndv_latency 12us\n"
                 "shm_rndv_latency 1.1us\n")
    c = load_cluster(str(f))
    assert (c.rndv_latency, c.shm_rndv_latency) == pytest.approx((12e-6, 1.1e-6))
    assert c.send_buffer == 0.0
    f.write_text("nodes 2\ncores_per_node 1\nbandwidth 1gbit\nlatency 50us\nsend_buffer 512KiB\n")
    assert load_cluster(str(f)).send_buffer == 512 * 1024
    f.write_text("nodes 2\ncores_per_node 1\nbandwidth 1gbit\nlatency 50us\nsend_buffer 1.5\n")
    with pytest.raises(InputFileError, match=r"send_buffer: '1.5' is not a whole number of bytes") as e:
        load_cluster(str(f))
    assert e.value.line == 5
