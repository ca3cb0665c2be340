"""The demo and characterize do not warn about themselves: no remedy naming a flag they lack, no "N ranks share M
cores" about the placement a step chose itself (issue #27)."""

from __future__ import annotations

import os

import pandas as pd

from hpcvar.bench.runner import BenchContext, _oversubscription
from hpcvar.kinds.ace.job import Ace, more_iters_remedy
from hpcvar.launch.launchers import LocalLauncher
from hpcvar.results.store import Run


class _Busy:
    np_flag = "--np"

    def busy_polls(self, params) -> bool:
        return True


def test_a_step_of_characterize_records_shared_cores_without_a_warning(tmp_path):
    lau = LocalLauncher()
    np_ = (lau.slots() or os.cpu_count() or 1) + 4
    own = Run.create("bench fanin", {}, tmp_path)
    _oversubscription(_Busy(), None, BenchContext(launcher=lau, np=np_), own)
    assert any(f"{np_} ranks share" in w and "--np" in w for w in own.info["warnings"])  # the user's own command
    step = Run.create("bench fanin", {}, tmp_path)
    _oversubscription(_Busy(), None, BenchContext(launcher=lau, np=np_, within="characterize"), step)
    assert step.info["warnings"] == []
    assert step.info["cores_shared"] == {"ranks": np_, "cores": lau.slots(), "chosen_by": "characterize"}


def test_characterize_runs_its_steps_within_itself(tmp_path):
    from hpcvar.characterize import _child_ctx

    parent = Run.create("characterize", {}, tmp_path)
    ctx = _child_ctx(BenchContext(launcher=LocalLauncher(), np=2), parent)
    assert ctx.within == "characterize"


def test_ace_remedies_name_a_flag_of_the_command_that_ran_it():
    assert more_iters_remedy(None) == "raise --bench-iters"
    step = more_iters_remedy("characterize")
    assert "'hpcvar bench ace --bench-iters 100'" in step and "raise --bench-iters" not in step
    summ = pd.DataFrame([{"name": "ea0", "point": 0, "size_bytes": 1024, "load_pct": 20.0, "fit_fallback": True,
                          "alpha_ns": 5e3, "fixed": False, "pred_t_comm_ns": 1.0},
                         {"name": "ea0", "point": 1, "size_bytes": 1024, "load_pct": 50.0, "fit_fallback": False,
                          "alpha_ns": 5e3, "fixed": False, "pred_t_comm_ns": -1.0}])
    own = Ace().warnings({"ace.summary": summ}, None)
    assert len(own) == 2 and all("raise --bench-iters" in w for w in own) and "bench_sizes" in own[1]
    steps = Ace().warnings({"ace.summary": summ}, None, "characterize")
    assert len(steps) == 2 and not any("raise --bench-iters" in w or "bench_sizes" in w for w in steps)
