"""The views of `bench ace` runs: the terminal tables, the report section, the metrics, the figures."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from hpcvar.compare import Metric
from hpcvar.kinds.ace.job import more_iters_remedy
from hpcvar.report.humanize import number
from hpcvar.report.sections import BAD, GOOD, MODEL, SUSPECT, Headline, Section
from hpcvar.report.terminal import Cell, nbytes, ns, seconds
from hpcvar.report.verdict import BUSY_WAIT_GOOD_PCT, judge_error_pct
from hpcvar.results import Run
from hpcvar.units import format_size

MAX_DIST_POINTS = 6  # distributions drawn per EA (the first points of the sweep)


def _t(s: float | None) -> Cell:
    return seconds(s)


def render(console: Console, run: Run) -> None:
    """A stored 'bench ace' run: prediction and measurement per EA and sweep point."""
    render_ace_result(console, run.info["result"])


def render_ace_result(console: Console, result: dict) -> None:
    """Prediction (and, when run, measurement) per EA and sweep point; also the --predict-only result, which
    measures nothing and stores no run."""
    console.print(_prediction_table(result))
    if any("measured_t_run_s" in e for e in result["eas"]):
        console.print(_measured_table(result))
        console.print(_dispersion_table(result))
        bad = [e["name"] for e in result["eas"] if not e.get("no_mixing", True)]
        if bad:
            console.print(f"[red]received data of another EA in {', '.join(bad)}[/]")
    for v in result.get("variability", []):
        if v["runs"] > 1:
            console.print(f"{v['name']} {format_size(v['size_bytes'])} {v['load_pct']:g}%: {v['runs']} runs, "
                          f"run-time CV {v['run_cv']:.3%}; T_comm variance between runs "
                          f"{v['comm_between_var_ns2']:.4g} ns^2 vs within {v['comm_within_var_ns2']:.4g} ns^2")


def _prediction_table(result: dict) -> Table:
    t = Table(title="ACE prediction: T_comm = m (alpha + beta n), T_comp (eq. 6) per cycle; T_run (eq. 4)",
              title_justify="left")
    for c in ("EA", "pattern", "ranks", "size", "load", "cycles", "m", "alpha", "beta/B", "T_comm", "T_comp",
              "T_run"):
        t.add_column(c, justify="right", no_wrap=True)
    for e in result["eas"]:
        t.add_row(e["name"], f"{e['pattern']} {e['mode']}", str(e["ranks"]), nbytes(e["size_bytes"]),
                  f"{e['load_pct']:g}%", str(e["cycles"]), f"{e['messages_per_cycle']:g}", _t(e["alpha_s"]),
                  ns(e["beta_s_per_byte"] * 1e9), _t(e["t_comm_s"]), _t(e["t_comp_s"]), _t(e["t_run_s"]))
    return t


def _measured_table(result: dict) -> Table:
    m = Table(title="ACE measured (means per cycle; run = max over the EA's processes)", title_justify="left")
    for c in ("EA", "size", "load", "T_comm", "T_comp", "T_barr", "T_run", "error", "busy-wait mean",
              "busy-wait median"):
        m.add_column(c, justify="right", no_wrap=True)
    for e in result["eas"]:
        m.add_row(e["name"], nbytes(e["size_bytes"]), f"{e['load_pct']:g}%", _t(e["measured_t_comm_s"]),
                  _t(e["measured_t_comp_s"]), _t(e["measured_t_barr_s"]), _t(e["measured_t_run_s"]),
                  f"{e['error_pct']:+.2f}%", f"{e['comp_error_pct']:+.3f}%",
                  f"{e['comp_error_median_pct']:+.4f}%")
    return m


def _dispersion_table(result: dict) -> Table:
    d = Table(title="Dispersion of per-cycle times (Table 1 style)", title_justify="left")
    for c in ("EA", "load", "size", "time", "mean", "stdev", "variance (us²)", "p50", "p99", "max"):
        d.add_column(c, justify="right", no_wrap=True)
    for e in result["eas"]:
        for what in ("comm", "comp", "barr"):
            st = e[f"t_{what}_stats_s"]
            d.add_row(e["name"], f"{e['load_pct']:g}%", nbytes(e["size_bytes"]), f"T_{what}",
                      _t(st["mean"]), _t(st["stdev"]), number(st["variance"] * 1e12), _t(st["p50"]),
                      _t(st["p99"]), _t(st["max"]))
    return d


def plots(run: Run) -> list[Path]:
    return [p for _, p in figures(run)]


def figures(run: Run) -> list[tuple[str, Path]]:
    """ace_error_vs_load (paper figures 1-4) and ace_dist_<ea> (per-cycle T_comm and T_barr CCDFs)."""
    from hpcvar.report.plots import figure, save

    summ = run.read_table("ace.summary")
    cycles = run.read_table("ace.cycles")
    figs: list[tuple[str, Path]] = []
    if summ.empty:
        return figs
    fig, ax = figure()
    for (name, size), grp in summ.groupby(["name", "size_bytes"]):
        g = grp.groupby("load_pct")["error_pct"]
        mean = g.mean()
        ax.plot(mean.index, mean.to_numpy(), "o-", label=f"{name} {format_size(size)}")
        if (g.size() > 1).any():
            ax.fill_between(mean.index, g.min().to_numpy(), g.max().to_numpy(), alpha=0.2)
    ax.axhline(0, color="grey", lw=0.8)
    ax.set_xlabel("communication load L (%)")
    ax.set_ylabel("run-time prediction error (%)")
    ax.legend(fontsize=8)
    figs.append(("Run-time prediction error against communication load, per EA and size (band: min-max over "
                 "repeats)", save(fig, run.plots_dir() / "ace_error_vs_load")[0]))
    for name, grp in summ.groupby("name"):
        pts = grp["point"].tolist()[:MAX_DIST_POINTS]
        fig, axes = figure(1, 2, figsize=(9.6, 3.8))
        for pt in pts:
            r = grp[grp["point"] == pt].iloc[0]
            sub = cycles[(cycles["name"] == name) & (cycles["point"] == pt)]
            lab = f"{format_size(r['size_bytes'])} {r['load_pct']:g}% r{int(r['repeat'])}"
            for ax, col in zip(axes, ("t_comm_ns", "t_barr_ns"), strict=True):
                v = np.sort(sub[col].to_numpy())
                if v.size:
                    ax.step(np.maximum(v, 1.0) / 1e3, 1.0 - np.arange(v.size) / v.size, where="post", label=lab)
        for ax, what in zip(axes, ("T_comm", "T_barr"), strict=True):
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlabel(f"per-cycle {what} (us)")
            ax.set_ylabel("P(time > x)")
        axes[0].legend(fontsize=7)
        figs.append((f"EA {name}: distribution (CCDF) of per-cycle T_comm and T_barr over all processes",
                     save(fig, run.plots_dir() / f"ace_dist_{name}")[0]))
    return figs


def section(run: Run) -> Section:
    sec = Section(title="Application communication emulator (ACE)")
    summ = run.read_table("ace.summary")
    if summ.empty:
        sec.notes.append("The run stored no complete point.")
        return sec
    err = summ["error_pct"].abs()
    worst = summ.iloc[int(err.argmax())]
    # a characterization's step (its params name the step) has no --bench-iters of its own
    more = more_iters_remedy("characterize" if (run.info.get("params") or {}).get("step") else None)
    status, ref = judge_error_pct(float(err.median()), "median |error|")
    bad_fit = summ[(summ["alpha_ns"] < 0) | (summ["beta_ns_per_byte"] < 0)]
    if len(bad_fit):
        status, ref = SUSPECT, (f"{len(bad_fit)} point(s) with a negative fitted alpha or beta: the alpha-beta "
                                f"fit of phase 1 is noise there ({more})")
    elif "fit_fallback" in summ and summ["fit_fallback"].astype(bool).any():
        status, ref = SUSPECT, (f"{int(summ['fit_fallback'].astype(bool).sum())} point(s) fell back to the "
                                f"measured time per message (the fit predicted <= 0; {more})")
    sec.headlines.append(Headline("run-time prediction error (median of absolute values)", f"{err.median():.2f}%",
                                  f"over {len(summ)} EA runs; worst {worst['error_pct']:+.2f}% ({worst['name']}, "
                                  f"{format_size(worst['size_bytes'])}, L={worst['load_pct']:g}%)", status, ref,
                                  role=MODEL))
    cyc = run.read_table("ace.cycles")
    req = cyc.groupby(["point", "repeat", "name"])["t_comp_req_ns"].median()
    longest = req.idxmax()
    g = cyc.set_index(["point", "repeat", "name"]).loc[longest]
    rel = 100.0 * (g["t_comp_ns"] - g["t_comp_req_ns"]) / g["t_comp_req_ns"]
    sec.headlines.append(Headline(
        f"busy-wait accuracy at {req.max() / 1e6:.3g} ms requested",
        f"median {rel.median():+.3f}%, mean {rel.mean():+.2f}%",
        f"actual vs requested compute per cycle (worst mean over all runs, incl. short requests: "
        f"{summ['comp_error_pct'].abs().max():.2f}%); preemption shows in the mean",
        *((GOOD, f"median within {BUSY_WAIT_GOOD_PCT:g}% of the request") if abs(rel.median()) <= BUSY_WAIT_GOOD_PCT
          else (BAD, f"median off by more than {BUSY_WAIT_GOOD_PCT:g}%: the compute phase is not what was asked"))))
    if len(bad_fit):
        sec.notes.append(f"Suspect: {len(bad_fit)} point(s) have a negative alpha or beta "
                         f"(points {', '.join(str(int(p)) for p in bad_fit['point'])}); their predictions rest on a "
                         "fit that noise dominated.")
    sec.figures.extend(figures(run))
    cols = ["name", "pattern", "mode", "ranks", "size_bytes", "load_pct", "cycles", "alpha_ns", "beta_ns_per_byte",
            "pred_t_comm_ns", "pred_t_comp_ns", "pred_t_run_ns", "meas_t_run_ns", "error_pct", "comp_error_pct"]
    sec.tables.append(("Predicted (eq. 4, 6) and measured run time per EA and point", summ[cols]))
    disp = [c for c in summ.columns if c.split("_")[0] in ("comm", "comp", "barr") and c.endswith("_ns")
            and not c.startswith("comp_req")]
    sec.tables.append(("Dispersion of per-cycle T_comm, T_comp, T_barr (paper Table 1)",
                       summ[["name", "point"] + disp]))
    var = run.read_table("ace.variability")
    if (var["runs"] > 1).any():
        sec.tables.append(("Run-to-run variability (between-run vs within-run variance)", var))
    if not summ["check_ok"].all():
        sec.notes.append("Some EA received bytes that were not its own: communicators mixed messages.")
    for w in run.info.get("warnings", []):
        sec.notes.append(w)
    return sec


def metrics(run: Run) -> list[Metric]:
    c = run.read_table("ace.cycles")
    out = []
    for (name, size), g in c.groupby(["name", "size_bytes"]):
        for col, what in (("t_comm_ns", "T_comm"), ("t_barr_ns", "T_barr")):
            out.append(Metric(f"ace {name} size={format_size(size)} {what} per cycle", g[col].to_numpy(), True, "ns"))
    return out
