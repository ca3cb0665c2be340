"""hpcvar screen without MPI: the outlier rule, the pair plans, the attribution of slow links, validity, costs,
the answer, and the kind's tables from a raw file written as hv_screen writes it."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from hpcvar.answer import DEGRADED, OK, UNRELIABLE, combine, decide
from hpcvar.screen import analysis as an
from hpcvar.screen import plan
from hpcvar.stats.outliers import flag, modified_z

HOSTS = ["n1", "n2", "n3", "n4", "n5", "n6"]


# ---- the outlier rule --------------------------------------------------------------------------------------
def test_modified_z_uses_the_floor_when_the_mad_is_tiny():
    x = np.array([100.0, 100.0, 100.0, 96.0])
    assert modified_z(x)[3] == 0.0 or abs(modified_z(x)[3]) > 100  # MAD 0: every deviation is infinite or 0
    z = modified_z(x, floor=0.02)  # spread 2% of the median = 2
    assert z[3] == pytest.approx(0.6745 * -4 / 2)


def test_flag_needs_the_bad_side_the_threshold_and_a_ci_apart_from_the_rest():
    v = np.array([190.0, 191, 189, 190, 95])
    lo, hi = v - 1, v + 1
    f = flag(v, lo, hi, higher_is_worse=False, floor=0.02)
    assert [x.outlier for x in f] == [False, False, False, False, True]
    assert f[4].rest_median == pytest.approx(190.0) and f[4].z < -3.5
    # the same node faster is no fault (the bad side of a bandwidth is low)
    assert not any(x.outlier for x in flag(np.array([190.0, 191, 189, 190, 380]), lo, hi, False, 0.02))
    # its CI reaches the rest's: a candidate, not an outlier
    wide = flag(v, np.array([189, 190, 188, 189, 60.0]), np.array([191, 192, 190, 191, 189.5]), False, 0.02)
    assert wide[4].candidate and not wide[4].outlier
    # a deviation below 5.19 x the floor is not even a candidate
    assert not flag(np.array([100.0, 100, 100, 95]), np.full(4, 0.0), np.full(4, 0.0), False, 0.01)[3].candidate
    assert flag(np.array([100.0, 100, 100, 94]), np.full(4, 0.0), np.full(4, 0.0), False, 0.01)[3].candidate
    # fewer than 3 items: nothing to compare with
    assert not any(x.candidate for x in flag(np.array([1.0, 100]), np.zeros(2), np.zeros(2), True))


# ---- pair plans --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("n", [2, 3, 4, 5, 8, 13, 64])
def test_all_pairs_in_rounds_of_disjoint_pairs(n):
    rounds = plan.plan_rounds(n, "all")
    pairs = [p for r in rounds for p in r]
    assert len(pairs) == len(set(pairs)) == n * (n - 1) // 2
    assert len(rounds) == (n - 1 if n % 2 == 0 else n)
    for r in rounds:
        ends = [x for p in r for x in p]
        assert len(ends) == len(set(ends))  # no node twice in a round


@pytest.mark.parametrize("n,k", [(4, 1), (7, 2), (65, 4), (100, 3)])
def test_random_pairs_cover_every_node_k_times_in_disjoint_rounds(n, k):
    rounds = plan.plan_rounds(n, "random", k, seed=3)
    assert min(plan.coverage(rounds, n)) >= k
    pairs = [p for r in rounds for p in r]
    assert len(pairs) == len(set(pairs))
    for r in rounds:
        ends = [x for p in r for x in p]
        assert len(ends) == len(set(ends))
    assert plan.plan_rounds(n, "random", k, seed=3) == rounds  # seeded


def test_ring_and_auto_and_bad_plans():
    assert [p for r in plan.plan_rounds(5, "ring") for p in r] == [(0, 1), (2, 3), (1, 2), (3, 4), (0, 4)]
    assert len([p for r in plan.plan_rounds(64, "auto") for p in r]) == 64 * 63 // 2
    assert min(plan.coverage(plan.plan_rounds(65, "auto"), 65)) >= plan.DEFAULT_RANDOM_K
    from hpcvar.errors import UsageError

    for bad in ("random:0", "random", "pairs", "ring:2"):
        with pytest.raises(UsageError) as e:
            plan.parse_pairs(bad)
        assert e.value.where == "--pairs"


# ---- analysis on synthetic tables -------------------------------------------------------------------------
def tables(n=4, slow_link: dict | None = None, slow_pair=None, noisy=None, loaded=None, seed=0,
           pair_load: float = 0.0, slow_lat: tuple | None = None, slow_recv: dict | None = None,
           fast: tuple | None = None) -> dict:
    """The screen's tables for n nodes on separate machines: links at 190 Mbit/s (a node in ``slow_link`` at its
    factor both ways; a node in ``slow_recv`` at its factor in what it receives: cross traffic into it; ``fast``:
    (src, dst, iteration) at the full rate), 20 us latency, 2% noise (``noisy`` at 10%), others' load 1%
    (``loaded`` nodes 40%)."""
    rng = np.random.default_rng(seed)
    hosts = HOSTS[:n]
    slow_link, noisy, loaded, slow_recv = slow_link or {}, noisy or set(), loaded or set(), slow_recv or {}
    nodes = pd.DataFrame({"node": range(n), "host": hosts, "boot_id": [f"b{i}" for i in range(n)], "cpus": 2,
                          "turn": 0})
    load, win, kern, bw, lat = [], [], [], [], []
    for i, h in enumerate(hosts):
        for r in range(2):
            other = (loaded.get(h, 0.01) if isinstance(loaded, dict) else 0.40 if h in loaded else 0.01)
            load.append({"item": "node", "a": i, "b": -1, "round": r, "host": h, "local": 0, "busy_ns": 1e9 * (
                0.5 + other), "cap_ns": 1e9, "steal_ns": 0.0, "own_ns": 0.5e9})
            for c in range(2):
                base = 0.10 if h in noisy else 0.02
                win += [{"host": h, "round": r, "cpu": c, "window": w, "lost_fraction": base + rng.normal(0, 0.002)}
                        for w in range(5)]
                kern += [{"host": h, "round": r, "cpu": c, "call": k, "call_ns": 1e6, "start_ns": k * 1e6,
                          "iters": 1000, "ns_per_iter": 1000 * (1 + rng.normal(0, 0.003))} for k in range(50)]
    for a in range(n):
        for b in range(a + 1, n):
            ha, hb = hosts[a], hosts[b]
            f = min(slow_link.get(ha, 1.0), slow_link.get(hb, 1.0))
            if slow_pair and {ha, hb} == set(slow_pair):
                f = 0.5
            for src, dst in ((ha, hb), (hb, ha)):
                g = [1.0 if fast == (src, dst, k) else f * slow_recv.get(dst, 1.0) for k in range(5)]
                bw += [{"src": src, "dst": dst, "iter": k, "t_ns": 0.0, "size_bytes": 1 << 20,
                        "bw_bytes_per_s": 190e6 / 8 * g[k] * (1 + rng.normal(0, 0.002))} for k in range(5)]
            # slow_lat: (a, b, iterations): that pair's latency 1.5x in those of its 75 iterations (hv_screen's
            # passes: 0..24 before the bandwidth test, 25..49 after it, 50..74 the recheck after every pair)
            late = set(slow_lat[2]) if slow_lat and {ha, hb} == set(slow_lat[:2]) else set()
            lat += [{"host_a": ha, "host_b": hb, "iter": k, "pass": k // 25, "rtt_ns": 40e3,
                     "oneway_ns": 20e3 * (1.5 if k in late else 1.0) * (1 + rng.normal(0, 0.01))} for k in range(75)]
            for h in (ha, hb):
                load.append({"item": "pair", "a": a, "b": b, "round": -1, "host": h, "local": 0,
                             "busy_ns": 0.3e9 + pair_load * 1e9,
                             "cap_ns": 1e9, "steal_ns": 0.0, "own_ns": 0.3e9})
    noise = pd.DataFrame([{"host": h, "round": 0, "cpu": 0, "length_s": 1.0, "noise_fraction": 0.02,
                           "events_per_s": 1000.0, "max_detour_ns": 1e5, "preemptions": 0, "overflow": False}
                          for h in hosts])
    return {"screen.nodes": nodes, "screen.load": pd.DataFrame(load), "screen.noise_windows": pd.DataFrame(win),
            "screen.noise": noise, "screen.kernel": pd.DataFrame(kern), "screen.bw": pd.DataFrame(bw),
            "screen.lat": pd.DataFrame(lat),
            "screen.timer": pd.DataFrame({"host": hosts * 10, "round": 0, "sample": 0, "read_ns": 9.5,
                                          "resolution_ns": 0.4}),
            "screen.shm": pd.DataFrame({"host": hosts * 30, "round": 0, "iter": 0, "rtt_ns": 4e3,
                                        "oneway_ns": [2e3 + k for k in range(30 * n)]})}


def analyse(t: dict, expect_path=None, checks=None):
    nm = an.node_metrics(t)
    lm = an.link_metrics(t)
    hosts = list(t["screen.nodes"]["host"])
    f = pd.DataFrame(an.node_findings(nm, t) + an.link_findings(lm, hosts), columns=an.FINDING_COLS)
    return nm, lm, f, an.answer(len(hosts), 6, nm, lm, f, checks, expect_path)


def test_a_clean_screen_names_nothing():
    nm, lm, f, a = analyse(tables())
    assert f.empty and a.status == OK and a.exit_code == 0
    assert "no outlier" in a.line() and "largest z" in a.line()


def test_a_slow_node_link_is_that_nodes_and_a_noisy_node_is_named():
    nm, lm, f, a = analyse(tables(slow_link={"n2": 0.5}, noisy={"n3"}))
    got = {(r.where, r.metric, r.scope, r.side) for r in f.itertuples()}
    assert got == {("n2", "link_bandwidth", "node", "both"), ("n3", "noise_fraction", "node", "")}, got
    assert a.status == DEGRADED and a.exit_code == 3
    bw = f[f["metric"] == "link_bandwidth"].iloc[0]
    assert bw["ratio"] == pytest.approx(0.5, abs=0.01) and bw["reference"] == pytest.approx(190e6 / 8, rel=0.01)
    assert "n2's link bandwidth both ways" in a.line() and "n3's OS noise" in a.line()


def test_cross_traffic_into_a_node_is_its_receiving_side_even_when_one_link_got_through():
    """A CI screen named two of the three links into h1 as pairs (the cross traffic's receiver): the third got
    most of the link (TCP's share of a short message), or one of its messages did, which stretched that link's
    interval to the others'. The node's summary stands out with its interval; most of its links need only stand
    out by their medians."""
    for fast in (None, ("n3", "n1", 2)):
        _, lm, f, a = analyse(tables(slow_recv={"n1": 0.47}, fast=fast))
        got = {(r.where, r.metric, r.scope, r.side) for r in f.itertuples()}
        assert got == {("n1", "link_bandwidth", "node", "receive")}, (fast, got)
        assert a.status == DEGRADED
    row = lm[(lm["src"] == "n3") & (lm["dst"] == "n1")].iloc[0]
    assert row["ci_hi"] > 150e6 / 8  # that link's interval reaches the others': alone, it is no finding
    # one of its three links at the full rate by its median: still that node's (2 of 3), with the 2 links
    t = tables(slow_recv={"n1": 0.47})
    bw = t["screen.bw"]
    bw.loc[(bw["src"] == "n3") & (bw["dst"] == "n1"), "bw_bytes_per_s"] = 190e6 / 8
    _, _, f, _ = analyse(t)
    assert list(zip(f["where"], f["scope"], f["side"], f["links"], strict=True)) == [("n1", "node", "receive", 2)], f
    # half of its links slow (2 of 4): not a majority, the slow links are named as pairs
    t = tables(n=5, slow_recv={"n1": 0.47})
    bw = t["screen.bw"]
    bw.loc[bw["src"].isin(["n4", "n5"]) & (bw["dst"] == "n1"), "bw_bytes_per_s"] = 190e6 / 8
    _, _, f, _ = analyse(t)
    assert set(f["scope"]) == {"pair"} and set(f["where"]) == {"n2->n1", "n3->n1"}, f[["where", "scope"]]


def test_one_slow_pair_is_the_pairs_not_a_nodes():
    nm, lm, f, a = analyse(tables(n=5, slow_pair=("n1", "n4")))
    assert set(f["scope"]) == {"pair"} and set(f["where"]) == {"n1->n4", "n4->n1"}, f[["where", "scope"]]


def test_a_pair_slow_in_one_of_its_two_latency_halves_is_a_transient_not_a_slow_link():
    """hv_screen measures a pair's latency in two halves, before and after its bandwidth test. A CI run named a
    clean testbed's pair 1.44x slow (z +5.9) from one short ping-pong a burst of load had covered; a finding
    must show in both halves."""
    _, _, f, a = analyse(tables(n=5, slow_lat=("n1", "n4", range(25, 75))))  # after the bandwidth test and later
    assert list(f["where"]) == ["n1-n4"] and list(f["status"]) == ["suspect"], f[["where", "status", "z"]]
    assert "not reproduced" in f["why"][0] and "a transient" in f["why"][0]
    assert a.status == UNRELIABLE and "not reproduced" in a.line()
    _, _, f, a = analyse(tables(n=5, slow_lat=("n1", "n4", range(75))))  # both halves and the recheck: the link
    assert list(f["where"]) == ["n1-n4"] and list(f["status"]) == ["degraded"] and a.status == DEGRADED


def test_a_pair_slow_in_both_halves_but_not_in_the_recheck_is_a_transient():
    """A CI screen of a clean testbed named its first pair 1.38x slow (z +5.2) in both halves, around its bandwidth
    test: a condition lasting through one pair's measurement. hv_screen measures every pair's latency once more
    after all pairs; a finding must show then too."""
    _, lm, f, a = analyse(tables(n=5, slow_lat=("n1", "n4", range(50))))
    assert list(f["where"]) == ["n1-n4"] and list(f["status"]) == ["suspect"], f[["where", "status", "z"]]
    assert "of its 3 measurements" in f["why"][0] and "after every pair" in f["why"][0]
    assert a.status == UNRELIABLE
    row = lm[(lm["metric"] == "link_latency") & (lm["src"] == "n1") & (lm["dst"] == "n4")].iloc[0]
    assert row["first"] == pytest.approx(30e3, rel=0.02) and row["later"] == pytest.approx(20e3, rel=0.02)
    # a screen stored before the passes were marked (pass 0 throughout, no recheck): its halves by iteration
    t = tables(n=5, slow_lat=("n1", "n4", range(20, 50)))
    t["screen.lat"] = t["screen.lat"][t["screen.lat"]["iter"] < 50].assign(**{"pass": 0})
    _, lm, f, _ = analyse(t)
    assert list(f["status"]) == ["suspect"] and lm["later"].isna().all()


def test_a_short_node_part_slow_in_one_round_only_is_a_transient():
    """A CI screen of a clean testbed named a node's latency inside the node 1.58x (z +3.7): 100 round trips last
    0.1-0.5 ms, one burst covers a round. The rounds interleave the nodes seconds apart; a finding of such a
    short part must show in every round."""
    rng = np.random.default_rng(2)

    def shm(slow_rounds):
        rows = []
        for h in HOSTS[:4]:
            for r, n in ((0, 60), (1, 40)):
                f = 2.0 if h == "n4" and r in slow_rounds else 1.0
                rows += [{"host": h, "round": r, "iter": k, "rtt_ns": 4e3 * f, "oneway_ns": 2e3 * f * (
                    1 + rng.normal(0, 0.02))} for k in range(n)]
        return pd.DataFrame(rows)

    t = tables()
    t["screen.shm"] = shm({0})
    _, _, f, a = analyse(t)
    assert list(zip(f["where"], f["metric"], f["status"], strict=True)) == [("n4", "shm_latency", "suspect")], f
    assert "of its 2 rounds, 1 is within" in f["why"][0] and a.status == UNRELIABLE
    t["screen.shm"] = shm({0, 1})
    _, _, f, a = analyse(t)
    assert list(zip(f["where"], f["status"], strict=True)) == [("n4", "degraded")] and a.status == DEGRADED


def test_a_node_slow_or_noisy_in_one_round_only_is_a_transient_unless_its_quota_was_measured():
    """CI's clean testbed named scc-h3's compute kernel 0.925x (z -4.9) in an hour when the VM lost 8-12% of its
    idle CPUs to the hypervisor's exits, which /proc/stat shows neither as steal nor as load: a burst can cover a
    node's 0.2 s of kernel in one round. The kernel's and the noise's findings must show in every round too;
    a throttled node's finding has its cause measured and stands."""
    def slow(t, metric, rounds, factor):
        name, col = {"compute_rate": ("screen.kernel", "ns_per_iter"),
                     "noise_fraction": ("screen.noise_windows", "lost_fraction")}[metric]
        d = t[name]
        hit = (d["host"] == "n3") & d["round"].isin(rounds)
        t[name] = d.assign(**{col: np.where(hit, d[col] * factor, d[col])})
        return t

    for metric, factor in (("compute_rate", 1.16), ("noise_fraction", 5.0)):
        _, _, f, a = analyse(slow(tables(), metric, {1}, factor))
        assert list(zip(f["where"], f["metric"], f["status"], strict=True)) == [("n3", metric, "suspect")], f
        assert "of its 2 rounds, 1 is within the other nodes'" in f["why"][0] and a.status == UNRELIABLE, a.line()
        _, _, f, a = analyse(slow(tables(), metric, {0, 1}, factor))
        assert list(zip(f["where"], f["status"], strict=True)) == [("n3", "degraded")] and a.status == DEGRADED
    # the same round, the node throttled 5% by its cgroup's quota: the cause is measured, the finding stands
    t = slow(tables(), "compute_rate", {1}, 1.16)
    t["screen.load"] = t["screen.load"].assign(throttled_ns=np.where(t["screen.load"]["host"] == "n3", 0.05e9, 0.0))
    _, _, f, a = analyse(t)
    assert list(zip(f["status"], f["why"], strict=True)) == [("degraded", "")] and "CPU quota" in f["cause"][0]
    # one round only (an older or a one-round screen): nothing to compare across, judged as before
    t = slow(tables(), "compute_rate", {1}, 1.16)
    t["screen.kernel"] = t["screen.kernel"][t["screen.kernel"]["round"] == 1]
    _, _, f, _ = analyse(t)
    assert list(f["status"]) == ["degraded"], f


def test_a_node_standing_out_within_the_precision_measured_is_suspect_never_ok():
    """The testbed's h3 under a CPU quota, on a VM whose hypervisor exits made each 100 ms window of noise lose
    0-25%: h3 at z +4.4 to +7.6 in four screens, its interval reaching the others', and the screen answered
    nothing of it (an OK would have read "no outlier (largest z 6.9 ...)"). Such a candidate is a suspect finding
    with the intervals named; with the node's quota measured it is the finding, degraded, with its cause."""
    t = tables()
    w = t["screen.noise_windows"]
    peak = np.where(w["host"] == "n3", 0.34, 0.24)
    t["screen.noise_windows"] = w.assign(lost_fraction=np.where(w["window"] % 2 == 0, 0.0, peak))
    nm, _, f, a = analyse(t)
    row = nm[(nm["host"] == "n3") & (nm["metric"] == "noise_fraction")].iloc[0]
    assert row["z"] > 3.5 and not row["outlier"] and row["ci_lo"] <= row["rest_hi"], row
    assert list(zip(f["where"], f["metric"], f["status"], strict=True)) == [("n3", "noise_fraction", "suspect")], f
    assert "reaches the other nodes'" in f["why"][0] and "measure longer (--noise, --rounds)" in f["why"][0]
    assert a.status == UNRELIABLE and "cannot be told from them" in a.line(), a.line()
    load = t["screen.load"]
    t["screen.load"] = load.assign(throttled_ns=np.where(load["host"] == "n3", 0.03e9, 0.0))
    _, _, f, a = analyse(t)
    assert list(zip(f["status"], f["why"], strict=True)) == [("degraded", "")] and a.status == DEGRADED, f
    assert "CPU quota throttled its processes for 3.0%" in a.line()


def test_a_link_standing_out_within_the_precision_measured_is_suspect():
    t = tables(n=5)
    lm = an.link_metrics(t)
    i = lm.index[(lm["metric"] == "link_latency") & (lm["src"] == "n1") & (lm["dst"] == "n4")][0]
    # 1.5x by its median in each of its three measurements, its interval reaching the others'
    lm.loc[i, ["value", "ci_lo", "ci_hi", "first", "second", "later"]] = [30e3, 19e3, 41e3, 30e3, 30e3, 30e3]
    f = pd.DataFrame(an.link_findings(lm, HOSTS[:5]), columns=an.FINDING_COLS)
    assert list(zip(f["where"], f["status"], strict=True)) == [("n1-n4", "suspect")], f
    assert "reaches the other links'" in f["why"][0] and "--lat-iters" in f["why"][0]
    lm.loc[i, ["ci_lo", "ci_hi"]] = [29e3, 31e3]
    f = pd.DataFrame(an.link_findings(lm, HOSTS[:5]), columns=an.FINDING_COLS)
    assert list(zip(f["where"], f["status"], strict=True)) == [("n1-n4", "degraded")], f


def test_a_finding_on_a_loaded_node_is_suspect_and_the_answer_unreliable():
    nm, lm, f, a = analyse(tables(noisy={"n3"}, loaded={"n3"}))
    assert list(f["status"]) == ["suspect"] and a.status == UNRELIABLE and a.exit_code == 4
    assert "other processes used 40%" in a.line()
    # load elsewhere, nothing found on it: still OK
    nm, lm, f, a = analyse(tables(loaded={"n1"}))
    assert f.empty and a.status == OK


def test_too_few_nodes_without_expectations_is_unreliable():
    nm, lm, f, a = analyse(tables(n=2))
    assert a.status == UNRELIABLE and "needs 3 or more nodes" in a.line()


def test_costs_of_a_slow_link_and_a_slow_node():
    from hpcvar.screen import cost

    t = tables(slow_link={"n2": 0.5})
    lm = an.link_metrics(t)
    c, text = cost.link_cost(lm, HOSTS[:4], "link_bandwidth", 190e6 / 8)
    assert c == pytest.approx(1.0, rel=0.05) and "ring allreduce" in text  # the half-rate link paces the ring
    c, _ = cost.compute_cost(90.0, 100.0)
    assert c == pytest.approx(100 / 90 - 1)


def test_answer_combines_labelled():
    a = combine([("screen", decide(["x slow"], [], "")), ("latency", decide([], ["load"], ""))])
    assert a.status == DEGRADED and a.line() == "DEGRADED: screen: x slow (also unreliable: latency: load)"
    assert combine([("a", decide([], [], "fine"))]).line() == "OK: a: fine"


def test_load_under_the_threshold_that_explains_a_cpu_finding_makes_it_suspect():
    """Where nodes share one machine, a little load lands on whichever node is measured: a node 8 points noisier
    with 5 points more load than the others is suspect; with 1 point more, the node itself is noisy."""
    _, _, f, a = analyse(tables(noisy={"n3"}, loaded={"n3": 0.06}))
    assert list(f["status"]) == ["suspect"] and "enough to explain it" in f["why"][0] and a.status == UNRELIABLE
    _, _, f, a = analyse(tables(noisy={"n3"}, loaded={"n3": 0.02}))
    assert list(f["status"]) == ["degraded"] and a.status == DEGRADED


def test_a_node_held_back_by_its_cpu_quota_is_degraded_with_the_quota_named():
    """CI's faulty testbed: h3's processes throttled by their cgroup's quota (1 ms of every 10 ms), 12% noise
    against 3%, and 6% of other processes' load on its CPUs, 5 points more than elsewhere: what ran while h3 was
    throttled took nothing from it. Up to the throttled share, a node's load is not counted against it, and the
    quota is named as the cause; without cpu.stat (NaN, or an older run without the column) the load excuses it."""
    t = tables(noisy={"n3"}, loaded={"n3": 0.06})
    load = t["screen.load"]
    t["screen.load"] = load.assign(throttled_ns=np.where((load["host"] == "n3") & (load["item"] == "node"), 0.05e9,
                                                         0.0))
    nm, _, f, a = analyse(t)
    assert list(zip(f["where"], f["status"], strict=True)) == [("n3", "degraded")] and a.status == DEGRADED, a.line()
    assert f["cause"][0] == "its cgroup's CPU quota throttled its processes for 5.0% of its CPU time (cpu.stat)"
    assert a.line().endswith(f["cause"][0]), a.line()
    noise = nm[nm["metric"] == "noise_fraction"].set_index("host")["throttled_pct"]
    assert noise["n3"] == pytest.approx(5.0) and noise["n1"] == 0.0
    # throttled 0.5% (under THROTTLED_PCT: no cause named): 5.5 points of load remain, 4.5 more than elsewhere,
    # enough for an excess of 8 points
    t["screen.load"] = load.assign(throttled_ns=np.where(load["host"] == "n3", 0.005e9, 0.0))
    _, _, f, a = analyse(t)
    assert list(f["status"]) == ["suspect"] and f["cause"][0] == ""
    assert "took 6% of its CPUs meanwhile (less the 0.5% it was throttled), 4 points more" in f["why"][0], f["why"]
    # not visible to the ranks: as before
    t["screen.load"] = load.assign(throttled_ns=np.nan)
    nm, _, f, a = analyse(t)
    assert list(f["status"]) == ["suspect"] and f["cause"][0] == "" and nm["throttled_pct"].isna().all()


def test_a_node_throttled_by_its_quota_is_named_even_when_its_timings_do_not_stand_out():
    """CI's faulty testbed on a VM losing 8-15% of its CPUs to exits: h3's 10% quota made its noise z 3 to 7.6 and
    twice not even a candidate, while cpu.stat showed it throttled 2.2-2.9% of its CPU time and every other node 0.
    The throttled share is a node metric of its own (cpu_throttled), judged by its own bound (1%): a finding
    whatever the other nodes' timings, named once (not again beside a CPU finding whose cause it already is)."""
    t = tables()
    load = t["screen.load"]
    t["screen.load"] = load.assign(throttled_ns=np.where((load["host"] == "n3") & (load["item"] == "node"), 0.03e9,
                                                         0.0))
    nm, _, f, a = analyse(t)
    thr = nm[nm["metric"] == "cpu_throttled"].set_index("host")
    assert thr["value"].to_dict() == pytest.approx({"n1": 0.0, "n2": 0.0, "n3": 3.0, "n4": 0.0})
    assert (thr["n"] == 2).all() and thr["valid"].all() and not thr["outlier"].any()  # 2 rounds; no outlier rule
    assert list(zip(f["where"], f["metric"], f["status"], strict=True)) == [("n3", "cpu_throttled", "degraded")]
    assert a.status == DEGRADED and a.exit_code == 3
    assert "n3's CPU time throttled by its cgroup's CPU quota 3% (at most 1%; the median of the others 0%)" in \
        a.line(), a.line()
    assert an.largest_z(nm, an.link_metrics(t))["metric"] != "cpu_throttled"  # not a z: not in the largest z
    # under the bound (0.9%): nothing; exactly at it: named
    for share, found in ((0.009e9, []), (0.01e9, ["n3"])):
        t["screen.load"] = load.assign(throttled_ns=np.where((load["host"] == "n3") & (load["item"] == "node"),
                                                             share, 0.0))
        assert list(analyse(t)[2]["where"]) == found
    # under other processes' load that disturbs every timing of n3 (its noise finding suspect): still named,
    # degraded: the counter is the kernel's, not a timing
    t = tables(noisy={"n3"}, loaded={"n3": 0.40})
    load = t["screen.load"]
    t["screen.load"] = load.assign(throttled_ns=np.where((load["host"] == "n3") & (load["item"] == "node"), 0.03e9,
                                                         0.0))
    _, _, f, a = analyse(t)
    got = set(zip(f["metric"], f["status"], strict=True))
    assert ("cpu_throttled", "degraded") in got and ("noise_fraction", "suspect") in got and a.status == DEGRADED
    # no cpu.stat visible to the ranks: no row, no finding
    t["screen.load"] = load.assign(throttled_ns=np.nan)
    nm, _, f, _ = analyse(t)
    assert not (nm["metric"] == "cpu_throttled").any() and "cpu_throttled" not in set(f["metric"])


def test_a_link_finding_names_the_quota_of_an_end_throttled_while_it_was_measured():
    """The testbed at a 50% quota: h4's ranks were throttled in some ping-pongs, and a pair of h4's came out slow
    (3.3x). A throttled rank answers late whatever the link: the link finding names that end's quota (cpu.stat of
    the pair item), for a pair and for a node's links; under 1%, or with no cpu.stat, nothing is named."""
    t = tables(slow_lat=("n2", "n4", range(75)))
    load = t["screen.load"]
    on_pair = (load["item"] == "pair") & (load["a"] == 1) & (load["b"] == 3)
    for share, cause in ((0.05e9, "n4's cgroup's CPU quota throttled its processes for 5.0% of its CPU time while it "
                                  "was measured (cpu.stat): a throttled rank answers late whatever the link"),
                         (0.005e9, ""), (0.0, ""), (np.nan, "")):
        # the other end read 0; without cpu.stat (NaN) neither end could read it
        t["screen.load"] = load.assign(throttled_ns=np.where(on_pair & (load["host"] == "n4"), share,
                                                             0.0 if np.isfinite(share) else np.nan))
        _, lm, f, a = analyse(t)
        pair = f[f["scope"] == "pair"]
        assert list(pair["where"]) == ["n2-n4"] and list(pair["cause"]) == [cause], f
        row = lm[(lm["metric"] == "link_latency") & (lm["src"] == "n2") & (lm["dst"] == "n4")].iloc[0]
        # each end's share of the pair item (NaN: not visible)
        assert row["dst_throttled_pct"] == pytest.approx(share / 1e7, nan_ok=True)
        assert row["src_throttled_pct"] == pytest.approx(0.0 if np.isfinite(share) else np.nan, nan_ok=True)
        assert ("cpu.stat" in a.line()) == bool(cause), a.line()
    # both ends throttled: both named, each with its own share
    t["screen.load"] = load.assign(throttled_ns=np.where(on_pair, np.where(load["host"] == "n4", 0.05e9, 0.02e9), 0.0))
    pair = analyse(t)[2].query("scope == 'pair'")
    assert list(pair["cause"]) == ["n2's and n4's cgroups' CPU quotas throttled their processes for 2.0% and 5.0% of "
                                   "their CPU time while it was measured (cpu.stat): a throttled rank answers late "
                                   "whatever the link"], pair
    # a node's links, all slow, the node throttled in each of its pair items: the node's quota named
    t = tables(slow_link={"n4": 0.5})
    load = t["screen.load"]
    t["screen.load"] = load.assign(throttled_ns=np.where((load["item"] == "pair") & (load["host"] == "n4"), 0.03e9,
                                                         0.0))
    _, _, f, a = analyse(t)
    assert list(zip(f["where"], f["metric"], f["status"], strict=True)) == [("n4", "link_bandwidth", "degraded")]
    assert f["cause"][0].startswith("n4's cgroup's CPU quota throttled its processes for 3.0% of its CPU time while "
                                    "its links were measured"), f["cause"][0]
    assert a.line().endswith("whatever the link"), a.line()
    # other nodes throttled longer on their common links do not hide n4's own share there (each end is kept: with
    # only the longer-throttled end, n4's share was 0 on two of its three links and its quota went unnamed)
    t["screen.load"] = load.assign(throttled_ns=np.where(load["item"] == "pair", np.where(
        load["host"] == "n4", 0.03e9, np.where(load["host"].isin(["n2", "n3"]), 0.06e9, 0.0)), 0.0))
    f = analyse(t)[2]
    node = f[f["metric"] == "link_bandwidth"]
    assert list(node["where"]) == ["n4"] and node["cause"].iloc[0].startswith(
        "n4's cgroup's CPU quota throttled its processes for 3.0% of its CPU time while its links were measured"), f


def test_what_a_throttled_node_costs_is_at_least_its_lost_share():
    from hpcvar.screen.cost import throttle_cost

    c, text = throttle_cost(3.0)
    assert c == pytest.approx(3.0 / 97.0) and "run 97% of the time: at least +3.1% run time" in text
    assert np.isnan(throttle_cost(0.0)[0]) and np.isnan(throttle_cost(100.0)[0])


def test_a_throttle_row_completes_the_load_row_before_it():
    """hv_screen writes a kind-9 row (its cgroup's throttled ns) right after each load row (kind 1) and part row
    (kind 8); a row that does not follow its own is dropped rather than given to another."""
    from hpcvar.screen.tables import _throttled

    load = [{"host": "n1", "phase": "noise", "local": -1, "throttled_ns": np.nan}]
    _throttled(load, "n1", 1, 8, 5e6)  # part 1 = noise
    assert load[-1]["throttled_ns"] == 5e6
    load.append({"host": "n1", "phase": "all", "local": 0, "throttled_ns": np.nan})
    _throttled(load, "n1", 1, 1, 7e6)  # local rank 1's, but the last row is rank 0's
    _throttled(load, "n2", 0, 1, 7e6)  # another node's
    assert np.isnan(load[-1]["throttled_ns"])
    _throttled(load, "n1", 0, 1, 7e6)
    assert load[-1]["throttled_ns"] == 7e6


def test_a_load_every_item_had_cannot_make_one_stand_out():
    """Cross traffic's senders on the testbed load the CPUs all along: 15% everywhere. A half-rate link is still
    found (DEGRADED, the load named); without a fault the answer cannot be OK (a small fault could hide)."""
    uniform = {h: 0.15 for h in HOSTS}
    _, _, f, a = analyse(tables(slow_link={"n2": 0.5}, loaded=uniform, pair_load=0.15))
    assert list(f["where"]) == ["n2"] and list(f["status"]) == ["degraded"] and a.status == DEGRADED
    assert "also unreliable: other processes and the hypervisor took a median 15%" in a.line()
    _, _, f, a = analyse(tables(loaded=uniform, pair_load=0.15))
    assert f.empty and a.status == UNRELIABLE and "could hide in it" in a.line()


def test_three_nodes_one_slow_link_is_that_nodes():
    """With 3 nodes and one slow, 4 of the 6 directed links are slow: the reference is the 2 links between the
    other two nodes, not the median of all links (which is the slow node's own)."""
    _, _, f, a = analyse(tables(n=3, slow_link={"n2": 0.5}))
    assert [(r.where, r.metric, r.side) for r in f.itertuples()] == [("n2", "link_bandwidth", "both")], f
    assert a.status == DEGRADED


def test_the_load_of_the_part_that_measured_it_judges_a_finding():
    """A burst of other processes during one node's 0.2 s of kernel: over the whole item it is 2%, during the
    kernel 10 points more than on the other nodes: its 17% slower kernel is suspect, not degraded."""
    t = tables()
    k = t["screen.kernel"]
    t["screen.kernel"] = k.assign(ns_per_iter=np.where(k["host"] == "n3", k["ns_per_iter"] * 1.2,
                                                       k["ns_per_iter"]))
    _, _, f, a = analyse(t)
    assert list(f["status"]) == ["degraded"] and list(f["metric"]) == ["compute_rate"]
    rows = [{"item": "node", "a": i, "b": -1, "round": 0, "host": h, "phase": "kernel", "local": -1,
             "busy_ns": 0.25e9 + (0.1e9 if h == "n3" else 0.01e9), "cap_ns": 1e9, "steal_ns": 0.0, "own_ns": 0.25e9}
            for i, h in enumerate(HOSTS[:4])]
    t["screen.load"] = pd.concat([t["screen.load"].assign(phase="all"), pd.DataFrame(rows)], ignore_index=True)
    _, _, f, a = analyse(t)
    assert list(f["status"]) == ["suspect"] and "9 points more" in f["why"][0] and a.status == UNRELIABLE


def test_a_part_too_short_for_proc_stat_is_judged_by_its_node_item():
    """CI's clean screens: 100 shared-memory round trips (0.3 ms) read 37-79% of others' load (/proc/stat
    counts 10 ms ticks) and left 2 of 4 nodes' 8-byte latency undisturbed: the screen was UNRELIABLE on a quiet
    machine. A part shorter than MIN_LOAD_WINDOW_S is judged by the load of its whole node item."""
    t = tables()
    rows = [{"item": "node", "a": i, "b": -1, "round": r, "host": h, "phase": "shm", "local": -1,
             "busy_ns": 0.3e6 + (0.4e6 if h in ("n1", "n2") else 0.0), "cap_ns": 0.6e6, "steal_ns": 0.0,
             "own_ns": 0.3e6} for i, h in enumerate(HOSTS[:4]) for r in range(2)]
    t["screen.load"] = pd.concat([t["screen.load"].assign(phase="all"), pd.DataFrame(rows)], ignore_index=True)
    valid = an.node_validity(t, "shm_latency")
    assert all(why == "" for _, _, why in valid.values()), valid
    _, _, f, a = analyse(t)
    assert f.empty and a.status == OK, a.line()
    # a part long enough is judged by its own load (the kernel's, as test_the_load_of_the_part... shows)
    long = t["screen.load"].copy()
    long.loc[long["phase"] == "shm", ["busy_ns", "cap_ns", "own_ns"]] *= 1e3
    t["screen.load"] = long
    assert an.node_validity(t, "shm_latency")["n1"][2] != ""
