"""What hpcvar writes for other programs is standard JSON (RFC 8259): numbers that are not finite are null."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import numpy as np
import pytest

from hpcvar.results import dumps_standard
from hpcvar.results.store import finite


def _strict(text: str):
    def refuse(name):
        raise ValueError(f"{name} is not standard JSON")

    return json.loads(text, parse_constant=refuse)


def test_numbers_that_are_not_finite_become_null_anywhere():
    doc = {"nan": math.nan, "inf": [math.inf, -math.inf, 1.5], "np": np.float32("nan"), "arr": np.array([1.0, np.inf]),
           "t": (np.int64(3), np.bool_(True), "x"), "nested": [{"a": float("-inf")}], "ok": 2.25}
    assert _strict(dumps_standard(doc)) == {"nan": None, "inf": [None, None, 1.5], "np": None, "arr": [1.0, None],
                                            "t": [3, True, "x"], "nested": [{"a": None}], "ok": 2.25}
    assert finite("text") == "text" and finite(None) is None and finite(0.0) == 0.0


def test_a_value_json_cannot_hold_is_still_refused():
    with pytest.raises(TypeError, match="object is not JSON serializable"):
        dumps_standard({"x": object()})


def test_the_command_line_prints_standard_json(tmp_path):
    """--json through the CLI: a stored result holding NaN and an infinity prints them as null."""
    from hpcvar.results import Run

    run = Run.create("sim app", {}, runs_dir=tmp_path)
    run.finish(result={"mean_e_abs_pct": math.nan, "change_pct": math.inf, "tasks": [{"e_abs_pct": 1.25}]})
    out = subprocess.run([sys.executable, "-m", "hpcvar", "runs", "show", run.id, "--json", "--runs-dir",
                          str(tmp_path)], capture_output=True, text=True, check=True).stdout
    assert _strict(out)["result"] == {"mean_e_abs_pct": None, "change_pct": None, "tasks": [{"e_abs_pct": 1.25}]}
    assert "NaN" in (run.path / "run.json").read_text()  # the store keeps what it computed


def test_the_reframe_test_reads_a_null_figure_as_nan(tmp_path):
    """export reframe-refs writes a figure measured without a value as null now: the ReFrame test's performance
    variable is NaN, as it was when the file held NaN, not a TypeError."""
    pytest.importorskip("reframe")
    import reframe.utility.sanity as sn

    from hpcvar.integrations.reframe import _perf_value

    f = tmp_path / "hpcvar-perf.json"
    f.write_text(dumps_standard({"reference": {"*": {"a": [math.nan, None, None, "us"], "b": [2.5, None, 0.1, "us"]}}}))
    assert math.isnan(sn.evaluate(_perf_value(str(f), "a"))) and sn.evaluate(_perf_value(str(f), "b")) == 2.5
