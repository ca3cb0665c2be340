"""Fitting the gige model to measured penalties, and the paper's evaluation errors (section VI-B).

Fit (docs/models.md):
1. beta from the communications whose gige penalty does not depend on the gammas (pure outgoing or
   incoming conflicts: every side of degree > 1 has all its communications strongly slowed):
   penalty = beta x D with D the larger degree > 1; least squares through the origin,
   beta = sum(P D) / sum(D^2). The paper's beta = 1.5/2 = 2.25/3 is this fit on Figure 2.
2. gamma_out and gamma_in by least squares on relative errors over every communication, beta
   fixed. A gamma on which no measured communication depends is not identifiable: it keeps the
   paper's value and the fit says so.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hpcvar.errors import UsageError
from hpcvar.models.sharing import GIGE_DEFAULTS, explain, penalties


@dataclass
class Observation:
    """Measured penalties of one scheme (one bench sharing run)."""

    label: str
    pairs: list[tuple[str, str]]
    names: list[str]
    measured: list[float]


def e_rel_pct(t_pred: float, t_meas: float) -> float:
    """E_rel(c_k) = (T_p - T_m) / T_m x 100 (section VI-B)."""
    return (t_pred - t_meas) / t_meas * 100.0


def e_abs_pct(e_rels: list[float]) -> float:
    """E_abs(G) = (1/N) sum |E_rel(c_k)| over the N communications of the graph (section VI-B)."""
    if not e_rels:
        raise ValueError("E_abs of an empty graph")
    return float(np.mean(np.abs(e_rels)))


def gamma_free(rows: list[dict]) -> list[bool]:
    """Per communication: does its gige penalty ignore both gammas (pure conflict on every side)?"""
    out = []
    for r in rows:
        ok_o = r["deg_out"] == 1 or (r["strong_out"] and r["card_strong_out"] == r["deg_out"])
        ok_i = r["deg_in"] == 1 or (r["strong_in"] and r["card_strong_in"] == r["deg_in"])
        out.append(ok_o and ok_i and max(r["deg_out"], r["deg_in"]) > 1)
    return out


def fit_gige(obs: list[Observation]) -> dict:
    """Fitted params plus quality: {"params", "quality", "identifiable", "per_scheme"}."""
    if not obs:
        raise UsageError("no run to fit", "RUNS", "Give bench sharing runs (see 'hpcvar runs list')")
    xs, ys = [], []
    for o in obs:
        rows = explain(o.pairs, "gige", GIGE_DEFAULTS)
        for r, is_free, p in zip(rows, gamma_free(rows), o.measured, strict=True):
            if is_free:
                xs.append(max(r["deg_out"], r["deg_in"]))
                ys.append(p)
    if not xs:
        raise UsageError("no run holds a pure outgoing or incoming conflict, so beta cannot be fitted", "RUNS",
                         "Add a run of examples/schemes/fig2-2.scheme or fig2-3.scheme")
    x, y = np.asarray(xs, float), np.asarray(ys, float)
    beta = float((x * y).sum() / (x * x).sum())
    beta_rms = float(np.sqrt(np.mean(((beta * x) - y) ** 2 / y**2))) * 100

    # which gammas can be seen at all: perturb each one
    ident = {}
    for g in ("gamma_out", "gamma_in"):
        base = {"beta": beta, "gamma_out": 0.1, "gamma_in": 0.1}
        moved = dict(base, **{g: 0.2})
        ident[g] = any(np.any(np.abs(np.subtract(penalties(o.pairs, "gige", base),
                                                 penalties(o.pairs, "gige", moved))) > 1e-12) for o in obs)
    free = [g for g in ("gamma_out", "gamma_in") if ident[g]]
    params = {"beta": beta, "gamma_out": GIGE_DEFAULTS["gamma_out"], "gamma_in": GIGE_DEFAULTS["gamma_in"]}
    if free:
        from scipy.optimize import least_squares

        def resid(v):
            pr = dict(params, **dict(zip(free, v, strict=True)))
            out = []
            for o in obs:
                pred = penalties(o.pairs, "gige", pr)
                out += [(a - b) / b for a, b in zip(pred, o.measured, strict=True)]
            return np.asarray(out)

        sol = least_squares(resid, x0=[params[g] for g in free], bounds=([-1.0] * len(free), [1.0] * len(free)))
        params.update({g: float(v) for g, v in zip(free, sol.x, strict=True)})
    per_scheme = []
    all_e = []
    for o in obs:
        pred = penalties(o.pairs, "gige", params)
        e = [e_rel_pct(a, b) for a, b in zip(pred, o.measured, strict=True)]
        all_e += e
        per_scheme.append({"label": o.label, "e_abs_pct": e_abs_pct(e),
                           "communications": [{"name": n, "measured": m, "predicted": p, "e_rel_pct": er}
                                              for n, m, p, er in zip(o.names, o.measured, pred, e, strict=True)]})
    quality = {"beta_points": len(xs), "beta_rms_rel_pct": beta_rms, "e_abs_pct": e_abs_pct(all_e),
               "communications": len(all_e)}
    return {"params": params, "quality": quality, "identifiable": ident, "per_scheme": per_scheme}


__all__ = ["Observation", "e_abs_pct", "e_rel_pct", "fit_gige", "gamma_free"]
