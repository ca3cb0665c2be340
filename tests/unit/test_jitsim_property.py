"""jitSim property tests: the C core (every sweep order: plain, subtree blocks, threads) equals the
Python reference integer for integer on random traces, workloads, alignments and task counts."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hpcvar.noise.trace import CpuTrace
from hpcvar.sim import jitter as J
from hpcvar.sim import jitter_ref as R


@st.composite
def cases(draw):
    cores = draw(st.integers(1, 3))
    cpus = []
    for c in range(cores):
        e = draw(st.integers(1, 8))
        d = draw(st.lists(st.sampled_from([0, 0, 1, 2, 7, 40, 300]), min_size=e, max_size=e))
        g = draw(st.lists(st.integers(0, 60), min_size=e, max_size=e))
        if sum(g) == 0:
            g[draw(st.integers(0, e - 1))] = draw(st.integers(1, 60))
        cpus.append(CpuTrace(c, np.array(d), np.array(g)))
    wl = J.Workload(work=draw(st.sampled_from([0, 1, 5, 33, 120, 700])), phases=draw(st.integers(1, 4)),
                    barrier=draw(st.sampled_from(["none", "tree", "tree"])), arity=draw(st.integers(1, 4)),
                    send=draw(st.sampled_from([0, 1, 4, 25])), recv=draw(st.sampled_from([0, 3, 11])),
                    lat_intra=draw(st.integers(0, 9)), lat_inter=draw(st.integers(0, 40)), cores_per_node=cores)
    mode = draw(st.sampled_from(["unsync", "sync", "cosched"]))
    lengths = [int(np.sum(c.duration + c.gap)) for c in cpus]
    window = draw(st.integers(1, 50))
    origin = draw(st.integers(0, 100))
    if mode == "cosched" and any(origin % window >= L for L in lengths):
        origin = 0
    return cpus, wl, J.Alignment(mode=mode, window=window, origin=origin), draw(st.integers(1, 70)), \
        draw(st.integers(0, 2**64 - 1)), draw(st.integers(1, 9)), draw(st.integers(1, 3))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_core_equals_reference(case):
    cpus, wl, align, n, seed, block, threads = case
    nt = J.NativeTraces(cpus)
    rts = [R.RefTrace(c.duration, c.gap) for c in cpus]
    offs = R.offsets(rts, n, align.mode, seed, 1, align.window, align.origin)
    ref = R.simulate(rts, offs, wl)
    # plain sweeps (a block larger than the tree), subtree blocks of `block` tasks, threads split finely
    for th, grain in ((1, 10**6), (1, block), (threads, 1)):
        out = J.simulate(nt, wl, n, align, seed, 1, per_task=True, keep_tasks=True, threads=th, grain=grain)
        assert out.offsets.tolist() == offs
        assert out.phase_end.tolist() == ref.phase_end, (th, grain)
        assert out.compute_end.tolist() == ref.compute_end, (th, grain)
        assert out.next_start.tolist() == ref.next_start, (th, grain)
        assert out.absorbed.tolist() == ref.absorbed, (th, grain)


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 5), st.integers(100, 3000), st.integers(1, 300), st.integers(0, 2**32))
def test_blocks_equal_plain_sweeps(arity, n, block, seed):
    """Larger trees on a longer trace: every block size gives the plain sweeps' integers."""
    rng = np.random.default_rng(seed)
    cpus = [CpuTrace(0, rng.choice([0, 3, 50, 400], 60), rng.integers(1, 900, 60))]
    nt = J.NativeTraces(cpus)
    wl = J.Workload(work=700, phases=3, barrier="tree", arity=arity, send=13, recv=11, lat_intra=3, lat_inter=29)
    al = J.Alignment("unsync")
    plain = J.simulate(nt, wl, n, al, seed, 0, per_task=True, keep_tasks=True, grain=10**9)
    blocked = J.simulate(nt, wl, n, al, seed, 0, per_task=True, keep_tasks=True, grain=block)
    assert plain.total > wl.phases * wl.work
    assert blocked.phase_end.tolist() == plain.phase_end.tolist()
    assert np.array_equal(blocked.compute_end, plain.compute_end)
    assert np.array_equal(blocked.next_start, plain.next_start)
    assert np.array_equal(blocked.absorbed, plain.absorbed)
    assert np.array_equal(blocked.last_start, plain.last_start)


@given(st.integers(0, 400), st.integers(1, 6), st.sampled_from(["tree", "none"]), st.integers(0, 9),
       st.integers(0, 9))
def test_busy_per_task_counts_every_operation(n, arity, barrier, send, recv):
    """The CPU work of each task (used for its waiting time) is W plus R and S per child and per parent link."""
    wl = J.Workload(work=7, phases=3, barrier=barrier, arity=arity, send=send, recv=recv)
    want = []
    for i in range(n):
        ops = 7
        if barrier == "tree":
            children = [c for c in range(arity * i + 1, arity * i + arity + 1) if c < n]
            ops += len(children) * (recv + send) + (send + recv if i > 0 else 0)
        want.append(ops * 3)
    assert wl.busy_per_task(n).tolist() == want
