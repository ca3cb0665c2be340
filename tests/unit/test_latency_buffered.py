"""bench latency's send time and buffered bytes (hpcvar.kinds.latency): the formula, and runs recorded before
hv_latency kept the send time."""

from __future__ import annotations

import math

import pytest

from hpcvar.kinds.latency.job import Latency, LatencyParams, buffered_bytes
from hpcvar.results import read_raw

PARAMS = LatencyParams(sizes=(8, 1 << 20), iters=3, min_iters=1, warmup=0, time_per_size_s=1.0)

NEW = """#@hpcvar_raw=1
#@encoding=csv
#@program=hv_latency
#@columns=iter,rtt_ns,send_ns
#@point size=8 iters=3
0,1000,100
1,1200,110
2,1100,120
#@point_end rows=3
#@point size=1048576 iters=3
0,8000000,1000000
1,8000000,1000000
2,8000000,1000000
#@point_end rows=3
"""

OLD = """#@hpcvar_raw=1
#@encoding=csv
#@program=hv_latency
#@columns=iter,rtt_ns
#@point size=8 iters=1
0,1000
#@point_end rows=1
"""


def test_buffered_bytes_formula():
    # a 1 MB message takes 4 ms one way; the send returned after 1 ms: 3/4 of it were still on their way
    assert buffered_bytes(10**6, 1e6, 4e6) == pytest.approx(0.75e6)
    assert buffered_bytes(10**6, 4e6, 4e6) == 0.0            # returned with the transfer
    assert buffered_bytes(10**6, 5e6, 4e6) == 0.0            # later than the one-way time: clipped
    assert buffered_bytes(10**6, -1.0, 4e6) == 10**6         # never more than the message
    assert math.isnan(buffered_bytes(10**6, float("nan"), 4e6))
    assert math.isnan(buffered_bytes(10**6, 1e6, 0.0))


def test_summary_and_result_carry_send_and_buffered(tmp_path):
    (tmp_path / "a.raw").write_text(NEW)
    tables = Latency().tables([read_raw(tmp_path / "a.raw")], PARAMS)
    assert tables["latency.samples"]["send_ns"].tolist() == [100, 110, 120, 1e6, 1e6, 1e6]
    res = {s["size"]: s for s in Latency().result(tables, PARAMS)["sizes"]}
    assert res[8]["send_median_ns"] == 110
    assert res[1 << 20]["send_median_ns"] == 1e6
    assert res[1 << 20]["buffered_bytes"] == pytest.approx((1 << 20) * 0.75)


def test_runs_before_the_send_time_give_null(tmp_path):
    (tmp_path / "a.raw").write_text(OLD)
    tables = Latency().tables([read_raw(tmp_path / "a.raw")], PARAMS)
    assert tables["latency.samples"]["send_ns"].isna().all()
    (row,) = Latency().result(tables, PARAMS)["sizes"]
    assert row["send_median_ns"] is None and row["buffered_bytes"] is None
