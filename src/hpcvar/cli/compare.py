"""hpcvar compare: has the network or the OS got worse?"""

from __future__ import annotations

import click

from hpcvar.cli.common import FiniteFloat, output_options


@click.command("compare")
@click.argument("baseline")
@click.argument("current")
@click.option("--alpha", type=FiniteFloat(0, 1, min_open=True), default=0.01, show_default=True,
              help="Significance level after Holm's correction over all metrics.")
@click.option("--threshold", type=FiniteFloat(0), default=10.0, show_default=True,
              help="Smallest change of the median, in percent, that counts as a degradation.")
@click.option("--min-effect", type=FiniteFloat(0, 1), default=0.33, show_default=True,
              help="Smallest |Cliff's delta| that counts (0.33 = medium effect).")
@click.option("--force", is_flag=True, help="Compare runs of different machines, commands or schema versions.")
@click.option("--expect", "expect_file", type=click.Path(dir_okay=False), default=None, metavar="FILE",
              help="Also judge CURRENT against site expectations (TOML, docs/screen.md); a value outside its bound "
                   "counts as a degradation (exit 3).")
@output_options
def cli(baseline, current, alpha, threshold, min_effect, force, expect_file, as_json, runs_dir):
    """Compare two runs and flag significant degradations.

    Compares CURRENT against BASELINE (two characterizations, or two runs of
    one benchmark), metric by metric: Mann-Whitney U on the raw samples,
    Cliff's delta, Holm-corrected p-values. With --expect, CURRENT is also judged
    against the site's expectations. Exit code 0: no degradation; 3: at least one
    metric degraded or expectation failed (for cron and CI); 1/2: errors."""
    from hpcvar.cli.common import emit
    from hpcvar.compare import compare_runs
    from hpcvar.results.store import Run, resolve_run

    base = Run.open(resolve_run(baseline, runs_dir))
    cur = Run.open(resolve_run(current, runs_dir))
    res = compare_runs(base, cur, alpha=alpha, threshold=threshold / 100.0, min_effect=min_effect, force=force)
    if expect_file:
        from hpcvar import expect

        exp = expect.load(expect_file)
        partition = (cur.info.get("params") or {}).get("partition")
        res["expectations"] = expect.judge(exp, expect.observations_of(cur), partition)
        res["expectations_failed"] = [expect.failure_text(c) for c in res["expectations"] if c["status"] == "failed"]
    emit(res, as_json,
         lambda c, r: _render(c, r, cur.id, base.id))
    return 3 if res["degraded"] or res.get("expectations_failed") else 0


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
    if "expectations" in res:
        checks = res["expectations"]
        c.print(f"expectations: {len(checks) - len(res['expectations_failed'])} of {len(checks)} met", markup=False)
        for line in res["expectations_failed"]:
            c.print(f"  failed: {line}", markup=False)
