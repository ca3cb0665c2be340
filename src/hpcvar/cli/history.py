"""hpcvar history: since when has it changed? Series of stored runs with confirmed change points."""

from __future__ import annotations

import click

from hpcvar.cli.common import OUT_PATH, FiniteFloat, option, output_options


@click.command("history")
@click.option("--since", default=None, metavar="AGE|DATE",
              help="Runs started since then: an age (7d, 12h) or a UTC date or date-time (2026-11-01).")
@click.option("--between", nargs=2, default=None, metavar="FROM UNTIL",
              help="Runs started between two instants (ages or UTC dates), e.g. --between 14d 7d.")
@click.option("--command", "command", default=None, metavar="CMD",
              help="Only runs of this command (as 'runs list' shows it: characterize, 'bench latency', ...).")
@click.option("--hosts", default=None, metavar="H1,H2,...", help="Only runs on exactly this set of hosts.")
@click.option("--metric", "metrics", multiple=True, metavar="PATTERN",
              help="Only metrics whose name contains PATTERN or matches it as a glob (repeatable).")
@click.option("--all-metrics", is_flag=True,
              help="Every metric compare tests, not only the headline ones (noise detour lengths, for one).")
@click.option("--alpha", type=FiniteFloat(0, 1, min_open=True), default=0.01, show_default=True,
              help="Significance level of a change, after Holm's correction over the group's tests.")
@click.option("--threshold", type=FiniteFloat(0), default=10.0, show_default=True,
              help="Smallest change of the median, in percent, that counts as a change.")
@click.option("--min-effect", type=FiniteFloat(0, 1), default=0.33, show_default=True,
              help="Smallest |Cliff's delta| that counts (0.33 = medium effect).")
@option("-o", "--out", "out", default=None, type=OUT_PATH,
        help="Also write the history here: .html (a self-contained page with a figure per metric), .csv (one "
             "group; Apache Otava reads it as it is) or .json.")
@click.option("--plots-dir", default=None, type=click.Path(file_okay=False),
              help="Also write a figure per metric here (PNG and SVG).")
@output_options
def cli(since, between, command, hosts, metrics, all_metrics, alpha, threshold, min_effect, out, plots_dir, as_json,
        runs_dir):
    """Series of stored runs, grouped by command and hosts, with the changes confirmed in them.

    For each headline metric (the raw samples 'hpcvar compare' tests) one point per run: the median with its
    95% CI.
    Change points are found by PELT (ruptures) and kept only when compare's test confirms them on the samples
    either side; each gets an HPX-style symbol (= within 1%, ?? CI wider than 10%, +/- better/worse) from a
    bootstrap CI of the change. Exit code 3 when the last run starts a change (for cron and CI), 0 otherwise;
    1/2: errors."""
    from hpcvar.cli.common import current_format, emit, stdout_console
    from hpcvar.history import changes, views
    from hpcvar.history.series import build_series, select_groups
    from hpcvar.results.store import runs_root

    window = _window(since, between)
    _check_out(out)
    groups, skipped = select_groups(runs_dir, window, command, hosts)
    for g in groups:
        build_series(g, tuple(metrics), all_metrics)
        changes.detect(g, alpha=alpha, threshold=threshold / 100.0, min_effect=min_effect)
    if groups and metrics and not any(g.series for g in groups):
        from hpcvar.errors import UsageError

        raise UsageError(f"no metric of the {sum(len(g.runs) for g in groups)} run(s) in the window matches "
                         f"{', '.join(metrics)}", "--metric",
                         "Give a part of a metric's name or a glob ('hpcvar history --json' lists the metrics)")
    groups = [g for g in groups if g.series]
    settings = {"runs_dir": str(runs_root(runs_dir)), "since": window.since.isoformat() if window.since else None,
                "until": window.until.isoformat() if window.until else None, "alpha": alpha,
                "threshold_pct": threshold, "min_effect": min_effect}
    res = views.result_json(groups, skipped, settings)
    fmt = "json" if as_json else current_format()
    if out:
        _write_out(out, groups, res)
    if plots_dir:
        from pathlib import Path

        Path(plots_dir).mkdir(parents=True, exist_ok=True)
        for k, g in enumerate(groups):
            views.plot_group(g, Path(plots_dir), f"history-{k}")
    if fmt in ("csv", "md"):
        _emit_tables(fmt, groups)
    else:
        emit(res, fmt == "json", lambda c, r: views.render(c, r))
        if out and fmt == "table":
            stdout_console().print(f"written to {out}", markup=False)
    return 3 if res["last_run_starts_change"] else 0


def _window(since, between):
    """The window of --since or --between (ages or UTC dates)."""
    import datetime as dt

    from hpcvar.errors import UsageError
    from hpcvar.history.series import Window, parse_instant

    if since and between:
        raise UsageError("--since and --between both give the window", "--between", "Give one of them")
    now = dt.datetime.now(dt.UTC)
    if not between:
        return Window(parse_instant(since, "--since", now) if since else None)
    window = Window(parse_instant(between[0], "--between", now), parse_instant(between[1], "--between", now))
    if window.since >= window.until:
        raise UsageError(f"the window {between[0]} .. {between[1]} is empty", "--between",
                         "Give the earlier instant first (ages count back: --between 14d 7d)")
    return window


def _check_out(out) -> None:
    from pathlib import Path

    from hpcvar.errors import UsageError

    if out and Path(out).suffix.lower() not in (".html", ".htm", ".csv", ".json"):
        raise UsageError(f"cannot tell the format from '{Path(out).name}'", "-o",
                         "Use a .html, .csv or .json file name")


def _write_out(out, groups, res) -> None:
    """-o: the page (.html), the CSV Otava reads (.csv, one group) or the JSON result."""
    from pathlib import Path

    from hpcvar.cli.common import writing_out
    from hpcvar.history import views
    from hpcvar.results.store import atomic_write_text

    suffix = Path(out).suffix.lower()
    with writing_out(out):
        if suffix in (".html", ".htm"):
            atomic_write_text(Path(out), views.render_html(groups, res, "hpcvar history"))
        elif suffix == ".csv":
            atomic_write_text(Path(out), views.csv_text(_one_group(groups, "-o")))
        else:
            from hpcvar.results import dumps_standard

            atomic_write_text(Path(out), dumps_standard(res) + "\n")


def _emit_tables(fmt: str, groups) -> None:
    from hpcvar.history import views

    if fmt == "csv":
        click.echo(views.csv_text(_one_group(groups, "--format")), nl=False)
        return
    import io

    import pandas as pd

    from hpcvar.cli.common import tables_text

    click.echo(tables_text([(g.label, pd.read_csv(io.StringIO(views.csv_text(g)))) for g in groups], "md"), nl=False)


def _one_group(groups, flag: str):
    from hpcvar.errors import UsageError

    if len(groups) != 1:
        names = "; ".join(g.label for g in groups) or "none"
        raise UsageError(f"CSV holds one series of runs and the window has {len(groups)} ({names})", flag,
                         "Choose one with --command and --hosts")
    return groups[0]
