"""Real local (shared-memory) runs of hpcvar bench sharing, then fit and evaluate on them."""

from __future__ import annotations

import json

import pytest

from hpcvar.results import Run, resolve_run
from tests.conftest import run_cli

pytestmark = pytest.mark.mpi


def test_sharing_local_run_fit_and_evaluate(runs_dir, tmp_path):
    res = run_cli(["bench", "sharing", "a: 0->1; b: 0->2", "--size", "256KiB", "--reps", "3", "--json",
                   "--timeout", "90s"], check=True, timeout=150)
    out = json.loads(res.stdout)
    assert out["model"] == "measured"
    assert [c["name"] for c in out["communications"]] == ["a", "b"]
    for c in out["communications"]:
        assert c["n"] == 3 and c["penalty"] > 0 and c["t_ns"] > 0
        assert c["penalty_min"] <= c["penalty_max"]
        assert c["penalty"] == pytest.approx(c["t_ns"] / out["t_ref_ns"])
    run = Run.open(resolve_run("latest"))
    samples = run.read_table("sharing.samples")
    assert len(samples) == 6 and set(samples.comm) == {"a", "b"}
    assert "placement.comm1" in run.info["metadata"]["native"] or any(
        "placement" in k for k in run.info["metadata"]["native"])

    params = tmp_path / "g.json"
    fit = run_cli(["model", "fit", run.id, "--out", str(params), "--json"], check=True)
    beta = json.loads(fit.stdout)["params"]["beta"]
    assert beta == pytest.approx(sum(c["penalty"] * 2 for c in out["communications"]) / 8)  # sum(P D)/sum(D^2)
    ev = run_cli(["model", "evaluate", run.id, "--params", str(params), "--json"], check=True)
    e = json.loads(ev.stdout)
    assert set(e["e_abs_pct"]) == {"gige", "myrinet", "maxmin"}
    for m, v in e["e_abs_pct"].items():
        errs = [c["predicted"][m]["e_rel_pct"] for c in e["communications"]]
        assert v == pytest.approx(sum(abs(x) for x in errs) / len(errs))
    assert (run.path / "plots" / "sharing-evaluation.png").is_file()


def test_sharing_refuses_too_few_ranks_before_launch(runs_dir):
    res = run_cli(["bench", "sharing", "a: 0->1; b: 0->2", "--np", "3"])
    assert res.returncode == 2
    assert "(--np)" in res.stderr and "--np 4" in res.stderr
