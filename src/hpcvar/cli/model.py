"""hpcvar model: bandwidth-sharing models (penalties), fitting and evaluation (docs/models.md)."""

from __future__ import annotations

from pathlib import Path

import click

from hpcvar.cli.common import (
    DURATION,
    OUT_PATH,
    RATE,
    SIZE,
    FiniteFloat,
    emit,
    format_options,
    option,
    output_options,
    writing_out,
)
from hpcvar.errors import ResultsError, UsageError


@click.group("model")
def cli() -> None:
    """Bandwidth-sharing models: penalties, fitting, evaluation against measurements."""


def _model_params(model: str, beta, gamma_in, gamma_out, params_file, method, max_states, samples, seed) -> dict:
    from hpcvar.models.sharing import check_params, load_params

    params: dict = {}
    if params_file:
        fmodel, fparams = load_params(params_file)
        if fmodel != model:
            raise UsageError(f"the parameter file is for model '{fmodel}', not '{model}'", "--params",
                             f"Use --model {fmodel} or a file fitted for {model}")
        params.update(fparams)
    given = {"beta": beta, "gamma_in": gamma_in, "gamma_out": gamma_out}
    if model != "gige":
        for k, v in given.items():
            if v is not None:
                raise UsageError(f"--{k.replace('_', '-')} is a parameter of the gige model",
                                 f"--{k.replace('_', '-')}", "Use it with --model gige")
    params.update({k: v for k, v in given.items() if v is not None})
    if model == "myrinet":
        params.update({"method": method, "max_states": max_states, "samples": samples, "seed": seed})
    return check_params(model, params) if params else check_params(model, None)


def _param_options(f):
    opts = [
        click.option("--beta", type=FiniteFloat(0), default=None,
                     help="gige: penalty per concurrent communication, a number (Vienne et al., Predictive models "
                          "for bandwidth sharing in high performance clusters: 0.75)."),
        click.option("--gamma-in", type=FiniteFloat(0), default=None,
                     help="gige: incoming correction, a number (Vienne et al.: 0.036)."),
        click.option("--gamma-out", type=FiniteFloat(0), default=None,
                     help="gige: outgoing correction, a number (Vienne et al.: 0.115)."),
        click.option("--params", "params_file", type=click.Path(dir_okay=False), default=None,
                     help="Parameter file written by 'hpcvar model fit'."),
        click.option("--myrinet-method", "method", type=click.Choice(["exact", "sample"]), default="exact",
                     show_default=True, help="myrinet: enumerate every Stop&Go state, or sample them (bounded)."),
        click.option("--max-states", type=click.IntRange(1), default=200_000, show_default=True,
                     help="myrinet exact: refuse a conflict component with more states than this."),
        click.option("--samples", type=click.IntRange(1), default=20_000, show_default=True,
                     help="myrinet sample: sampled states per conflict component."),
        click.option("--seed", type=int, default=1, show_default=True, help="myrinet sample: random seed."),
    ]
    for o in reversed(opts):
        f = o(f)
    return f


@cli.command("penalties")
@click.argument("scheme")
@click.option("--model", type=click.Choice(["gige", "myrinet", "maxmin"]), required=True, help="Sharing model.")
@_param_options
@click.option("--t-ref", type=DURATION, default=None,
              help="Time of one communication alone, with its unit (e.g. 84us): predicts T = p x t_ref.")
@click.option("--size", type=SIZE, default=None, help="Bytes per communication (with --bandwidth).")
@click.option("--bandwidth", type=RATE, default=None,
              help="Link rate alone, e.g. 200mbit: predicts T = p x size / rate.")
@format_options
def penalties_cmd(scheme, model, beta, gamma_in, gamma_out, params_file, method, max_states, samples, seed,
                  t_ref, size, bandwidth, as_json):
    """Penalty (slowdown >= 1) of every communication of SCHEME under a sharing model.

    SCHEME is a scheme file or inline text such as 'a: 0->1; b: 0->2; c: 3->2'. The models (gige, myrinet)
    are those of Vienne, Martinasso, Vincent, Mehaut, Predictive models for bandwidth sharing in high
    performance clusters; maxmin is max-min fair sharing.
    """
    from hpcvar.kinds.sharing.views import render_penalties
    from hpcvar.models.scheme import load_scheme
    from hpcvar.models.sharing import explain

    sch = load_scheme(scheme)
    params = _model_params(model, beta, gamma_in, gamma_out, params_file, method, max_states, samples, seed)
    if t_ref is not None and bandwidth is not None:
        raise UsageError("--t-ref and --bandwidth both predict times", "--t-ref", "Give only one of them")
    if bandwidth is not None and size is None and any(c.size_bytes is None for c in sch.comms):
        raise UsageError("--bandwidth needs the communication sizes", "--size", "Add --size 20MiB")
    rows = explain(sch.pairs(), model, params)
    comms = []
    for c, r in zip(sch.comms, rows, strict=True):
        d = {"name": c.name, "src": c.src, "dst": c.dst, **r}
        if t_ref is not None:
            d["t_predicted_s"] = r["penalty"] * t_ref
        elif bandwidth is not None:
            nbytes = c.size_bytes or size
            d["size_bytes"] = nbytes
            d["t_predicted_s"] = r["penalty"] * nbytes * 8.0 / bandwidth
        comms.append(d)
    shown = {k: v for k, v in params.items() if model == "gige" or k == "method"}
    result = {"model": model, "params": shown, "scheme": scheme, "communications": comms}
    emit(result, as_json, render_penalties)


def _load_sharing_run(ref: str, runs_dir):
    from hpcvar.results.store import Run, resolve_run

    run = Run.open(resolve_run(ref, runs_dir))
    if run.info.get("command") != "bench sharing":
        raise UsageError(f"run {run.id} is a '{run.info.get('command')}' run, not 'bench sharing'", "RUN",
                         "Give runs of 'hpcvar bench sharing' (see 'hpcvar runs list')")
    if not run.has_table("sharing.summary"):
        raise ResultsError(f"run {run.id} has no measured penalties", str(run.path), "Rerun it, or --resume it")
    summ = run.read_table("sharing.summary").sort_values("comm_index")
    if summ.empty:
        raise ResultsError(f"run {run.id} has no measured penalties", str(run.path), "Rerun it, or --resume it")
    return run, summ


@cli.command("fit")
@click.argument("runs", nargs=-1, required=True)
@click.option("--model", type=click.Choice(["gige"]), default="gige", show_default=True,
              help="Model to fit (myrinet and maxmin have no parameters).")
@option("-o", "--out", "out_path", type=OUT_PATH, default="gige-params.json", show_default=True,
        help="Parameter file to write (read by 'model penalties --params' and the simulator).")
@output_options
def fit_cmd(runs, model, out_path, as_json, runs_dir):
    """Fit beta, gamma_in, gamma_out of the gige model to 'bench sharing' RUNS.

    beta comes from pure outgoing/incoming conflicts (e.g. examples/schemes/fig2-2, fig2-3);
    the gammas from schemes with strongly slowed sets (examples/schemes/fig4.scheme).
    """
    from hpcvar.models.fit import Observation, fit_gige
    from hpcvar.models.sharing import write_params

    obs = []
    for ref in runs:
        run, summ = _load_sharing_run(ref, runs_dir)
        obs.append(Observation(run.id, list(zip(summ.src.astype(str), summ.dst.astype(str), strict=True)),
                               list(summ.comm), [float(x) for x in summ.penalty]))
    fit = fit_gige(obs)
    with writing_out(out_path):
        write_params(Path(out_path), model, fit["params"],
                     {"quality": fit["quality"], "identifiable": fit["identifiable"], "runs": [o.label for o in obs]})
    result = {"model": model, "out": str(out_path), **fit}
    emit(result, as_json, _render_fit)


def _render_fit(con, result: dict) -> None:
    fit, out_path = result, result["out"]
    obs_n = len(result["per_scheme"]) if "per_scheme" in result else 0
    p, q = fit["params"], fit["quality"]
    con.print(f"gige fit from {obs_n} runs ({q['communications']} communications):")
    con.print(f"  beta      = {p['beta']:.4f}  (from {q['beta_points']} pure-conflict communications, "
              f"rms relative error {q['beta_rms_rel_pct']:.1f}%)")
    for g in ("gamma_out", "gamma_in"):
        note = "" if fit["identifiable"][g] else "  (no run depends on it: the value of Vienne et al. kept)"
        con.print(f"  {g:9} = {p[g]:.4f}{note}")
    con.print(f"  E_abs over all runs = {q['e_abs_pct']:.1f}%")
    for s in fit["per_scheme"]:
        con.print(f"    {s['label']}: E_abs {s['e_abs_pct']:.1f}%")
    con.print(f"parameters written to {out_path}")


@cli.command("evaluate")
@click.argument("runs", nargs=-1, required=True)
@click.option("--model", "models", type=click.Choice(["gige", "myrinet", "maxmin"]), multiple=True,
              help="Models to compare (repeatable; default: all three side by side).")
@click.option("--params", "params_file", type=click.Path(dir_okay=False), default=None,
              help="gige parameter file from 'model fit' (default: the values of Vienne et al., Predictive models "
                   "for bandwidth sharing in high performance clusters).")
@option("--plots/--no-plots", "plots", default=True, show_default=True, aliases=(" /--no-plot",),
        help="Write the figure (PNG+SVG) into each run's plots/.")
@output_options
def evaluate_cmd(runs, models, params_file, plots, as_json, runs_dir):
    """Predicted vs measured times of 'bench sharing' RUNS: E_rel per communication, E_abs per scheme.

    T_p = model penalty x measured T_ref; E_rel = (T_p - T_m) / T_m x 100; E_abs = mean |E_rel|
    (Vienne et al., Predictive models for bandwidth sharing in high performance clusters, section VI-B), as in
    its Figure 7, every model side by side.
    """
    from hpcvar.kinds.sharing.views import plot_evaluation, render_evaluation
    from hpcvar.models.evaluate import evaluate_run
    from hpcvar.models.sharing import fitted_runs, load_params

    models = list(models) or ["gige", "myrinet", "maxmin"]
    gparams, fitted_on = None, []
    if params_file:
        fmodel, gparams = load_params(params_file)
        if fmodel != "gige":
            raise UsageError(f"the parameter file is for '{fmodel}'", "--params", "Give a gige parameter file")
        fitted_on = fitted_runs(params_file)
    results = []
    for ref in runs:
        run, summ = _load_sharing_run(ref, runs_dir)
        res = evaluate_run(run, summ, models, gparams, fitted_on)
        if plots:
            res["plots"] = [str(p) for p in plot_evaluation(run, res)]
        results.append(res)
    if as_json or len(results) == 1:
        emit(results[0] if len(results) == 1 else {"runs": results}, as_json, render_evaluation)
        return
    for res in results:
        emit(res, False, render_evaluation)
