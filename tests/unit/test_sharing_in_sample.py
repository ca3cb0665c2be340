"""An error computed with parameters fitted on the same scheme is an in-sample fit: labelled as such and never
judged good or bad; only held-out errors are judged (issue #27)."""

from __future__ import annotations

import json

import pytest
from rich.console import Console

from hpcvar.kinds.sharing.views import render_evaluation, section
from hpcvar.report.sections import INFO
from hpcvar.report.verdict import judge_error_pct
from tests.conftest import run_cli
from tests.unit.test_old_runs import _by_command, old_runs

FIT = {"beta": 0.9, "gamma_out": 0.2, "gamma_in": 0.1}


@pytest.fixture
def sharing_run(tmp_path):
    runs = old_runs(tmp_path)
    return runs, _by_command(runs)["bench sharing"][0]


def _gige(sec):
    return next(h for h in sec.headlines if h.label.startswith("E_abs gige"))


def test_a_characterizations_fit_on_this_scheme_is_an_unjudged_in_sample_fit(sharing_run):
    _, run = sharing_run
    run.info["gige_fit"] = FIT
    run.info["gige_fit_runs"] = [run.id]
    run.save()
    sec = section(run)
    h = _gige(sec)
    assert "(in-sample fit)" in h.label and h.status == INFO
    assert "not judged" in h.reference and "in-sample fit" in sec.notes[0]
    # the other models have no parameter: their errors stay judged
    other = next(x for x in sec.headlines if x.label.startswith("E_abs myrinet"))
    assert "in-sample" not in other.label
    assert (other.status, other.reference) == judge_error_pct(float(other.value.rstrip("%")), "E_abs")


def test_an_old_characterization_without_the_runs_of_its_fit_is_in_sample(sharing_run):
    _, run = sharing_run
    run.info["gige_fit"] = FIT  # stored before gige_fit_runs: the fit took every scheme, this one too
    run.save()
    assert "(in-sample fit)" in _gige(section(run)).label


def test_a_held_out_fit_is_judged(sharing_run):
    _, run = sharing_run
    run.info["gige_fit"] = FIT
    run.info["gige_fit_runs"] = [run.id, "other"]
    run.info["gige_heldout_fit"] = {"params": FIT, "runs": ["other"]}
    run.save()
    sec = section(run)
    h = _gige(sec)
    assert "in-sample" not in h.label and "held out" in h.meaning
    assert (h.status, h.reference) == judge_error_pct(float(h.value.rstrip("%")), "E_abs")


def test_model_evaluate_marks_a_fit_on_the_same_run_in_sample(sharing_run, tmp_path):
    runs, run = sharing_run
    fit = tmp_path / "fit.json"
    run_cli(["model", "fit", run.id, "--runs-dir", str(runs), "-o", str(fit)], check=True)
    out = json.loads(run_cli(["model", "evaluate", run.id, "--params", str(fit), "--no-plots", "--json",
                              "--runs-dir", str(runs)], check=True).stdout)
    assert out["in_sample"] == {"gige": True, "myrinet": False, "maxmin": False}
    text = run_cli(["model", "evaluate", run.id, "--params", str(fit), "--no-plots", "--runs-dir", str(runs)],
                   check=True).stdout
    assert "(in-sample fit)" in text and "gige: in-sample fit" in text
    # the paper's parameters were fitted on no run here: held out
    out = json.loads(run_cli(["model", "evaluate", run.id, "--no-plots", "--json", "--runs-dir", str(runs)],
                             check=True).stdout)
    assert not any(out["in_sample"].values())


def test_the_terminal_table_says_in_sample():
    res = {"run_id": "r", "models": ["gige"], "e_abs_pct": {"gige": 0.5}, "in_sample": {"gige": True},
           "communications": [{"name": "a", "t_measured_ns": 1e6,
                               "predicted": {"gige": {"t_ns": 1e6, "e_rel_pct": 0.5}}}]}
    con = Console(record=True, width=200)
    render_evaluation(con, res)
    assert "0.5 (in-sample fit)" in con.export_text()


def test_the_characterization_holds_each_scheme_out_of_a_fit_when_the_others_can_fit():
    from hpcvar.characterize import _held_out_fit
    from hpcvar.models.fit import Observation, fit_gige

    two = Observation("r2", [("0", "1"), ("0", "2")], ["a", "b"], [1.9, 1.9])
    three = Observation("r3", [("0", "1"), ("0", "2"), ("0", "3")], ["a", "b", "c"], [2.8, 2.8, 2.8])
    held = _held_out_fit(fit_gige, [three])
    assert held is not None and held["runs"] == ["r3"] and held["params"]["beta"] == pytest.approx(2.8 / 3)
    assert _held_out_fit(fit_gige, []) is None  # one scheme only: its error can only be an in-sample fit
    lone = Observation("r4", [("0", "1")], ["a"], [1.0])  # no pure conflict: beta cannot be fitted
    assert _held_out_fit(fit_gige, [lone]) is None
    assert two.label == "r2"
