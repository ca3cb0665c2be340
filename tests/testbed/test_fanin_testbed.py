"""bench fanin on the network-namespace testbed (root): one rank per host, 200 Mbit/s links.

Rank 0 (the root) is host 0; large-buffer clients and chatter clients are the other hosts, so all of
them share the root's one shaped link. Checks (issue 9): with 2 clients the aggregate bandwidth at
the root is 85-100% of the link; fairness is near 1 without chatter; with chatter the large-buffer
bandwidth drops and the drop is reported.
"""

from __future__ import annotations

import json

import pytest

from tests.conftest import best_of_quiet_attempts, run_cli
from tests.testbed.conftest import up_testbed

# Ranks outnumber the 2 cores here, so --wait auto makes them sleep 50 us between MPI tests instead of
# spinning (docs/fanin.md); MPICH runs on its ofi netmod (docs/testbed.md: ch4:ucx on tcp loses
# MPI_ANY_SOURCE receives). Both together: about 15 s and 70 s here.
pytestmark = [pytest.mark.root]

LINK_BYTES_PER_S = 200e6 / 8
LARGE_BYTES = 4 << 20  # --large 4MiB
HOSTS = 4  # root + 2 large-buffer clients + 1 chatter client


@pytest.fixture(scope="module")
def testbed(tmp_path_factory):
    with up_testbed(tmp_path_factory, "hvfi-", HOSTS) as env:
        yield env


def _ms(ns: float | None) -> str:
    """A time of the JSON in ms; null (standard JSON's NaN: no chatter, no round trip) as '-'."""
    return "-" if ns is None else f"{ns / 1e6:.1f}"


def _fanin(env, runs_dir, *args):
    e = dict(env, HPCVAR_RUNS=str(runs_dir))
    res = run_cli(["bench", "fanin", "--launcher", "testbed", "--np", str(HOSTS), "--clients", "2",
                   "--large", "4MiB", "--small", "64KiB", "--duration", "3s", "--json", "--timeout", "240s", *args],
                  env=e, check=True, timeout=700)
    return json.loads(res.stdout)


@pytest.mark.timeout(900)
def test_root_link_saturated_fair_and_chatter_drop(testbed, runs_dir):
    def within_the_link(out):
        by = {p["chatter"]: p for p in out["points"]}
        assert len(out["chatter_effect"]) == 1
        # the link is shared: large + chatter stay within it
        assert by[1]["aggregate_bytes_per_s"] + by[1]["chatter_bytes_per_s"] <= 1.02 * LINK_BYTES_PER_S
        assert by[0]["aggregate_bytes_per_s"] <= 1.0 * LINK_BYTES_PER_S

    def saturated_fair_and_dropped(out):
        by = {p["chatter"]: p for p in out["points"]}
        alone, chat, eff = by[0], by[1], out["chatter_effect"][0]
        print(f"aggregate without chatter: {alone['aggregate_bytes_per_s'] / 1e6:.2f} MB/s "
              f"({100 * alone['aggregate_bytes_per_s'] / LINK_BYTES_PER_S:.1f}% of link), "
              f"Jain {alone['jain_index']:.4f}; with 1 chatter client: large "
              f"{chat['aggregate_bytes_per_s'] / 1e6:.2f} MB/s, chatter {chat['chatter_bytes_per_s'] / 1e6:.2f} MB/s, "
              f"RTT p50 {chat['chatter_rtt_median_ns'] / 1e6:.2f} ms; drop {eff['drop_pct']:.1f}%")
        assert 0.85 * LINK_BYTES_PER_S <= alone["aggregate_bytes_per_s"], alone["aggregate_bytes_per_s"]
        assert alone["jain_index"] > 0.95, alone["jain_index"]
        assert chat["chatter_bytes_per_s"] > 0
        assert eff["drop_pct"] > 0 and chat["aggregate_bytes_per_s"] < alone["aggregate_bytes_per_s"], eff

    best_of_quiet_attempts(lambda: _fanin(testbed, runs_dir, "--chatter", "0,1"), saturated_fair_and_dropped,
                           always=within_the_link, what="fan-in of 2 clients (+1 chatter) into the root")


@pytest.mark.timeout(900)
def test_strategies_on_the_testbed(testbed, runs_dir):
    def key(p):
        return p["queues"], p["depth"], p["match"], p["chatter"]

    def within_the_link(out):
        assert len({key(p) for p in out["points"]}) == 16 and len(out["chatter_effect"]) == 8
        for p in out["points"]:
            print(f"{p['queues']:<6} depth {p['depth']:<4} {p['match']:<5} chatter {int(p['chatter'])}: "
                  f"{p['aggregate_bytes_per_s'] / 1e6:.2f} MB/s large, "
                  f"{p['chatter_bytes_per_s'] / 1e6:.3f} MB/s chatter, "
                  f"RTT p50 {_ms(p['chatter_rtt_median_ns'])} ms, Jain {p['jain_index']:.3f}")
            # what went through the root's link in the window can never exceed it
            assert 0 < p["window_bytes_per_s"] <= 1.02 * LINK_BYTES_PER_S
            # the steady rate sums each client's bytes over its own first-to-last completion: each is known to
            # one message over the window (docs/fanin.md), which exact matching at depth 1, serving one client
            # at a time, can show (25.93 MB/s once on the 25 MB/s link: 3.7% over, under a 11% resolution)
            resolution = 2 * LARGE_BYTES / (p["window_s"] * LINK_BYTES_PER_S)
            assert p["aggregate_bytes_per_s"] <= (1.02 + resolution) * LINK_BYTES_PER_S, (key(p), resolution)

    def strategies_behave(out):
        by = {key(p): p for p in out["points"]}
        for p in out["points"]:
            if p["chatter"] == 0:  # every strategy nearly fills the root's link when nothing else competes
                # (exact matching at depth 1 serves one client at a time, with a handshake gap between
                # messages: 21-23.5 MB/s in runs here, so the bound is looser than the headline test's 85%)
                assert p["aggregate_bytes_per_s"] >= 0.75 * LINK_BYTES_PER_S, key(p)
        for match in ("any", "exact"):
            # one posted receive shared by 4 MiB and 64 KiB messages: chatter waits behind whole large
            # messages; a separate small queue of depth 1 keeps it flowing (the paper's case for dual queues)
            single, dual = by[("single", 1, match, 1)], by[("dual", 1, match, 1)]
            assert single["chatter_bytes_per_s"] < 0.5 * dual["chatter_bytes_per_s"], (single, dual)
            assert single["chatter_rtt_median_ns"] > 2 * dual["chatter_rtt_median_ns"], (single, dual)

    # 16 points of 3 s: about 70 s an attempt, so 2 attempts at most
    best_of_quiet_attempts(lambda: _fanin(testbed, runs_dir, "--chatter", "0,1", "--queues", "single,dual",
                                          "--depth", "deep,1", "--match", "any,exact"),
                           strategies_behave, tries=2, always=within_the_link, what="the fan-in strategy sweep")
