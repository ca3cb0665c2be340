"""Sharing models against a measured 'bench sharing' run: predicted time and E_rel per communication, E_abs
per model (Vienne et al., "Predictive models for bandwidth sharing in high performance clusters")."""

from __future__ import annotations


def evaluate_run(run, summ, models: list[str], gige_params: dict | None, fitted_on: list[str] | None = None) -> dict:
    """Every model's predictions for the run's communications. ``fitted_on``: the runs ``gige_params`` were
    fitted on; when they include this run, the gige error is an in-sample fit (``in_sample``: how well a fit
    matches the points it was fitted on, not a prediction error: never judged good or bad)."""
    from hpcvar.models.fit import e_abs_pct, e_rel_pct
    from hpcvar.models.sharing import explain

    pairs = list(zip(summ.src.astype(str), summ.dst.astype(str), strict=True))
    t_ref = summ.t_ref_median_ns.to_numpy(float) * summ.size_bytes.to_numpy(float) / float(summ.size_bytes.iloc[0])
    comms = [{"name": n, "src": s, "dst": d, "t_measured_ns": float(t), "penalty_measured": float(p), "predicted": {}}
             for n, (s, d), t, p in zip(summ.comm, pairs, summ.t_median_ns, summ.penalty, strict=True)]
    e_abs = {}
    for m in models:
        rows = explain(pairs, m, gige_params if m == "gige" else None)
        errs = []
        for c, r, tr in zip(comms, rows, t_ref, strict=True):
            tp = r["penalty"] * tr
            e = e_rel_pct(tp, c["t_measured_ns"])
            errs.append(e)
            c["predicted"][m] = {"penalty": r["penalty"], "t_ns": tp, "e_rel_pct": e}
        e_abs[m] = e_abs_pct(errs)
    in_sample = {m: bool(m == "gige" and gige_params and run.id in (fitted_on or [])) for m in models}
    return {"run_id": run.id, "run": str(run.path), "models": models, "params": {"gige": gige_params or "paper"},
            "communications": comms, "e_abs_pct": e_abs, "in_sample": in_sample}
