"""The views of 'bench sharing' runs (terminal table, report section with the measured penalties next to every
model's prediction, metrics, figure), and the terminal tables of 'hpcvar model penalties|evaluate'."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from rich.console import Console
from rich.table import Table

from hpcvar.compare import Metric
from hpcvar.report.sections import INFO, MODEL, Headline, Section
from hpcvar.report.terminal import nbytes, ns, seconds
from hpcvar.report.verdict import judge_error_pct
from hpcvar.results import Run
from hpcvar.units import format_interval, format_time_ns


def render(console: Console, run: Run) -> None:
    """A stored 'bench sharing' run: the measured penalties."""
    result = run.info["result"]
    t = Table(title=f"Bandwidth sharing, measured penalties (T_ref {format_time_ns(result['t_ref_ns'])}, "
                    f"{result['reps']} reps)", title_justify="left")
    for col in ("comm", "src -> dst", "size", "T (median)", "penalty", "95% CI", "min", "max"):
        t.add_column(col, justify="right", no_wrap=True)
    for c in result["communications"]:
        lo, hi = c["penalty_ci"]
        t.add_row(c["name"], f"{c['src']} -> {c['dst']}", nbytes(c["size_bytes"]), ns(c["t_ns"]),
                  f"{c['penalty']:.2f}", format_interval(lo, hi, c.get("n", result["reps"]), "{:.2f}".format, "-"),
                  f"{c['penalty_min']:.2f}", f"{c['penalty_max']:.2f}")
    console.print(t)


def render_penalties(console: Console, result: dict) -> None:
    t = Table(title=f"Model '{result['model']}' penalties", title_justify="left")
    cols = ["comm", "src -> dst", "penalty"]
    timed = any("t_predicted_s" in c for c in result["communications"])
    if timed:
        cols.append("predicted T")
    for col in cols:
        t.add_column(col, justify="right", no_wrap=True)
    for c in result["communications"]:
        row: list = [c["name"], f"{c['src']} -> {c['dst']}", f"{c['penalty']:.3f}"]
        if timed:
            row.append(seconds(c["t_predicted_s"]))
        t.add_row(*row)
    console.print(t)
    if result.get("params"):
        console.print("parameters: " + ", ".join(f"{k}={v}" for k, v in result["params"].items()))


def render_evaluation(console: Console, result: dict) -> None:
    models = result["models"]
    t = Table(title=f"Predicted vs measured times (run {result['run_id']}), E_rel in %", title_justify="left")
    t.add_column("comm", justify="right")
    t.add_column("T_m", justify="right")
    for m in models:
        t.add_column(f"T_p {m}", justify="right")
        t.add_column(f"E_rel {m}", justify="right")
    for c in result["communications"]:
        row: list = [c["name"], ns(c["t_measured_ns"])]
        for m in models:
            row += [ns(c["predicted"][m]["t_ns"]), f"{c['predicted'][m]['e_rel_pct']:+.1f}"]
        t.add_row(*row)
    in_sample = result.get("in_sample") or {}
    t.add_row("E_abs", "", *[x for m in models for x in ("", f"{result['e_abs_pct'][m]:.1f}"
                                                       + (" (in-sample fit)" if in_sample.get(m) else ""))],
              style="bold")
    console.print(t)
    for m in models:
        if in_sample.get(m):
            console.print(f"{m}: in-sample fit: its parameters were fitted on this run, so its E_abs says how well "
                          "the fit matches its own points, not how well it predicts; evaluate it on a run it was "
                          "not fitted on")
    for p in result.get("plots", []):
        console.print(f"plot: {p}")


def metrics(run: Run) -> list[Metric]:
    s = run.read_table("sharing.samples")
    return [Metric(f"sharing {comm} ({src}->{dst}) time", g["t_ns"].to_numpy(), True, "ns")
            for (comm, src, dst), g in s.groupby(["comm", "src", "dst"])]


def plots(run: Run) -> list[Path]:
    """The predicted vs measured times (every model, the paper's or the fitted gige parameters)."""
    return plot_evaluation(run, _evaluate(run)[0])


def _evaluate(run: Run) -> tuple[dict, str]:
    """The evaluation of a run and where its gige parameters come from: ``paper``, ``held-out`` (fitted on a
    characterization's other schemes) or ``in-sample`` (fitted on schemes that include this one)."""
    from hpcvar.models.evaluate import evaluate_run

    summ = run.read_table("sharing.summary").sort_values("comm_index")
    models = ["gige", "myrinet", "maxmin"]
    held = run.info.get("gige_heldout_fit")  # a characterization's fit on its other schemes
    if held:
        return evaluate_run(run, summ, models, held["params"], held["runs"]), "held-out"
    fitted = run.info.get("gige_fit")  # a characterization's fit on its schemes, this one among them
    if fitted:
        # runs stored before gige_fit_runs: the characterization fitted on every scheme it ran, this one too
        return evaluate_run(run, summ, models, fitted, run.info.get("gige_fit_runs") or [run.id]), "in-sample"
    return evaluate_run(run, summ, models, None), "paper"


_PARAMS_TEXT = {"held-out": "the gige parameters fitted on the characterization's other schemes (held out)",
                "in-sample": "the gige parameters fitted on this scheme (in-sample fit)",
                "paper": "the paper's gige parameters"}


def _e_abs_headline(scheme: str, m: str, v: float, in_sample: bool, how: str) -> Headline:
    """A model's E_abs: judged when it is a prediction of data the model was not fitted on; an in-sample fit
    (parameters fitted on this scheme) says how well the fit matches its own points and is never judged."""
    params = _PARAMS_TEXT[how] if m == "gige" else "no parameter"
    if in_sample:
        return Headline(f"E_abs {m} [{scheme}] (in-sample fit)", f"{v:.1f}%", f"mean |E_rel| with {params}",
                        INFO, "in-sample fit: the parameters were fitted on this scheme, so this error is not "
                        "a prediction error and is not judged; only held-out errors are", role=MODEL)
    return Headline(f"E_abs {m} [{scheme}]", f"{v:.1f}%", f"mean |E_rel| with {params}",
                    *judge_error_pct(v, "E_abs"), role=MODEL)


def section(run: Run) -> Section:
    res, how = _evaluate(run)
    summ = run.read_table("sharing.summary").sort_values("comm_index")
    rows = []
    for c in res["communications"]:
        rows.append({"comm": c["name"], "src -> dst": f"{c['src']} -> {c['dst']}",
                     "measured penalty": round(c["penalty_measured"], 3),
                     **{f"{m} penalty": round(c["predicted"][m]["penalty"], 3) for m in res["models"]},
                     **{f"{m} E_rel %": round(c["predicted"][m]["e_rel_pct"], 1) for m in res["models"]}})
    plots = plot_evaluation(run, res)
    t_ref = float(summ.t_ref_median_ns.iloc[0])
    scheme = ", ".join(f"{c['src']}->{c['dst']}" for c in res["communications"])
    notes = {"held-out": f"gige parameters fitted on the characterization's other schemes: "
                         f"{run.info['gige_heldout_fit']['params'] if how == 'held-out' else ''}; on all its schemes "
                         f"(this one included): {run.info.get('gige_fit')}.",
             "in-sample": f"gige parameters fitted on this characterization's schemes, this one included: "
                          f"{run.info.get('gige_fit')}. The gige error is an in-sample fit, not judged: run schemes "
                          "the fit did not see (a characterization on 4 nodes or more holds one out of the fit of "
                          "each other) or 'hpcvar model evaluate --params' on another run.",
             "paper": "Predictions use the paper's gige parameters; fit your own with 'hpcvar model fit'."}
    return Section(
        title=f"Bandwidth sharing ({len(rows)} communications)",
        headlines=[Headline(f"T_ref [{scheme}]", f"{t_ref / 1e6:.3g} ms", "reference transfer alone (median)")]
        + [_e_abs_headline(scheme, m, v, res["in_sample"][m], how) for m, v in res["e_abs_pct"].items()],
        tables=[("Measured and predicted penalties (Vienne et al. 2008, Figure 2 / Figure 7)", pd.DataFrame(rows))],
        figures=[("Predicted vs measured times", [p for p in plots if p.suffix == ".png"][0])],
        notes=[notes[how]],
    )


def plot_evaluation(run, res: dict) -> list[Path]:
    """Penalties (time / T_ref: measured and each model's, the paper's Figure 2 scale) and each model's E_rel
    per communication: a difference of 1% that bars of 1730-1760 ms hide on a 0-1750 ms axis is plain on the
    E_rel panel. The legend sits under the panels, never over the bars."""
    import numpy as np

    from hpcvar.report.plots import figure, save

    comms = res["communications"]
    names = [c["name"] for c in comms]
    x = np.arange(len(names))
    k = len(res["models"]) + 1
    w = 0.8 / k
    fig, (pen, err) = figure(1, 2, figsize=(10.0, 4.2))
    pen.bar(x, [c["penalty_measured"] for c in comms], w, label="measured", color="0.3")
    for i, m in enumerate(res["models"], start=1):
        pen.bar(x + i * w, [c["predicted"][m]["penalty"] for c in comms], w, color=f"C{i - 1}",
                label=f"{m} (E_abs {res['e_abs_pct'][m]:.1f}%"
                      + (", in-sample fit)" if (res.get("in_sample") or {}).get(m) else ")"))
        err.bar(x + i * w, [c["predicted"][m]["e_rel_pct"] for c in comms],
                w, color=f"C{i - 1}")
    pen.set_xticks(x + w * (k - 1) / 2, names)
    pen.set(xlabel="communication", ylabel="penalty (time / T_ref)", title="Penalties")
    pen.axhline(1.0, color="0.5", lw=0.8)
    err.set_xticks(x + w * (k - 1) / 2, names)
    err.axhline(0.0, color="0.3", lw=0.8)
    err.set(xlabel="communication", ylabel="E_rel (%)", title="E_rel = (predicted - measured) / measured")
    fig.suptitle(f"Predicted vs measured, run {res['run_id']}")
    fig.legend(*pen.get_legend_handles_labels(), loc="lower center", ncol=k, fontsize=8, frameon=False,
               bbox_to_anchor=(0.5, -0.02))
    return save(fig, run.plots_dir() / "sharing-evaluation")
