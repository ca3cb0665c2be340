"""Real 2-rank runs of hpcvar bench latency, checked through the stored run."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from hpcvar.results import Run, resolve_run
from hpcvar.results.rawio import raw_bytes, raw_files
from tests.conftest import run_cli

pytestmark = pytest.mark.mpi


def test_latency_json_and_stored_run(runs_dir):
    res = run_cli(["bench", "latency", "--np", "2", "--sizes", "8,4MiB", "--time-per-size", "200ms", "--json"],
                  check=True)
    out = json.loads(res.stdout)
    sizes = {s["size"]: s for s in out["sizes"]}
    assert set(sizes) == {8, 4 << 20}
    for s in sizes.values():
        assert 0 < s["median_ns"] <= s["p99_ns"]
        assert s["median_ci_ns"][0] <= s["median_ns"] <= s["median_ci_ns"][1]
        assert s["bw_bytes_per_s"] == pytest.approx(s["size"] / (s["median_ns"] * 1e-9))
    # a 4 MiB message takes longer than an 8-byte one on any MPI
    assert sizes[4 << 20]["median_ns"] > sizes[8]["median_ns"]

    run = Run.open(resolve_run("latest"))
    assert run.info["status"] == "complete"
    assert run.info["metadata"]["native"]["timer"] in ("tsc", "mono", "wtime")
    samples = run.read_table("latency.samples")
    assert (samples["oneway_ns"] * 2 == samples["rtt_ns"]).all()
    # rank 0's send is part of its round trip; it is timed from 64 KiB up (an extra clock read below)
    big = samples[samples["size_bytes"] == 4 << 20]
    assert ((big["send_ns"] > 0) & (big["send_ns"] < big["rtt_ns"])).all()
    assert samples[samples["size_bytes"] == 8]["send_ns"].isna().all()
    assert 0 < sizes[4 << 20]["send_median_ns"] and 0 <= sizes[4 << 20]["buffered_bytes"] <= 4 << 20
    assert sizes[8]["send_median_ns"] is None and sizes[8]["buffered_bytes"] is None
    # every iteration is kept: the summary's n equals the number of samples per size
    summary = run.read_table("latency.summary")
    counts = samples.groupby("size_bytes").size()
    for r in summary.itertuples():
        assert counts[r.size_bytes] == r.n
    shown = run_cli(["runs", "show", run.id], check=True)
    assert "bench latency" in shown.stdout and "4MiB" in shown.stdout


def test_resume_measures_only_missing_points(runs_dir):
    args = ["bench", "latency", "--np", "2", "--sizes", "8,64", "--time-per-size", "100ms", "--json"]
    run_cli(args, check=True)
    run = Run.open(resolve_run("latest"))
    # forget the second point, as if the job had been killed after the first
    (packed,) = raw_files(run.path / "raw")
    assert packed.name == "launch-001.raw.zst"  # stored compressed once the tables were written
    text = raw_bytes(packed).decode()
    cut = text.index("#@point size=64")
    packed.unlink()
    (run.path / "raw" / "launch-001.raw").write_text(text[:cut] + "#@point size=64 iters=3\n1,2\n")  # incomplete
    res = run_cli(args + ["--resume", run.id], check=True)
    out = json.loads(res.stdout)
    assert [s["size"] for s in out["sizes"]] == [8, 64]
    launches = raw_files(run.path / "raw")
    assert [p.name for p in launches] == ["launch-001.raw.zst", "launch-002.raw.zst"]
    assert "size=8 " not in raw_bytes(launches[1]).decode()  # the finished point was not measured again
    info = Run.open(run.path).info
    assert len(info["launches"]) == 2 and info["status"] == "complete"
    samples = pd.read_parquet(run.path / "latency.samples.parquet")
    assert set(samples["size_bytes"]) == {8, 64}
