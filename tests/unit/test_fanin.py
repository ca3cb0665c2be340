"""bench fanin without MPI: points, argv, tables from a hand-written raw file, validation errors."""

from __future__ import annotations

import numpy as np
import pytest

from hpcvar.bench.runner import BenchContext
from hpcvar.errors import UsageError
from hpcvar.kinds.fanin.job import (
    Fanin,
    FaninParams,
    chatter_counts,
    chatter_effect,
    parse_choice_list,
    parse_depth_list,
    parse_wait,
    ranks_needed,
    resolve_wait,
    root_buffer_bytes,
    wait_us,
)
from hpcvar.results import read_raw
from tests.conftest import run_cli


def params(**kw) -> FaninParams:
    p = {"servers": 1, "clients": [1, 2], "chatter_ratio": [0.0, 4.0], "chatter": None, "large": 1 << 20,
         "small": 4096, "duration_s": 1.0, "messages": None, "queues": ["single", "dual"], "depth": ["deep", 20],
         "match": ["any", "exact"], "bin_s": None, "repeat": 2, "placement": "shuffle", "seed": 7,
         "max_samples": 100, "wait": "spin"}
    p.update(kw)
    return FaninParams(**p)


def test_depth_and_choice_lists():
    assert parse_depth_list("deep,20") == ["deep", 20]
    with pytest.raises(UsageError, match="no posted receive"):
        parse_depth_list("0")
    with pytest.raises(UsageError, match="not a queue depth"):
        parse_depth_list("shallow")
    assert parse_choice_list("single,dual,single", ("single", "dual"), "--queues") == ["single", "dual"]
    with pytest.raises(UsageError) as e:
        parse_choice_list("triple", ("single", "dual"), "--queues")
    assert e.value.where == "--queues"


def test_chatter_counts_ratio_and_ranks():
    p = params()
    assert chatter_counts(p, 2) == [0, 8]
    assert ranks_needed(p) == 1 + 2 + 8
    assert chatter_counts(params(chatter=[3, 3, 0]), 5) == [3, 0]
    assert ranks_needed(params(servers=2, chatter=[3])) == 2 + 2 + 3


def test_points_and_one_launch_per_repetition():
    b, p = Fanin(), params()
    pts = b.points(p)
    # 2 reps x 2 clients x 2 chatter x 2 queues x 2 depths x 2 matches
    assert len(pts) == 64
    launches = b.launches(p, pts)
    assert [len(x) for x in launches] == [32, 32]
    assert {q["rep"] for q in launches[1]} == {1}
    argv = b.argv(p, launches[1])
    a = dict(zip(argv[::2], argv[1::2], strict=False))
    assert a["--seed"] == "8" and a["--rep"] == "1" and a["--placement"] == "shuffle"
    n = len(launches[1])
    for k in ("--p-clients", "--p-chatter", "--p-queues", "--p-depth", "--p-match"):
        assert len(a[k].split(",")) == n
    assert set(a["--p-depth"].split(",")) == {"0", "20"}


def test_root_buffers():
    p = params(large=100, small=10)
    assert root_buffer_bytes(p, {"clients": 2, "chatter": 8, "queues": "single", "depth": "deep"}) == 10 * 100
    assert root_buffer_bytes(p, {"clients": 2, "chatter": 8, "queues": "dual", "depth": "deep"}) == 8 * 10 + 2 * 100
    assert root_buffer_bytes(p, {"clients": 2, "chatter": 0, "queues": "dual", "depth": 5}) == 5 * 100


def _ctx(np_=11):
    return BenchContext(launcher=_Fake(), np=np_)


class _Fake:
    name = "srun"  # memory check of the root only

    def slots(self):
        return None


@pytest.mark.parametrize("kw, flag", [
    ({"servers": 0}, "--servers"),
    ({"clients": [0, 1]}, "--clients"),
    ({"depth": [0]}, "--depth"),
    ({"large": 0}, "--large"),
    ({"small": 4}, "--small"),
    ({"large": 1 << 40}, "--large"),
    ({"chatter_ratio": [-1.0]}, "--chatter-ratio"),
    ({"duration_s": None}, "--duration"),
    ({"repeat": 0}, "--repeat"),
])
def test_validation_names_the_flag(kw, flag):
    with pytest.raises(UsageError) as e:
        Fanin().validate(params(**kw), _ctx())
    assert e.value.where == flag


def test_more_clients_than_ranks():
    with pytest.raises(UsageError, match="needs 11 ranks") as e:
        Fanin().validate(params(), _ctx(4))
    assert e.value.where == "--clients"
    Fanin().validate(params(), _ctx(11))  # exactly enough


def test_memory_above_available(monkeypatch):
    import hpcvar.metadata as m

    monkeypatch.setattr(m, "mem_available_bytes", lambda: 10 << 20)
    with pytest.raises(UsageError, match="available") as e:
        Fanin().validate(params(large=4 << 20, clients=[4], chatter_ratio=[0.0]), _ctx(11))
    assert e.value.where == "--large"


RAW = """#@hpcvar_raw=1
#@columns=kind,rank,peer,idx,a,b,c
#@point rep=0 clients=2 chatter=1 queues=single depth=deep match=any servers=1 large=100 small=10 bin_ns=100000000 duration_s=0.3 messages=0 placement=fixed seed=1
1,1,0,1,3000,30,31
1,2,0,1,1000,10,11
1,3,0,2,500,50,51
2,0,-1,0,1500,200,0
2,0,-1,1,1500,200,100000000
2,0,-1,2,1000,100,200000000
2,0,-1,3,0,0,300000000
4,0,-1,0,300000000,1,3
6,0,-1,0,50000000,250000000,3000
7,1,0,0,50000000,250000000,2000
3,3,0,0,2000,0,0
3,3,0,1,4000,500,0
5,3,0,0,50,2,1
#@point_end rows=13
#@point rep=0 clients=2 chatter=0 queues=single depth=deep match=any servers=1 large=100 small=10 bin_ns=100000000 duration_s=0.3 messages=0 placement=fixed seed=1
1,1,0,1,3000,30,31
1,2,0,1,3000,30,31
2,0,-1,0,2000,0,0
2,0,-1,1,2000,0,100000000
2,0,-1,2,2000,0,200000000
4,0,-1,0,300000000,0,2
#@point_end rows=6
"""


def test_tables_from_raw(tmp_path):
    path = tmp_path / "launch-001.raw"
    path.write_text(RAW)
    raw = read_raw(path)
    t = Fanin().tables([raw], params())
    pts = t["fanin.points"].set_index("chatter")
    w = pts.loc[1]
    assert w["window_s"] == pytest.approx(0.3)
    # steady, per client: client 1 from its first to its last completion, client 2 (no steady row: fewer
    # than two completions) at its window rate
    steady = 2000 / 0.2 + 1000 / 0.3
    assert w["aggregate_bytes_per_s"] == pytest.approx(steady)
    assert w["window_bytes_per_s"] == pytest.approx(4000 / 0.3)
    assert w["chatter_bytes_per_s"] == pytest.approx(500 / 0.3)
    assert w["jain_index"] == pytest.approx(4000**2 / (2 * (3000**2 + 1000**2)))
    assert w["chatter_rtt_median_ns"] == pytest.approx(3000)
    assert w["receives_cancelled"] == 1 and w["receives_posted"] == 3
    assert pts.loc[0]["jain_index"] == pytest.approx(1.0)
    bins = t["fanin.bins"]
    b1 = bins[bins["chatter"] == 1]
    # bin 3 starts at the window end: not full
    assert list(b1["full"]) == [True, True, True, False]
    assert b1["large_bytes_per_s"].iloc[0] == pytest.approx(1500 / 0.1)
    rates = [15000, 15000, 10000]
    assert pts.loc[1]["rate_cv"] == pytest.approx(np.std(rates, ddof=1) / np.mean(rates))
    eff = chatter_effect(t["fanin.points"])
    assert len(eff) == 1
    # the point without chatter has no steady row: its window rate stands in
    assert pts.loc[0]["aggregate_bytes_per_s"] == pytest.approx(6000 / 0.3)
    assert eff[0]["drop_pct"] == pytest.approx(100 * (1 - steady / (6000 / 0.3)))
    var = t["fanin.variability"]
    assert list(var["runs"]) == [1, 1]
    res = Fanin().result(t, params())
    assert {p["chatter"] for p in res["points"]} == {0, 1}
    assert all(p["depth"] == "deep" for p in res["points"])


def test_variability_between_runs(tmp_path):
    # two runs of one configuration: the second got 1500 more bytes, all in its first bin
    text = RAW.split("#@point rep=0 clients=2 chatter=0")[0]
    second = text.replace("rep=0", "rep=1").replace("2,0,-1,0,1500,200,0", "2,0,-1,0,3000,200,0").replace(
        "1,1,0,1,3000,30,31", "1,1,0,1,4500,45,46").replace(
        "7,1,0,0,50000000,250000000,2000", "7,1,0,0,50000000,250000000,3500")
    second = second.split("\n", 2)[2]  # without the header lines
    (tmp_path / "a.raw").write_text(text)
    (tmp_path / "b.raw").write_text("#@hpcvar_raw=1\n#@columns=kind,rank,peer,idx,a,b,c\n" + second)
    t = Fanin().tables([read_raw(tmp_path / "a.raw"), read_raw(tmp_path / "b.raw")], params())
    v = t["fanin.variability"].iloc[0]
    assert v["runs"] == 2
    assert v["between_var"] > 0 and v["within_var"] > 0
    assert v["run_mean_max"] > v["run_mean_min"]


@pytest.mark.parametrize("args, flag", [
    (["--servers", "0"], "--servers"),
    (["--depth", "0"], "--depth"),
    (["--large", "0"], "--large"),
    (["--small", "0"], "--small"),
    (["--large", "1TiB"], "--large"),
    (["--clients", "4", "--np", "3"], "--clients"),
    (["--queues", "triple"], "--queues"),
    (["--match", "some"], "--match"),
    (["--wait", "sleep:0"], "--wait"),
    (["--wait", "nap"], "--wait"),
])
def test_cli_refuses_before_launch(runs_dir, args, flag):
    res = run_cli(["bench", "fanin", "--chatter-ratio", "0", *args])
    assert res.returncode == 2, res.stderr
    assert res.stderr.startswith("error: ") and f"({flag})" in res.stderr
    assert not runs_dir.exists() or not any(runs_dir.iterdir())


def test_wait_modes():
    assert parse_wait("AUTO") == "auto" and parse_wait("spin") == "spin" and parse_wait("yield") == "yield"
    assert parse_wait("sleep") == "sleep:50" and parse_wait("sleep:200us") == "sleep:200"
    assert parse_wait("sleep:1ms") == "sleep:1000"
    with pytest.raises(UsageError, match="has no unit"):
        parse_wait("sleep:20")  # microseconds or seconds would be a guess
    for bad in ("sleep:0us", "sleep:-1us", "sleep:x", "sleep:2s", "sleep:1.5us", "poll"):
        with pytest.raises(UsageError) as e:
            parse_wait(bad)
        assert e.value.where == "--wait"
    # auto spins while every rank has a core, sleeps when ranks outnumber the cores they share
    assert resolve_wait("auto", 2, 2) == "spin" and resolve_wait("auto", 4, 2) == "sleep:50"
    assert resolve_wait("auto", 64, None) == "spin"  # unknown cores (srun, template): MPI's own waiting
    assert resolve_wait("yield", 4, 2) == "yield"
    assert [wait_us(w) for w in ("spin", "yield", "sleep:50")] == [0, -1, 50]
