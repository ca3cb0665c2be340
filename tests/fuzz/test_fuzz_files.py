"""Fuzzing every parser of user files: scheme, cluster and mapping files, noise traces (jtr, text, LogGOPSim,
CSV), event traces (TIT, the tracer's raw rank files, native Parquet), raw benchmark output, EA configs,
model parameter files, the testbed state and stored runs (run.json, Parquet tables): valid files mutated
(flipped bytes, truncation, troublesome numbers, duplicated lines)."""

from __future__ import annotations

import json
import math
import tempfile
from pathlib import Path

import numpy as np
from hypothesis import given

from hpcvar.noise import formats
from hpcvar.noise.collector import synth
from tests.fuzz.harness import FUZZ, mutated, outcome

ROOT = Path(__file__).resolve().parents[2]
_TMP = Path(tempfile.mkdtemp(prefix="hpcvar-fuzz-"))


def _file(name: str, data: bytes) -> Path:
    p = _TMP / name
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
    from hpcvar.sim.app import load_cluster, load_mapping

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


TIT = b"p0 init\np1 init\np0 compute 1000000\np0 send p1 1024\np1 recv p0 1024\np0 allreduce 8 1000 0\n" \
      b"p1 allreduce 8 1000 0\np0 finalize\np1 finalize\n"


@FUZZ
@given(mutated(TIT))
def test_tit(data):
    from hpcvar.traces.tit import read_tit

    tr, _ = outcome(read_tit, _file("t.tit", data), where="t.tit")
    if tr is not None:
        ev = tr.events
        for col in [c for c in ev.columns if c.endswith("_ns") or c.endswith("bytes")]:
            vals = ev[col].to_numpy(dtype=float)
            assert np.isfinite(vals).all() and (vals >= 0).all(), col


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
    from hpcvar.bench.ace import load_config

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
