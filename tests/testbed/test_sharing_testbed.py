"""bench sharing on the network-namespace testbed (root): measured penalties and a fitted model.

Every scheme node is a testbed host (200 Mbit/s links); the checks are the issue's:
0->1 + 0->2 gives about 2, a 3-star about 3, and the gige model fitted on those two predicts a
held-out scheme (an incoming 3-star) with its E_abs printed.
"""

from __future__ import annotations

import itertools
import json
import os

import pytest

from tests.conftest import best_of_quiet_attempts, run_cli
from tests.testbed.conftest import up_testbed

pytestmark = pytest.mark.root

SIZE = "20MiB"  # the paper's size: 0.84 s alone at 200 Mbit/s (smaller sizes hide in TCP buffers)


@pytest.fixture(scope="module")
def testbed(tmp_path_factory):
    with up_testbed(tmp_path_factory, "hvsh-", 4) as env:
        yield env


def _bench(env, runs_dir, scheme):
    e = dict(env, HPCVAR_RUNS=str(runs_dir))
    res = run_cli(["bench", "sharing", scheme, "--launcher", "testbed", "--size", SIZE, "--reps", "3", "--json",
                   "--timeout", "120s"], env=e, check=True, timeout=200)
    out = json.loads(res.stdout)
    print(scheme, [(c["name"], round(c["penalty"], 2), [round(x, 2) for x in c["penalty_ci"]])
                   for c in out["communications"]])
    return out


def test_penalties_fit_and_held_out(testbed, runs_dir, tmp_path):
    env = dict(testbed, HPCVAR_RUNS=str(runs_dir))
    attempt = itertools.count()  # a fresh file per attempt

    def measure():
        two = _bench(testbed, runs_dir, "a: 0->1; b: 0->2")
        three = _bench(testbed, runs_dir, "a: 0->1; b: 0->2; c: 0->3")
        held = _bench(testbed, runs_dir, "a: 1->0; b: 2->0; c: 3->0")
        params = tmp_path / f"gige{next(attempt)}.json"
        fit = json.loads(run_cli(["model", "fit", two["run"], three["run"], "--out", str(params), "--json"],
                                 env=env, check=True).stdout)
        print(f"fitted beta = {fit['params']['beta']:.3f}")
        ev = json.loads(run_cli(["model", "evaluate", held["run"], "--params", str(params), "--json"], env=env,
                                check=True).stdout)
        print("held-out incoming 3-star E_abs (%):", {m: round(v, 1) for m, v in ev["e_abs_pct"].items()})
        return two, three, held, fit, ev

    def stored(m):
        assert os.path.isfile(os.path.join(m[2]["run"], "plots", "sharing-evaluation.png"))
        assert [len(out["communications"]) for out in m[:3]] == [2, 3, 3]

    def issue_checks(m):
        two, three, _, fit, ev = m
        for c in two["communications"]:
            assert 1.6 < c["penalty"] < 2.5, c
        for c in three["communications"]:
            assert 2.4 < c["penalty"] < 3.6, c
        assert 0.8 < fit["params"]["beta"] < 1.2  # a shaped link shared fairly: each of k transfers gets 1/k
        assert ev["e_abs_pct"]["gige"] < 25.0

    # rates on a shared VM: a host whose hypervisor takes the CPUs can spoil an attempt (tests/conftest.py)
    best_of_quiet_attempts(measure, issue_checks, tries=2, always=stored, what="the sharing penalties and fit")
