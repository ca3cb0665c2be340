"""hpcvar export prometheus (issue 26): the text node_exporter's textfile collector reads, parsed back with
prometheus_client's parser: per node and CPU, per link and size, a screen's nodes and links, the answer as a
number, the run time; written atomically."""

from __future__ import annotations

import json
import shutil

import pandas as pd
import pytest

from hpcvar.results.store import Run, list_runs
from tests.conftest import run_cli
from tests.unit.test_old_runs import old_runs

parser = pytest.importorskip("prometheus_client.parser", reason="the test extra installs prometheus-client")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return old_runs(tmp_path_factory.mktemp("old"))


def _one(root, command, status="complete") -> Run:
    return next(r for r in list_runs(root) if r.info["command"] == command and r.info["status"] == status)


def _families(text: str) -> dict:
    return {f.name: f for f in parser.text_string_to_metric_families(text)}


def _samples(fam) -> dict:
    return {tuple(sorted(s.labels.items())): s.value for s in fam.samples}


def test_noise_and_latency_figures_parse_back_with_their_labels(runs, tmp_path):
    noise = _one(runs, "noise record")
    out = tmp_path / "textfile" / "hpcvar.prom"
    out.parent.mkdir()
    run_cli(["export", "prometheus", noise.id, "--runs-dir", str(runs), "-o", str(out)], check=True)
    text = out.read_text()
    assert text.endswith("\n") and list(out.parent.iterdir()) == [out]  # whole, no temporary file left
    fams = _families(text)
    assert all(f.type == "gauge" for f in fams.values())
    summary = noise.read_table("noise.summary")
    lost = _samples(fams["hpcvar_noise_lost_ratio"])
    assert len(lost) == len(summary) >= 1
    for r in summary.itertuples(index=False):
        key = (("cpu", str(r.cpu)), ("node", r.host))
        assert lost[key] == pytest.approx(r.noise_fraction)
        assert _samples(fams["hpcvar_noise_longest_detour_seconds"])[key] == pytest.approx(r.max_ns * 1e-9)
    (info,) = fams["hpcvar_run_info"].samples
    assert info.labels["run"] == noise.id and info.labels["command"] == "noise record" and info.value == 1
    assert fams["hpcvar_run_duration_seconds"].samples[0].value >= 0
    assert not any(s.timestamp for f in fams.values() for s in f.samples)  # the collector refuses timestamps

    lat = _one(runs, "bench latency")
    fams = _families(run_cli(["export", "prometheus", lat.id, "--runs-dir", str(runs)], check=True).stdout)
    q = _samples(fams["hpcvar_latency_seconds"])
    summ = lat.read_table("latency.summary").sort_values("size_bytes")
    host = lat.info["metadata"]["native"]["hosts"].split(",")
    for r in summ.itertuples(index=False):
        base = (("dst", host[1]), ("quantile", "0.5"), ("size_bytes", str(r.size_bytes)), ("src", host[0]))
        assert q[base] == pytest.approx(r.median_ns * 1e-9)
    assert {dict(k)["quantile"] for k in q} == {"0.5", "0.9", "0.99", "0.999"}
    (bw,) = fams["hpcvar_pingpong_bandwidth_bytes_per_second"].samples
    assert bw.value == pytest.approx(summ["bw_bytes_per_s"].iloc[-1])
    assert "hpcvar_verdict" not in fams  # a benchmark has no answer


def test_a_characterization_gives_its_steps_figures_its_answer_and_a_screen(runs, tmp_path):
    root = tmp_path / "runs"
    root.mkdir()
    char = Run.create("characterize", {"quick": True}, root, ["hpcvar"], {"host": "vm"})
    for command in ("bench latency", "noise record"):
        src = _one(runs, command)
        shutil.copytree(src.path, char.steps_dir() / src.id)
    screen = Run.create("screen", {}, char.steps_dir(), ["hpcvar"], {"host": "n1"})
    # a screen's tables as hpcvar screen (issue 31) stores them
    pd.DataFrame({"host": ["n1", "n2"], "metric": ["noise_fraction", "noise_fraction"], "value": [0.5, 7.0],
                  "ci_lo": [0.4, 6.0], "ci_hi": [0.6, 8.0], "unit": ["%", "%"], "outlier": [False, True]}
                 ).to_parquet(screen.path / "screen.node_metrics.parquet")
    pd.DataFrame({"src": ["n1", "n2"], "dst": ["n2", "n1"], "metric": ["link_bandwidth", "link_latency"],
                  "value": [1.1e8, 30000.0], "ci_lo": [1.0e8, 29000.0], "ci_hi": [1.2e8, 31000.0],
                  "unit": ["B/s", "ns"]}).to_parquet(screen.path / "screen.link_metrics.parquet")
    char.finish("complete", {"answer": {"status": "DEGRADED", "line": "DEGRADED: n2's OS noise", "exit_code": 3}})
    fams = _families(run_cli(["export", "prometheus", char.id, "--runs-dir", str(root)], check=True).stdout)
    assert fams["hpcvar_verdict"].samples[0].value == 3
    states = {s.labels["state"]: s.value for s in fams["hpcvar_verdict_state"].samples}
    assert states == {"OK": 0, "DEGRADED": 1, "UNRELIABLE": 0}
    assert {"hpcvar_latency_seconds", "hpcvar_noise_lost_ratio"} <= set(fams)  # the steps' figures
    node = _samples(fams["hpcvar_node_noise_lost_ratio"])
    assert node == {(("node", "n1"),): pytest.approx(0.005), (("node", "n2"),): pytest.approx(0.07)}
    assert _samples(fams["hpcvar_node_outlier"])[(("metric", "noise_fraction"), ("node", "n2"))] == 1
    assert _samples(fams["hpcvar_link_latency_seconds"]) == {(("dst", "n1"), ("src", "n2")): pytest.approx(3e-5)}
    link_bw = _samples(fams["hpcvar_link_bandwidth_bytes_per_second"])
    assert link_bw[(("dst", "n2"), ("src", "n1"))] == pytest.approx(1.1e8)


def test_bad_output_and_runs_are_named(runs, tmp_path):
    res = run_cli(["export", "prometheus", "latest", "--runs-dir", str(runs), "-o", str(tmp_path / "no" / "x.prom")])
    assert res.returncode == 2 and "does not exist (--out)" in res.stderr
    res = run_cli(["export", "prometheus", "nosuchrun", "--runs-dir", str(runs)])
    assert res.returncode == 2 and "no run 'nosuchrun'" in res.stderr


def _screen_run(root, noise_n2: float, bw: float) -> Run:
    screen = Run.create("screen", {}, root, ["hpcvar"], {"host": "n1"})
    pd.DataFrame({"host": ["n1", "n2"], "metric": ["noise_fraction", "noise_fraction"], "value": [0.5, noise_n2],
                  "ci_lo": [0.4, noise_n2 * 0.9], "ci_hi": [0.6, noise_n2 * 1.1], "unit": ["%", "%"],
                  "outlier": [False, False]}).to_parquet(screen.path / "screen.node_metrics.parquet")
    pd.DataFrame({"src": ["n1"], "dst": ["n2"], "metric": ["link_bandwidth"], "value": [bw], "ci_lo": [bw * 0.98],
                  "ci_hi": [bw * 1.01], "unit": ["B/s"]}).to_parquet(screen.path / "screen.link_metrics.parquet")
    screen.finish("complete", {"answer": {"status": "OK", "line": "OK", "exit_code": 0}})
    return Run.open(screen.path)


def test_reframe_references_bound_the_bad_side_from_the_dispersion(tmp_path):
    from hpcvar.export.reframe import refs_json

    one = _screen_run(tmp_path, 1.0, 1.0e8)
    ref = refs_json([one])["reference"]["*"]
    # noise: higher is worse, bounded above by its CI; bandwidth: bounded below by its CI; units ReFrame shows
    assert ref["node_noise_lost_pct_n2"] == [pytest.approx(1.0), None, pytest.approx(0.1), "%"]
    assert ref["link_bandwidth_MBps_n1_to_n2"] == [pytest.approx(100.0), pytest.approx(-0.02), None, "MB/s"]
    assert "verdict" not in ref and not any(k.startswith("run_") for k in ref)
    # several nights: the value is their median, the bound their range (and CIs)
    runs = [one, _screen_run(tmp_path, 2.0, 0.9e8), _screen_run(tmp_path, 1.5, 1.1e8)]
    doc = refs_json(runs)
    ref = doc["reference"]["*"]
    assert ref["node_noise_lost_pct_n2"][0] == pytest.approx(1.5)
    assert ref["node_noise_lost_pct_n2"][2] == pytest.approx(2.2 / 1.5 - 1)  # up to the worst night's CI
    assert ref["link_bandwidth_MBps_n1_to_n2"][1] == pytest.approx(0.9 * 0.98 - 1)
    assert "range of 3 runs" in doc["note"]
    # without the node in the names, every node's figure is one more value of one reference (--distribute)
    out = run_cli(["export", "reframe-refs", one.id, "--runs-dir", str(tmp_path), "--drop-label", "node"],
                  check=True).stdout
    merged = json.loads(out)["reference"]["*"]["node_noise_lost_pct"]
    assert merged[0] == pytest.approx(0.75) and merged[2] == pytest.approx(1.1 / 0.75 - 1)
