"""Typed benchmark parameters (issue 19): every kind's Params round-trips through the run.json dict, writes the
same JSON as the parameter dicts of earlier versions, refuses unknown and missing keys, and a run stored by
those versions (a plain dict in run.json) resumes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hpcvar.bench.runner import BenchContext, Params, run_benchmark
from hpcvar.errors import ResultsError, UsageError
from hpcvar.kinds.ace import job as ace
from hpcvar.kinds.bsp.job import Baseline, BspParams
from hpcvar.kinds.fanin.job import FaninParams
from hpcvar.kinds.latency.job import Latency, LatencyParams
from hpcvar.kinds.queues.job import PostedParams, UnexpectedParams
from hpcvar.kinds.sharing.job import SharingParams
from hpcvar.launch import get_launcher
from hpcvar.models.scheme import load_scheme
from hpcvar.results import Run
from hpcvar.results.kinds import KINDS

# What the command lines of the dict era stored in run.json, key for key (cli/bench_*.py before the change)
OLD_DICTS: list[tuple[type[Params], dict]] = [
    (LatencyParams, {"sizes": [0, 8, 1024, 65536, 1048576], "iters": 1000, "min_iters": 10, "warmup": 100,
                     "time_per_size_s": 1.0}),
    (PostedParams, {"lengths": [0, 10, 100, 1000], "traversed": [0, 50, 100], "sizes": [8], "any_source": False,
                    "iters": 1000, "min_iters": 20, "warmup": 10, "time_per_point_s": 1.0, "pin": True,
                    "fit_stat": "median"}),
    (UnexpectedParams, {"lengths": [0, 10, 100, 1000], "sizes": [8], "iters": 1000, "min_iters": 20, "warmup": 10,
                        "time_per_point_s": 0.3, "pin": False, "fit_stat": "p10"}),
    (ace.AceParams, {"eas": [{"name": "", "pattern": "ring", "mode": "nonblocking", "size": 2048, "load": 12.5,
                              "cycles": 7, "ranks": 0.5, "alpha_s": 2e-06, "beta_s_per_byte": 1e-09,
                              "dims": None, "periodic": False, "bench_sizes": [0, 256, 1024], "where": "--ea"}],
                     "np": 4, "loads": [10, 20.5], "sizes": None, "repeat": 2, "bench_iters": 20,
                     "bench_warmup": 5}),
    (SharingParams, {"scheme": {"nodes": ["0", "1", "2"], "communications": [
        {"name": "a", "src": "0", "dst": "1", "size_bytes": None},
        {"name": "b", "src": "0", "dst": "2", "size_bytes": 1024}]}, "size": 20971520, "reps": 5, "warmup": 1}),
    (FaninParams, {"servers": 1, "clients": [1, 2], "chatter_ratio": [0.0, 4.0], "chatter": None, "large": 4194304,
                   "small": 4096, "duration_s": 2.0, "messages": None, "queues": ["single", "dual"],
                   "depth": ["deep", 20], "match": ["any"], "bin_s": None, "repeat": 1, "placement": "fixed",
                   "seed": 1, "max_samples": 20000, "wait": "sleep:50"}),
    (BspParams, {"quantum_s": 0.001, "phases": 1000, "warmup": 10, "repeat": 3, "barrier": "tree", "arity": 2,
                 "work_iters": 1234, "pin": True, "rt_prio": 0,
                 "baseline": {"run": "/runs/x", "id": "x", "params": {"quantum_s": 0.001, "barrier": "tree",
                                                                      "arity": 2, "step": "bsp"},
                              "np": 2, "per_phase_ns": 1000000.5, "work_iters": 1234}}),
    (BspParams, {"quantum_s": 0.001, "phases": 1000, "warmup": 10, "repeat": 3, "barrier": "mpi", "arity": 2,
                 "work_iters": None, "pin": False, "rt_prio": 10, "baseline": None}),
]
IDS = [f"{c.__name__}-{i}" for i, (c, _) in enumerate(OLD_DICTS)]


@pytest.mark.parametrize("cls,doc", OLD_DICTS, ids=IDS)
def test_round_trip_through_the_run_json_dict(cls, doc):
    text = json.dumps(doc, indent=2)
    p = cls.from_json(json.loads(text))
    assert json.dumps(p.to_json(), indent=2) == text  # same keys, order and values as the dict era
    again = cls.from_json(json.loads(json.dumps(p.to_json())))
    assert again == p and again.to_json() == p.to_json()
    with pytest.raises(AttributeError):
        p.repeat = 7  # frozen


def test_lists_become_tuples_and_nested_values_are_typed():
    p = FaninParams.from_json(OLD_DICTS[5][1])
    assert p.clients == (1, 2) and p.depth == ("deep", 20) and p.chatter is None
    a = ace.AceParams.from_json(OLD_DICTS[3][1])
    assert isinstance(a.eas[0], ace.EASpec) and a.eas[0].bench_sizes == [0, 256, 1024] and a.loads == (10, 20.5)
    b = BspParams.from_json(OLD_DICTS[6][1])
    assert isinstance(b.baseline, Baseline) and b.baseline.work_iters == 1234
    s = SharingParams.from_json(OLD_DICTS[4][1])
    assert [c.name for c in s.scheme.comms] == ["a", "b"] and s.scheme.comms[1].size_bytes == 1024


def test_cli_and_library_build_the_same_params():
    """The scheme object of the CLI and the one rebuilt from run.json give the same stored JSON."""
    sch = load_scheme("a: 0 -> 1; b: 0 -> 2 1KiB")
    p = SharingParams(scheme=sch, size=20 << 20, reps=5, warmup=1)
    assert p.to_json() == OLD_DICTS[4][1]
    assert SharingParams.from_json(p.to_json()).to_json() == p.to_json()


@pytest.mark.parametrize("cls,doc", OLD_DICTS[:6] + OLD_DICTS[7:], ids=IDS[:6] + IDS[7:])
def test_unknown_key_is_refused_by_name(cls, doc):
    with pytest.raises(ResultsError) as e:
        cls.from_json({**doc, "step": "latency"}, "runs/x/run.json")
    assert "unknown key 'step'" in e.value.what and e.value.where == "runs/x/run.json"
    assert cls.__name__ in e.value.what and e.value.todo


@pytest.mark.parametrize("cls,doc", OLD_DICTS, ids=IDS)
def test_missing_key_is_refused_by_name(cls, doc):
    key = list(doc)[-1]
    with pytest.raises(ResultsError) as e:
        cls.from_json({k: v for k, v in doc.items() if k != key}, "run.json")
    assert f"lack the key '{key}'" in e.value.what and e.value.where == "run.json"


def test_nested_values_are_checked_too():
    doc = OLD_DICTS[3][1]
    bad = {**doc, "eas": [{**doc["eas"][0], "colour": "red"}]}
    with pytest.raises(ResultsError, match="'colour'"):
        ace.AceParams.from_json(bad)
    with pytest.raises(ResultsError, match="baseline"):
        BspParams.from_json({**OLD_DICTS[6][1], "baseline": {"run": "x"}})
    with pytest.raises(ResultsError, match="scheme"):
        SharingParams.from_json({**OLD_DICTS[4][1], "scheme": {"nodes": ["0"]}})
    with pytest.raises(ResultsError, match="not a JSON object"):
        LatencyParams.from_json([1, 2])


def test_every_bench_kind_has_a_job():
    assert all(k.job for c, k in KINDS.items() if c.startswith("bench "))
    from hpcvar.kinds.bsp import job

    assert KINDS["bench bsp"].view("job") is job.job


# ---- resume of a run stored by the dict-era code -------------------------------------------------------------
RAW = """#@hpcvar_raw=1
#@encoding=csv
#@program=hv_latency
#@columns=iter,rtt_ns
#@point size=8 iters=2
0,1000
1,1200
#@point_end rows=2
#@point size=64 iters=2
0,1500
1,1700
#@point_end rows=2
"""


def _old_latency_run(runs_dir: Path, params: dict) -> Run:
    """A run as the dict-era runner left it when interrupted after measuring both points."""
    run = Run.create("bench latency", params, argv=["hpcvar", "bench", "latency"], metadata={"host": "h"})
    (run.raw_dir() / "launch-001.raw").write_text(RAW)
    run.finish("interrupted", exit_status=1)
    return run


def _resume(monkeypatch, run: Run, params: LatencyParams) -> tuple[Run, dict]:
    import hpcvar.bench.runner as runner

    monkeypatch.setattr(runner, "find_program", lambda *a, **k: Path("/nonexistent/hv_latency"))

    def no_launch(*a, **k):
        raise AssertionError("every point is stored: nothing to launch")

    monkeypatch.setattr(runner, "_launch", no_launch)
    ctx = BenchContext(launcher=get_launcher("local"), np=2, resume=run.id, progress=False)
    return run_benchmark(Latency(), params, ctx)


OLD_LATENCY = {"sizes": [8, 64], "iters": 100, "min_iters": 10, "warmup": 5, "time_per_size_s": 0.1}


def test_resume_a_run_stored_as_a_dict(runs_dir, monkeypatch):
    run = _old_latency_run(runs_dir, OLD_LATENCY)
    before = (run.path / "run.json").read_text()
    params = LatencyParams(sizes=(8, 64), iters=100, min_iters=10, warmup=5, time_per_size_s=0.1)
    again, result = _resume(monkeypatch, run, params)
    assert [s["size"] for s in result["sizes"]] == [8, 64]
    info = Run.open(again.path).info
    assert info["status"] == "complete"
    # the stored parameters are untouched, byte for byte
    assert json.dumps(info["params"], indent=2) == json.dumps(json.loads(before)["params"], indent=2)


def test_resume_with_other_params_is_refused(runs_dir, monkeypatch):
    run = _old_latency_run(runs_dir, OLD_LATENCY)
    params = LatencyParams(sizes=(8, 64), iters=200, min_iters=10, warmup=5, time_per_size_s=0.1)
    with pytest.raises(UsageError, match="parameters differ") as e:
        _resume(monkeypatch, run, params)
    assert e.value.where == "--resume"


def test_resume_of_a_run_with_an_unknown_key_names_it(runs_dir, monkeypatch):
    run = _old_latency_run(runs_dir, {**OLD_LATENCY, "colour": "red"})
    params = LatencyParams(sizes=(8, 64), iters=100, min_iters=10, warmup=5, time_per_size_s=0.1)
    with pytest.raises(ResultsError, match="unknown key 'colour'") as e:
        _resume(monkeypatch, run, params)
    assert e.value.where == str(run.path / "run.json")


def test_resume_of_a_characterize_step_points_to_the_characterization(runs_dir, monkeypatch):
    run = _old_latency_run(runs_dir, {**OLD_LATENCY, "step": "latency"})
    params = LatencyParams(sizes=(8, 64), iters=100, min_iters=10, warmup=5, time_per_size_s=0.1)
    with pytest.raises(UsageError, match="'latency' step of a characterization") as e:
        _resume(monkeypatch, run, params)
    assert e.value.where == "--resume"
