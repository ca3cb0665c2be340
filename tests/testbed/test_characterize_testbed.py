"""characterize --quick on the network-namespace testbed (root): every step that applies runs across
shaped links, the sharing step included, and the report is written."""

from __future__ import annotations

import json

import pytest

from hpcvar.results import Run
from tests.conftest import run_cli
from tests.testbed.conftest import up_testbed

pytestmark = [pytest.mark.root, pytest.mark.mpi]


@pytest.fixture(scope="module")
def testbed(tmp_path_factory):
    with up_testbed(tmp_path_factory, "hvch-", 4) as env:
        yield env


@pytest.mark.timeout(1200)
def test_quick_characterization_on_the_testbed(testbed, runs_dir):
    res = run_cli(["characterize", "--quick", "--launcher", "testbed", "--np", "2", "--json"], env=testbed,
                  timeout=1200)
    assert res.returncode in (0, 3, 4), res.stdout + res.stderr  # the answer's code (docs/cli.md)
    out = json.loads(res.stdout)
    assert out["answer"]["exit_code"] == res.returncode and out["answer"]["line"]
    steps = {s["name"]: s for s in out["steps"]}
    assert all(s["status"] == "complete" for s in steps.values()), steps
    run = Run.open(out["run"])
    children = {c.info["params"]["step"]: c for c in run.children()}  # the last run of each step
    assert all("step" in c.info["params"] for c in run.children())
    lat = children["latency"].info
    assert lat["metadata"]["launcher"]["launcher"] == "testbed"
    assert len(set(lat["metadata"]["native"]["hosts"].split(","))) == 2  # the two ranks on two hosts
    sharing = children["sharing"]
    assert "gige_fit" in sharing.info and 0 < sharing.info["gige_fit"]["beta"] < 2
    html = open(out["report"]).read()
    assert "Bandwidth sharing" in html and "E_abs gige" in html
