"""Report section of 'bench sharing' runs: measured penalties next to every model's prediction."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from hpcvar.report.sections import Headline, Section
from hpcvar.report.verdict import judge_error_pct


def sharing_section(run) -> Section:
    from hpcvar.models.evaluate import evaluate_run

    summ = run.read_table("sharing.summary").sort_values("comm_index")
    fitted = run.info.get("gige_fit")  # set by a characterization that fitted gige on its schemes
    res = evaluate_run(run, summ, ["gige", "myrinet", "maxmin"], fitted)
    rows = []
    for c in res["communications"]:
        rows.append({"comm": c["name"], "src -> dst": f"{c['src']} -> {c['dst']}",
                     "measured penalty": round(c["penalty_measured"], 3),
                     **{f"{m} penalty": round(c["predicted"][m]["penalty"], 3) for m in res["models"]},
                     **{f"{m} E_rel %": round(c["predicted"][m]["e_rel_pct"], 1) for m in res["models"]}})
    plots = plot_evaluation(run, res)
    t_ref = float(summ.t_ref_median_ns.iloc[0])
    scheme = ", ".join(f"{c['src']}->{c['dst']}" for c in res["communications"])
    return Section(
        title=f"Bandwidth sharing ({len(rows)} communications)",
        headlines=[Headline(f"T_ref [{scheme}]", f"{t_ref / 1e6:.3g} ms", "reference transfer alone (median)")]
        + [Headline(f"E_abs {m} [{scheme}]", f"{v:.1f}%",
                    "mean |E_rel| with " + ("the fitted parameters" if fitted and m == "gige" else
                                            "the paper's parameters" if m == "gige" else "no parameter"),
                    *judge_error_pct(v, "E_abs"))
           for m, v in res["e_abs_pct"].items()],
        tables=[("Measured and predicted penalties (Vienne et al. 2008, Figure 2 / Figure 7)", pd.DataFrame(rows))],
        figures=[("Predicted vs measured times", [p for p in plots if p.suffix == ".png"][0])],
        notes=[f"gige parameters fitted on this characterization's schemes: {fitted}." if fitted else
               "Predictions use the paper's gige parameters; fit your own with 'hpcvar model fit'."],
    )


def plot_evaluation(run, res: dict) -> list[Path]:
    import numpy as np

    from hpcvar.report.plots import figure, save

    fig, ax = figure()
    names = [c["name"] for c in res["communications"]]
    x = np.arange(len(names))
    k = len(res["models"]) + 1
    w = 0.8 / k
    ax.bar(x, [c["t_measured_ns"] / 1e6 for c in res["communications"]], w, label="measured", color="0.3")
    for i, m in enumerate(res["models"], start=1):
        ax.bar(x + i * w, [c["predicted"][m]["t_ns"] / 1e6 for c in res["communications"]], w,
               label=f"{m} (E_abs {res['e_abs_pct'][m]:.1f}%)")
    ax.set_xticks(x + w * (k - 1) / 2, names)
    ax.set_xlabel("communication")
    ax.set_ylabel("time (ms)")
    ax.set_title(f"Predicted vs measured, run {res['run_id']}")
    ax.legend(fontsize=8)
    return save(fig, run.plots_dir() / "sharing-evaluation")
