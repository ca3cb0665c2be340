"""--json prints the declared summary tables (issue #19): each bench command's JSON result is built from
tables declared in hpcvar.results.schema, with the same keys as before."""

from __future__ import annotations

import math

import pandas as pd

from hpcvar.kinds.fanin.job import Fanin, FaninParams, chatter_effect, chatter_effect_table
from hpcvar.results.schema import TABLES, check_table


def _old_chatter_effect(points: pd.DataFrame) -> list[dict]:
    """The ad-hoc computation the JSON used before fanin.chatter_effect was a table (kept as the reference)."""
    out = []
    if points.empty:
        return out
    mean = points.groupby(["clients", "queues", "depth", "match", "chatter"], sort=True)[
        ["aggregate_bytes_per_s", "chatter_bytes_per_s"]].mean().reset_index()
    for (c, q, d, m), grp in mean.groupby(["clients", "queues", "depth", "match"], sort=True):
        base = grp[grp["chatter"] == 0]
        if base.empty:
            continue
        b = float(base["aggregate_bytes_per_s"].iloc[0])
        for r in grp[grp["chatter"] > 0].itertuples():
            out.append({"clients": int(c), "queues": q, "depth": "deep" if d == "deep" else int(d), "match": m,
                        "chatter": int(r.chatter), "without_bytes_per_s": b,
                        "with_bytes_per_s": float(r.aggregate_bytes_per_s),
                        "chatter_bytes_per_s": float(r.chatter_bytes_per_s),
                        "drop_pct": 100.0 * (1.0 - r.aggregate_bytes_per_s / b) if b > 0 else float("nan")})
    return out


def _points() -> pd.DataFrame:
    rows = []
    for rep in (0, 1):
        for clients, depth, chatter, agg, chat in [(2, "deep", 0, 100.0 + rep, 0.0), (2, "deep", 2, 80.0, 5.0),
                                                   (2, "deep", 4, 60.0 - rep, 9.0), (4, "20", 0, 0.0, 0.0),
                                                   (4, "20", 8, 10.0, 1.0), (1, "deep", 3, 7.0, 2.0)]:
            rows.append({"rep": rep, "clients": clients, "chatter": chatter, "queues": "single", "depth": depth,
                         "match": "any", "aggregate_bytes_per_s": agg, "chatter_bytes_per_s": chat})
    return pd.DataFrame(rows)


def _same(a: list[dict], b: list[dict]) -> bool:
    def norm(v):
        return "nan" if isinstance(v, float) and math.isnan(v) else v

    return [{k: norm(v) for k, v in d.items()} for d in a] == [{k: norm(v) for k, v in d.items()} for d in b] \
        and [list(d) for d in a] == [list(d) for d in b] \
        and [[type(v) for v in d.values()] for d in a] == [[type(v) for v in d.values()] for d in b]


def test_fanin_chatter_effect_is_a_declared_table_with_the_same_json():
    pts = _points()
    table = chatter_effect_table(pts)
    check_table("fanin.chatter_effect", table)
    assert len(table) == 3  # the (1 client) group has no point without chatter; (4, 20) divides by 0 -> NaN
    assert _same(chatter_effect(pts), _old_chatter_effect(pts))
    empty = chatter_effect_table(pts.iloc[:0])
    check_table("fanin.chatter_effect", empty)
    assert chatter_effect(pts.iloc[:0]) == [] == _old_chatter_effect(pts.iloc[:0])


def test_fanin_summaries_are_declared_and_feed_the_result():
    from hpcvar.kinds.fanin.job import variability

    pts = _points()
    for c in TABLES["fanin.points"]:
        if c not in pts:
            pts[c] = 0
    tables = {"fanin.points": pts, "fanin.variability": variability(pts, pd.DataFrame(
        {c: [] for c in TABLES["fanin.bins"]}))}
    params = FaninParams(servers=1, clients=(1,), chatter_ratio=(0.0,), chatter=None, large=1, small=1,
                         duration_s=1.0, messages=None, queues=("single",), depth=("deep",), match=("any",),
                         bin_s=None, repeat=2, placement="fixed", seed=0, max_samples=100, wait="spin")
    summ = Fanin().summaries(tables, params)
    assert set(summ) <= set(TABLES)
    with_table = Fanin().result({**tables, **summ}, params)
    without = Fanin().result(tables, params)  # a caller with the tidy tables only gets the same
    assert list(with_table) == list(without)
    assert _same(with_table["chatter_effect"], _old_chatter_effect(pts))
