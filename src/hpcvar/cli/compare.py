"""hpcvar compare: has the network or the OS got worse?"""

from __future__ import annotations

import click

from hpcvar.cli.common import output_options


@click.command("compare")
@click.argument("baseline")
@click.argument("current")
@click.option("--alpha", type=click.FloatRange(0, 1, min_open=True), default=0.01, show_default=True,
              help="Significance level after Holm's correction over all metrics.")
@click.option("--threshold", type=click.FloatRange(0), default=10.0, show_default=True,
              help="Smallest change of the median, in percent, that counts as a degradation.")
@click.option("--min-effect", type=click.FloatRange(0, 1), default=0.33, show_default=True,
              help="Smallest |Cliff's delta| that counts (0.33 = medium effect).")
@click.option("--force", is_flag=True, help="Compare runs of different machines, commands or schema versions.")
@output_options
def cli(baseline, current, alpha, threshold, min_effect, force, as_json, runs_dir):
    """Compare two runs and flag significant degradations.

    Compares CURRENT against BASELINE (two characterizations, or two runs of
    one benchmark), metric by metric: Mann-Whitney U on the raw samples,
    Cliff's delta, Holm-corrected p-values. Exit code 0: no degradation;
    3: at least one metric degraded (for cron and CI); 1/2: errors."""
    from hpcvar.cli.common import emit
    from hpcvar.compare import compare_runs
    from hpcvar.results.store import Run, resolve_run

    base = Run.open(resolve_run(baseline, runs_dir))
    cur = Run.open(resolve_run(current, runs_dir))
    res = compare_runs(base, cur, alpha=alpha, threshold=threshold / 100.0, min_effect=min_effect, force=force)
    emit(res, as_json,
         lambda c, r: _render(c, r, cur.id, base.id))
    return 3 if res["degraded"] else 0


def _quantity(v: float, unit: str):
    """A median as a typed cell where its unit is one (ns, B/s), else as the number."""
    from hpcvar.report.terminal import ns, rate

    return ns(v) if unit == "ns" else rate(v) if unit == "B/s" else f"{v:.4g}{' ' + unit if unit else ''}"


def _render(c, res: dict, cur_id: str, base_id: str) -> None:
    from rich.table import Table

    for reason in res["forced_despite"]:
        c.print(f"[yellow]warning:[/] {reason} (compared because of --force)")
    t = Table(title=f"{cur_id} against {base_id}", title_justify="left")
    for col in ("metric", "baseline", "current", "change", "Cliff's d", "p (Holm)", "verdict"):
        t.add_column(col, justify="left" if col in ("metric", "verdict") else "right")
    colors = {"degraded": "red", "improved": "green", "unchanged": "default"}
    for r in res["metrics"]:
        t.add_row(r["metric"], _quantity(r["baseline_median"], r["unit"]), _quantity(r["current_median"], r["unit"]),
                  f"{r['change_pct']:+.1f}%", f"{r['cliffs_delta']:+.2f}", f"{r['p_holm']:.2g}",
                  f"[{colors[r['verdict']]}]{r['verdict']}[/]")
    c.print(t)
    c.print(f"{len(res['degraded'])} degraded, {len(res['improved'])} improved, "
            f"{len(res['metrics']) - len(res['degraded']) - len(res['improved'])} unchanged")
