"""Real MPI runs of hpcvar bench fanin (3 ranks on 2 shared cores: loose checks only)."""

from __future__ import annotations

import json
import math

import pytest

from hpcvar.results import Run, resolve_run
from hpcvar.results.rawio import raw_bytes, raw_files
from tests.conftest import run_cli

pytestmark = pytest.mark.mpi


def test_every_strategy_combination_runs(runs_dir):
    res = run_cli(["bench", "fanin", "--np", "3", "--clients", "1", "--chatter", "0,1", "--large", "64KiB",
                   "--small", "1KiB", "--duration", "100ms", "--queues", "single,dual", "--depth", "deep,2",
                   "--match", "any,exact", "--json", "--timeout", "240s"], check=True, timeout=300)
    out = json.loads(res.stdout)
    pts = out["points"]
    assert len(pts) == 2 * 2 * 2 * 2
    combos = {(p["queues"], p["depth"], p["match"], p["chatter"]) for p in pts}
    assert len(combos) == 16
    for p in pts:
        for k in ("aggregate_bytes_per_s", "chatter_bytes_per_s", "jain_index", "window_s"):
            assert math.isfinite(p[k]), (k, p)
        assert p["aggregate_bytes_per_s"] > 0
        assert p["window_s"] == pytest.approx(0.1, rel=0.05)
        assert p["jain_index"] == pytest.approx(1.0)  # one large-buffer client
        if p["chatter"]:
            assert p["chatter_bytes_per_s"] > 0 and p["chatter_rtt_n"] > 0 and p["chatter_rtt_median_ns"] > 0
        else:
            assert p["chatter_bytes_per_s"] == 0 and p["chatter_rtt_n"] == 0
        # every posted receive completed or was cancelled: never more cancelled than posted
        assert 0 <= p["receives_cancelled"] <= p["receives_posted"]
    assert len(out["chatter_effect"]) == 8
    run = Run.open(resolve_run("latest"))
    assert run.info["status"] == "complete"
    for name in ("fanin.points", "fanin.clients", "fanin.bins", "fanin.rtt", "fanin.variability"):
        assert run.has_table(name)
    clients = run.read_table("fanin.clients")
    assert set(clients["role"]) == {"large", "chatter"}
    assert (clients["messages_total"] >= clients["messages"]).all()
    assert (run.path / "plots" / "fanin-bandwidth.png").is_file()


def test_messages_mode_counts_every_byte_and_repeats_with_shuffle(runs_dir):
    res = run_cli(["bench", "fanin", "--np", "4", "--clients", "2", "--chatter", "1", "--large", "32KiB",
                   "--small", "512", "--messages", "20", "--queues", "single,dual", "--depth", "1",
                   "--match", "exact", "--repeat", "2", "--placement", "shuffle", "--seed", "3", "--json",
                   "--timeout", "240s"], check=True, timeout=300)
    out = json.loads(res.stdout)
    assert len(out["points"]) == 4
    run = Run.open(resolve_run("latest"))
    pts = run.read_table("fanin.points")
    # the window ends with the last large message: every large byte is inside it
    assert (pts["large_bytes_total"] == 2 * 20 * 32 * 1024).all()
    clients = run.read_table("fanin.clients")
    large = clients[clients["role"] == "large"]
    assert (large["messages"] == 20).all() and (large["messages_total"] == 20).all()
    assert sorted(pts["seed"].unique()) == [3, 4]
    assert len(run.info["launches"]) == 2  # one MPI job per repetition
    var = out["variability"]
    assert len(var) == 2 and all(v["runs"] == 2 for v in var)
    for v in var:
        assert v["run_mean_min"] <= v["mean_bytes_per_s"] <= v["run_mean_max"]
    raws = raw_files(run.path / "raw", "launch-*.raw")
    heads = [next(line for line in raw_bytes(r).decode().splitlines() if line.startswith("#@placement_ranks="))
             for r in raws]
    assert all(len(h.split("=")[1].split(",")) == 4 for h in heads)


@pytest.mark.parametrize("wait, us", [("spin", 0), ("yield", -1), ("sleep:20us", 20)])
def test_each_way_of_waiting_runs_and_is_recorded(runs_dir, wait, us):
    res = run_cli(["bench", "fanin", "--np", "3", "--clients", "1", "--chatter", "1", "--large", "64KiB",
                   "--small", "1KiB", "--duration", "100ms", "--wait", wait, "--json", "--timeout", "120s"],
                  check=True, timeout=180)
    out = json.loads(res.stdout)
    assert out["wait"] == wait.removesuffix("us")  # stored as sleep:N, N in microseconds
    (p,) = out["points"]
    assert p["wait_us"] == us
    assert p["aggregate_bytes_per_s"] > 0 and p["chatter_rtt_n"] > 0


def test_raw_layout_matches_a_file_from_before_the_split(runs_dir):
    """The same run as tests/data/fanin_ba3e1d1 (written before main was split into per-role functions) gives
    the same columns, placement line and #@point lines, and the same kinds of rows from the same ranks."""
    from pathlib import Path

    def layout(path):
        lines = raw_bytes(path).decode().splitlines()
        head = [x for x in lines if x.startswith(("#@columns=", "#@placement_ranks=", "#@point "))]
        rows = {tuple(x.split(",")[:3]) for x in lines if x and not x.startswith("#")}
        return head, rows

    old = Path(__file__).resolve().parents[1] / "data" / "fanin_ba3e1d1" / "launch-001.raw"
    run_cli(["bench", "fanin", "--np", "3", "--clients", "1", "--chatter", "1", "--large", "4KiB", "--small", "256",
             "--messages", "5", "--queues", "single,dual", "--depth", "deep", "--match", "exact",
             "--wait", "sleep:50us", "--timeout", "120s"], check=True, timeout=200)  # the file's wait_us
    (new,) = raw_files(Run.open(resolve_run("latest")).path / "raw", "launch-*.raw")
    old_head, old_rows = layout(old)
    new_head, new_rows = layout(new)
    assert new_head == old_head
    # kind 3 (recorded round trips) depends on how many the chatter client fits in before STOP
    assert {r for r in new_rows if r[0] != "3"} == {r for r in old_rows if r[0] != "3"}
