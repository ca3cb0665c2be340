"""Inputs the fuzz campaign found, kept as explicit cases: each ends in one HpcvarError naming file:line (or
the flag), never an OverflowError, a MemoryError or an accepted absurd value."""

from __future__ import annotations

import pytest

from hpcvar.errors import HpcvarError
from hpcvar.noise import formats
from hpcvar.sim.replay import Cluster, load_cluster, load_mapping
from hpcvar.traces.tit import read_tit

HUGE = "9" * 30
CLUSTER = "nodes 4\ncores_per_node 2\nbandwidth 1.25GB/s\nlatency 2us\n"


def _err(fn, *args) -> HpcvarError:
    with pytest.raises(HpcvarError) as ei:
        fn(*args)
    e = ei.value
    assert e.where and "\n" not in e.what
    return e


@pytest.mark.parametrize("line", [f"nodes {HUGE}", "nodes 1e999", "nodes inf", "nodes nan", "nodes 2.5", "nodes 0",
                                  "cores_per_node -1", "bandwidth 0", "bandwidth inf", "bandwidth -5",
                                  "latency nan", "latency -1e-6", "latency 1e300", "shm_bandwidth 1e999",
                                  "bandwidth 0B/s", "bandwidth -5GB/s", "bandwidth infGB/s", "latency -1us",
                                  "latency 1e300s", "latency nans", "shm_bandwidth 1e999B/s",
                                  f"link {HUGE} 1 1GB/s 1us", "link 0 1 nanB/s 1us", "link 0 1 1GB/s -1us",
                                  "link -1 0 1GB/s 1us", "link 0 1 1e9 1e-6"])
def test_cluster_absurd_values(tmp_path, line):
    f = tmp_path / "c.cluster"
    f.write_text(CLUSTER + line + "\n")
    e = _err(load_cluster, str(f))
    assert e.where == f"{f}:5", e.render()


def test_cluster_link_outside_names_its_line(tmp_path):
    f = tmp_path / "c.cluster"
    f.write_text(CLUSTER + "link 0 7 1GB/s 1us\n")
    assert _err(load_cluster, str(f)).where == f"{f}:5"


@pytest.mark.parametrize("line", [f"{HUGE} 0", f"0 {HUGE}", "-1 0", "0 -1", "1e3 0", "0 1 2"])
def test_mapping_absurd_values(tmp_path, line):
    f = tmp_path / "m.map"
    f.write_text("0 0\n" + line + "\n")
    e = _err(load_mapping, str(f), 2, Cluster(2, 2, 1e9, 1e-6))
    assert e.where == f"{f}:2", e.render()


@pytest.mark.parametrize("body", [f"{HUGE} 10\n", f"10 {HUGE}\n", f"# cpu {HUGE}\n1 2\n",
                                  f"# cpu 0 lead_in_cycles {HUGE}\n1 2\n", "# freq_hz 1e999\n1 2\n",
                                  "# freq_hz 1e13\n1 2\n", "# freq_hz 0\n1 2\n", "-1 2\n"])
def test_text_trace_absurd_values(tmp_path, body):
    f = tmp_path / "t.txt"
    f.write_text("# freq_hz 1e9\n" + body if "freq_hz" not in body else body)
    e = _err(formats.load_trace, f)
    assert e.where.startswith(f"{f}:"), e.render()


def test_text_trace_too_long(tmp_path):
    f = tmp_path / "t.txt"  # each value fits, their sum (the trace's length) does not fit int64
    f.write_text("# freq_hz 1e9\n" + "4000000000000000000 4000000000000000000\n" * 3)
    assert str(f) in _err(formats.load_trace, f).where


@pytest.mark.parametrize("body", [f"0,{HUGE},1\n", f"0,1,{HUGE}\n", f"{HUGE},1,1\n", "0,-1,1\n"])
def test_csv_trace_absurd_values(tmp_path, body):
    f = tmp_path / "t.csv"
    f.write_text("# freq_hz=1e9\ncpu,duration_cycles,gap_cycles\n" + body)
    assert _err(formats.load_trace, f).where == f"{f}:3"


@pytest.mark.parametrize("head,body", [("freq_hz 1e999", "0\t10"), ("length_ns 1e999", "0\t10"),
                                       ("", "1e300\t10"), ("", f"0\t{HUGE}"), (f"cpu {HUGE}", "0\t10")])
def test_loggopsim_trace_absurd_values(tmp_path, head, body):
    f = tmp_path / "t.noise"
    f.write_text(f"# {head}\n{body}\n")
    assert str(f) in _err(formats.load_trace, f, 1e9).where


def test_freq_flag_refuses_inf(tmp_path):
    f = tmp_path / "t.txt"
    f.write_text("1 2\n")
    assert _err(formats.load_trace, f, float("inf")).where == "--freq"


@pytest.mark.parametrize("line", ["p0 compute 1e400", "p0 compute -5", "p0 compute nan", "p0 sleep 1e300",
                                  "p0 sleep -1", "p0 send p1 1e400", "p0 send p1 -8", f"p0 send p1 {HUGE}",
                                  f"p{HUGE} init", f"{HUGE} init", "p0 send p-1 8", f"p0 bcast 8 {HUGE}",
                                  "p0 allreduce inf 1000", "p0 send p5 8"])
def test_tit_absurd_values(tmp_path, line):
    f = tmp_path / "t.tit"
    f.write_text("p0 init\np1 init\n" + line + "\n")
    e = _err(read_tit, f)
    assert e.where == f"{f}:3", e.render()


def test_tit_clock_beyond_max(tmp_path):
    f = tmp_path / "t.tit"
    f.write_text("p0 init\n" + "p0 sleep 9e7\n" * 3)
    assert _err(read_tit, f).where == f"{f}:3"


def test_campaign_counts_cases_of_both_statistics_formats():
    from tests.fuzz.run_campaign import count_cases

    out = ("tests/fuzz/a.py::test_a:\n\n  - during generate phase (0.08 seconds):\n"
           "    - 150 passing, 2 failing, and 1 invalid test cases\n\n"
           "  - during shrink phase (1.00 seconds):\n    - 0 passing, 30 failing, and 0 invalid test cases\n\n"
           "tests/fuzz/a.py::test_b:\n\n  - during generate phase (0.50 seconds):\n"
           "    - 100 passing examples, 0 failing examples, 0 invalid examples\n")
    n = count_cases(out)
    assert (n["tests"], n["cases"], n["passing"], n["failing"], n["invalid"]) == (2, 283, 250, 32, 1)


def test_range_from_zero_to_zero_ends():
    from hpcvar.units import parse_list, parse_size, parse_time
    from tests.fuzz.harness import no_hang

    with no_hang("parse_list"):
        assert parse_list("0..0", parse_size, "--sizes") == [0]
        assert parse_list("0..0:x3", parse_time, "--times") == [0.0]


@pytest.mark.parametrize("text", ["1_0001_0001_000", "4294967297", str(1 << 21)])
def test_fanin_depth_beyond_c_int_refused(text):
    from hpcvar.kinds.fanin.job import parse_depth_list

    assert _err(parse_depth_list, text, "--depth").where == "--depth"


@pytest.mark.parametrize("pandas_meta", [b'{"columns": [{"name": "hz", "numpy_type": "eloat64"}]}',
                                         b'{"index_columns": [], "columns": [{"name": "hz"}]}', b'[1]'])
def test_parquet_with_damaged_pandas_metadata(tmp_path, pandas_meta):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from hpcvar.errors import ResultsError
    from hpcvar.results import Run

    run = Run.create("bench latency", {}, tmp_path, argv=["hpcvar"])
    t = pa.table({"hz": [250.0]}).replace_schema_metadata({b"pandas": pandas_meta})
    pq.write_table(t, run.path / "noise.periods.parquet")
    with pytest.raises(ResultsError) as ei:
        run.read_table("noise.periods")
    assert "noise.periods.parquet" in ei.value.where


def test_native_trace_int64_values_do_not_wrap_into_int32(tmp_path):
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq

    from hpcvar.traces.parquet import read_parquet

    t = pa.table({"task": pa.array([0, 2**32], pa.int64()), "seq": [0, 0], "op": ["init", "init"],
                  "peer": [-1, -1], "bytes": [0, 0], "tag": [0, 0], "comm": [0, 0], "t_start_ns": [0, 0],
                  "t_end_ns": [0, 0], "req": [-1, -1]})
    meta = {"format": "hpcvar-trace", "version": 1, "ntasks": 1}
    pq.write_table(t.replace_schema_metadata({b"hpcvar.trace": json.dumps(meta).encode()}), tmp_path / "t.trace")
    assert "t.trace" in _err(read_parquet, tmp_path / "t.trace").where


@pytest.mark.parametrize("meta", [b"[1]", b"{", b'{"version": 1, "ntasks": 1000000000000}',
                                  b'{"version": 1, "ntasks": 2, "comms": {"1": [0, 7]}}', b'{"version": 1}'])
def test_native_trace_damaged_metadata(tmp_path, meta):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from hpcvar.traces.parquet import read_parquet

    t = pa.table({"task": [0], "seq": [0], "op": ["init"], "peer": [-1], "bytes": [0], "tag": [0], "comm": [0],
                  "t_start_ns": [0], "t_end_ns": [0], "req": [-1]})
    pq.write_table(t.replace_schema_metadata({b"hpcvar.trace": meta}), tmp_path / "t.trace")
    assert "t.trace" in _err(read_parquet, tmp_path / "t.trace").where


@pytest.mark.parametrize("change", [("records=1", "records=x"), ("size=2", f"size={HUGE}"), ("rank=1", "rank=5"),
                                    ("comm 1 2 0 1", "comm 1 2 0 9"), ("comm 1 2 0 1", "comm x 2 0 1")])
def test_raw_rank_header_damage(tmp_path, change):
    import numpy as np

    from hpcvar.traces.parquet import RAW_RECORD_V1 as RAW_RECORD
    from hpcvar.traces.parquet import merge_raw

    for r in (0, 1):
        head = f"HVTRACE 1\nrank={r}\nsize=2\nclock=mono\nrecords=1\nrecord_bytes=48\nend\n"
        data = head.encode() + np.zeros(1, RAW_RECORD).tobytes() + b"comm 1 2 0 1\n"
        if r == 1:
            data = data.replace(change[0].encode(), change[1].encode())
        (tmp_path / f"rank.{r}.hvt").write_bytes(data)
    e = _err(merge_raw, tmp_path)
    assert "rank.1.hvt" in e.where, e.render()


def test_otf2_damaged_definitions_are_an_input_error(tmp_path):
    pytest.importorskip("otf2", reason="the optional otf2 package is not installed")
    from hpcvar.traces.otf2_import import read_otf2
    from tests.unit.test_replay_traces import _write_otf2

    anchor = _write_otf2(tmp_path / "arch")
    (tmp_path / "arch" / "traces" / "0.def").write_bytes(b"\x03B")  # truncated
    assert "traces.otf2" in _err(read_otf2, anchor).where


@pytest.mark.parametrize("rate", [0.0, -1.0, float("nan"), float("inf"), 1e30])
def test_tit_flops_rate_refused(tmp_path, rate):
    f = tmp_path / "t.tit"
    f.write_text("p0 init\np0 compute 1000\np0 finalize\n")
    assert _err(read_tit, f, rate).where == "--flops-rate"
