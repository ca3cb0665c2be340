"""Fuzzing every parser of user files: scheme, cluster and mapping files, noise traces (jtr, text, LogGOPSim,
CSV), event traces (TIT, the tracer's raw rank files, native Parquet), raw benchmark output, EA configs,
model parameter files, the testbed state and stored runs (run.json, Parquet tables): valid files mutated
(flipped bytes, truncation, troublesome numbers, duplicated lines)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hpcvar.noise import formats
from hpcvar.noise.collector import synth
from tests.fuzz.harness import FUZZ, mutated, outcome

ROOT = Path(__file__).resolve().parents[2]
_TMP: list[Path] = []  # the directory of the running module's files (the fixture below)


@pytest.fixture(scope="module", autouse=True)
def _fuzz_dir(tmp_path_factory):
    """The files the parsers read: one pytest temporary directory per module run (pytest removes old ones),
    not a directory made at import and left behind."""
    _TMP.append(tmp_path_factory.mktemp("fuzz-files"))
    yield
    _TMP.pop()


def _file(name: str, data: bytes) -> Path:
    p = _TMP[-1] / name
    p.write_bytes(data)
    return p


def _check_trace(tr) -> None:
    assert math.isfinite(tr.freq_hz) and tr.freq_hz > 0, tr.freq_hz
    for c in tr.cpus:
        assert (np.asarray(c.duration) >= 0).all(), "negative detour accepted"


SCHEME = (ROOT / "examples/schemes/fig4.scheme").read_bytes()
TRACE = synth([{"kind": "periodic", "hz": 1000.0, "duration_s": 5e-6, "phase_s": 0.0}], 0.02, 2, 1e9, 1)
SEEDS = {"jtr": formats.jtr_bytes(TRACE), "text": formats.text_string(TRACE).encode(),
         "loggopsim": formats.loggopsim_string(TRACE).encode(), "csv": formats.csv_string(TRACE).encode()}
EXT = {"jtr": ".jtr", "text": ".txt", "loggopsim": ".noise", "csv": ".csv"}


@FUZZ
@given(mutated(SCHEME))
def test_scheme(data):
    from hpcvar.models.scheme import parse_scheme

    outcome(parse_scheme, data.decode("utf-8", "replace"), "fuzz.scheme", where="fuzz.scheme")


CLUSTER = b"nodes 4\ncores_per_node 2\nbandwidth 1.25GB/s\nlatency 2us\nshm_bandwidth 10GB/s\nshm_latency 300ns\n" \
          b"link 0 1 1GB/s 5us  # a slower link\n"
MAPPING = b"# task node\n0 0\n1 0\n2 1\n3 1\n4 2\n5 3\n"


@FUZZ
@given(mutated(CLUSTER), mutated(MAPPING))
def test_cluster_and_mapping(cdata, mdata):
    from hpcvar.sim.replay import load_cluster, load_mapping

    cluster, _ = outcome(load_cluster, str(_file("c.cluster", cdata)), where="c.cluster")
    if cluster is not None:
        for k in ("bandwidth", "latency"):
            v = getattr(cluster, k)
            assert math.isfinite(v) and v >= 0 and (k != "bandwidth" or v > 0), (k, v)
        m, _ = outcome(load_mapping, str(_file("m.map", mdata)), 6, cluster, where="m.map")
        if m is not None:
            assert len(m) == 6 and all(0 <= n < cluster.nodes for n in m)


@FUZZ
@given(mutated(SEEDS["jtr"]))
def test_noise_jtr(data):
    tr, _ = outcome(formats.load_trace, _file("t.jtr", data), where="t.jtr")
    if tr is not None:
        _check_trace(tr)


@FUZZ
@given(mutated(SEEDS["text"]))
def test_noise_text(data):
    tr, _ = outcome(formats.load_trace, _file("t.txt", data))  # no frequency: the error names --freq
    if tr is not None:
        _check_trace(tr)


@FUZZ
@given(mutated(SEEDS["loggopsim"]))
def test_noise_loggopsim(data):
    tr, _ = outcome(formats.load_trace, _file("t.noise", data), 1e9, where="t.noise")
    if tr is not None:
        _check_trace(tr)


@FUZZ
@given(mutated(SEEDS["csv"]))
def test_noise_csv(data):
    tr, _ = outcome(formats.load_trace, _file("t.csv", data), 1e9, where="t.csv")
    if tr is not None:
        _check_trace(tr)


TIT = b"p0 init\np1 init\np0 compute 1000000\np0 send p1 1024\np1 recv p0 1024\np0 allReduce 8 1000 0\n" \
      b"p1 allReduce 8 1000 0\np0 Isend 1 8 1\np1 Irecv 0 2\np1 wait\np0 waitAll\np0 finalize\np1 finalize\n"
TIT_320 = b"0 init\n1 init 1\n0 compute 1e+06\n0 isend 1 7 128 0 \n1 irecv 0 7 128 0\n0 wait 0 1 7\n1 wait 0 1 7\n" \
          b"0 allreduce 8 1000 0 \n1 allreduce 8 1000 0 \n0 sendRecv 1 1 1 1 6 6\n1 sendRecv 1 0 1 0 6 6\n0 finalize\n"


@FUZZ
@given(mutated(TIT) | mutated(TIT_320))
def test_tit(data):
    """Both parsers (native/sim/tit.c and the Python reference) on the same bytes: the same rows or the same
    error."""
    import pandas as pd

    from hpcvar.traces import tit_native
    from hpcvar.traces.tit import read_tit

    results = []
    for engine in ("python", "native") if tit_native.available() else ("python",):
        tr, err = outcome(read_tit, _file("t.tit", data), engine=engine, where="t.tit")
        results.append((tr, err))
        if tr is not None:
            ev = tr.events
            for col in [c for c in ev.columns if c.endswith("_ns") or c.endswith("bytes")]:
                vals = ev[col].to_numpy(dtype=float)
                assert np.isfinite(vals).all() and (vals >= 0).all(), col
    (tr0, e0), (tr1, e1) = results[0], results[-1]
    assert (tr0 is None) == (tr1 is None), (e0, e1)
    if tr0 is not None:
        pd.testing.assert_frame_equal(tr0.events, tr1.events, check_exact=True)
    else:
        assert (e0.what, e0.where, e0.todo) == (e1.what, e1.where, e1.todo)


RAW = (b"#@program=hv_latency\n#@nranks=2\n#@timer=mono\n#@columns=rank,rep,t_start_ns,t_end_ns\n"
       b"#@point size=8\n0 0 100 200\n1 0 110 210\n#@point size=1024\n0 0 300 500\n")


@FUZZ
@given(mutated(RAW))
def test_raw_output(data):
    from hpcvar.results.rawio import read_raw

    outcome(read_raw, _file("launch-001.raw", data), where="launch-001.raw")


EA_TOML = b'[[ea]]\nname = "a"\npattern = "pairs"\nsize = "1MiB"\nload = 20\ncycles = 100\n' \
          b'[[ea]]\npattern = "ring"\nmode = "nonblocking"\nsize = 4096\nalpha = "75.9us"\nbeta = "0.01us/B"\n'


@FUZZ
@given(mutated(EA_TOML))
def test_ea_config(data):
    from hpcvar.kinds.ace.job import load_config

    outcome(load_config, _file("eas.toml", data), where="eas.toml")


PARAMS = json.dumps({"model": "gige", "params": {"beta": 0.7}, "schema_version": 1}).encode()


@FUZZ
@given(mutated(PARAMS))
def test_model_params(data):
    from hpcvar.models.sharing import load_params

    outcome(load_params, _file("params.json", data))


def _testbed_state() -> bytes:
    from hpcvar.testbed.plan import make_plan

    return json.dumps(make_plan(2, 1e9, prefix="fz-").to_json()).encode()


@FUZZ
@given(mutated(_testbed_state()))
def test_testbed_state(data):
    from hpcvar.testbed.plan import load_state

    outcome(load_state, _file("state.json", data), where="state.json")


def _raw_rank(rank: int, recs: list[tuple]) -> bytes:
    from hpcvar.traces.parquet import OPS
    from hpcvar.traces.parquet import RAW_RECORD_V1 as RAW_RECORD

    arr = np.zeros(len(recs), dtype=RAW_RECORD)
    for i, (op, peer, nbytes, t0, t1) in enumerate(recs):
        arr[i] = (t0, t1, nbytes, -1, OPS.index(op), peer, 0, 0)
    head = (f"HVTRACE 1\nrank={rank}\nsize=2\nclock=mono\nticks_per_ns=1.000000000\nclock_cost_tsc_ns=0.00\n"
            f"clock_cost_mono_ns=20.00\nend_reason=finalize\nrecords={len(recs)}\nrecord_bytes=48\nend\n")
    return head.encode() + arr.tobytes() + b"comm 1 2 0 1\n"


RAW0 = _raw_rank(0, [("init", -1, 0, 100, 100), ("send", 1, 8, 200, 300), ("allreduce", -1, 8, 310, 400),
                     ("finalize", -1, 0, 400, 400)])
RAW1 = _raw_rank(1, [("init", -1, 0, 150, 150), ("recv", 0, 8, 160, 320), ("allreduce", -1, 8, 330, 410),
                     ("finalize", -1, 0, 500, 500)])


def _check_events(tr) -> None:
    ev = tr.events
    assert 1 <= tr.ntasks <= 1 << 24
    for col in ("bytes", "t_start_ns", "t_end_ns"):
        assert (ev[col].to_numpy() >= 0).all(), col
    assert (ev["t_end_ns"].to_numpy() >= ev["t_start_ns"].to_numpy()).all()
    assert ev["peer"].between(-1, tr.ntasks - 1).all()


@FUZZ
@given(mutated(RAW1, max_mutations=4))
def test_tracer_raw_rank_files(data):
    """The tracer's rank.<r>.hvt files (a text header, binary records, communicator lines) merged into a
    trace: one rank's file damaged, the other intact."""
    from hpcvar.traces.parquet import merge_raw

    d = _TMP[-1] / "raw"
    d.mkdir(exist_ok=True)
    (d / "rank.0.hvt").write_bytes(RAW0)
    (d / "rank.1.hvt").write_bytes(data)
    tr, _ = outcome(merge_raw, d, where=str(d))
    if tr is not None:
        _check_events(tr)


def _native_trace():
    from hpcvar.traces.parquet import COLUMNS, Trace, make_events

    rows = [dict(task=0, op="init"), dict(task=0, op="send", peer=1, bytes=8, t_start_ns=200, t_end_ns=300),
            dict(task=0, op="finalize", t_start_ns=400, t_end_ns=400), dict(task=1, op="init"),
            dict(task=1, op="recv", peer=0, bytes=8, t_start_ns=160, t_end_ns=320),
            dict(task=1, op="finalize", t_start_ns=500, t_end_ns=500)]
    tr = Trace(make_events(rows), 2, comms={0: [0, 1], 1: [1, 0]})
    meta = json.dumps({"format": "hpcvar-trace", "version": 1, "ntasks": 2, "comms": {"0": [0, 1], "1": [1, 0]},
                       "timed": True, "source": "x"}).encode()
    return tr.events, meta, [c for c in COLUMNS if c != "op"]


TRACE_EV, TRACE_META, TRACE_INT_COLUMNS = _native_trace()
WEIRD_INTS = [-1, -2, 0, 1, 2, 3, 2**31 - 1, -(2**31), 2**32, 2**32 + 1, 2**62, 2**63 - 1, -(2**63), 10**17 + 1]


@st.composite
def native_traces(draw) -> bytes:
    """A native trace written by pyarrow (not by write_parquet, which checks): metadata JSON mutated, a few
    values replaced by troublesome ones, an op renamed, a column dropped; or the file's bytes mutated."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    ev = TRACE_EV.copy().astype({c: "int64" for c in TRACE_INT_COLUMNS})  # room for any troublesome value
    ev["op"] = ev["op"].astype(str)
    for _ in range(draw(st.integers(0, 3))):
        col = draw(st.sampled_from(TRACE_INT_COLUMNS))
        ev.loc[draw(st.integers(0, len(ev) - 1)), col] = draw(st.sampled_from(WEIRD_INTS))
    if draw(st.booleans()):
        ev.loc[draw(st.integers(0, len(ev) - 1)), "op"] = draw(st.sampled_from(["", "sendx", "wait", "bcast"]))
    if draw(st.integers(0, 9)) == 0:
        ev = ev.drop(columns=[draw(st.sampled_from(list(ev.columns)))])
    meta = draw(mutated(TRACE_META, max_mutations=3)) if draw(st.booleans()) else TRACE_META
    table = pa.Table.from_pandas(ev, preserve_index=False)
    table = table.replace_schema_metadata({**(table.schema.metadata or {}), b"hpcvar.trace": meta})
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    data = sink.getvalue().to_pybytes()
    return draw(mutated(data, max_mutations=2)) if draw(st.integers(0, 4)) == 0 else data


@FUZZ
@given(native_traces())
def test_native_parquet_trace(data):
    from hpcvar.traces.parquet import read_parquet

    tr, _ = outcome(read_parquet, _file("t.trace", data), where="t.trace")
    if tr is not None:
        _check_events(tr)
