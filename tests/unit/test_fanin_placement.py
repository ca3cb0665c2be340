"""Fan-in's root alone on its node where the launcher can place so, a warning when it shared its node, and a
negative "drop" under chatter called a rise (issue #27)."""

from __future__ import annotations

from rich.console import Console

from hpcvar.kinds.fanin.job import root_shares_node
from hpcvar.kinds.fanin.views import RISE_NOTE, drop_meaning, render
from tests.unit.test_testbed import mpich, plan3, spec


def test_the_testbed_puts_the_root_alone_on_its_host():
    p = plan3()
    s = spec(np=4, rpn=2)
    s.root_alone = True
    lau = mpich(p)
    assert lau.placement(s) == ["h1", "h2", "h2", "h3"]  # characterize's quick fan-in on 3 hosts
    assert lau.layout_args(s) == ["--expect-np", "4"]  # not K to a host: the hosts header shows it instead
    argv, _ = lau.command(s)
    assert "10.213.7.1:1,10.213.7.2:2,10.213.7.3:1" in argv
    s5 = spec(np=5, rpn=2)
    s5.root_alone = True
    assert lau.placement(s5) == ["h1", "h2", "h2", "h3", "h3"]
    # when the others do not fit on the other hosts, or ranks are dealt round-robin: the usual placement
    s6 = spec(np=6, rpn=2)
    s6.root_alone = True
    assert lau.placement(s6) == ["h1", "h1", "h2", "h2", "h3", "h3"]
    assert mpich(p, map_by="host", ranks_per_host=2).placement(s5) == ["h1", "h2", "h3", "h1", "h2"]
    # without root_alone nothing changes
    assert lau.placement(spec(np=4, rpn=2)) == ["h1", "h1", "h2", "h2"]


def test_characterize_asks_for_the_root_alone():
    from hpcvar.characterize import StepContext, _fanin

    seen = {}

    class Ctx(StepContext):
        def __init__(self):
            pass

        def nodes(self):
            return 3

        def bench_ctx(self, **over):
            seen.update(over)
            raise RuntimeError("stop")

    try:
        _fanin(Ctx(), quick=True)
    except RuntimeError:
        pass
    assert seen == {"np": None, "ranks_per_node": 2, "root_alone": True}


def test_a_root_sharing_its_node_is_said():
    why = root_shares_node(["a", "a", "b", "b"], 1, "fixed", "srun")
    assert why and "rank 0" in why and "node a" in why and "1 other rank(s) (1)" in why and "srun" in why
    assert root_shares_node(["a", "b", "b", "c"], 1, "fixed", "testbed") is None
    assert root_shares_node(["a", "a", "a"], 1, "fixed", "local") is None  # one node: no link anywhere
    assert root_shares_node(["a", "a", "b"], 1, "shuffle", "srun") is None  # roles drawn at random: unknown


def test_a_negative_drop_is_called_a_rise():
    assert "a rise, not a drop" in drop_meaning(-14.9, 2, 2) and "14.9%" in drop_meaning(-14.9, 2, 2)
    assert "rise" not in drop_meaning(12.0, 2, 2)


def test_the_terminal_table_explains_a_negative_drop():
    class FakeRun:
        info = {"result": {"servers": 1, "points": [], "large": 4 << 20, "small": 64 << 10, "variability": [],
                           "chatter_effect": [{"clients": 2, "queues": "single", "depth": "deep", "match": "any",
                                               "chatter": 2, "without_bytes_per_s": 1e8, "with_bytes_per_s": 1.15e8,
                                               "drop_pct": -15.0}]}}

    con = Console(record=True, width=200)
    render(con, FakeRun())
    assert RISE_NOTE in con.export_text()
