"""hpcvar report: one self-contained HTML file (or Markdown) from runs."""

from __future__ import annotations

import click

from hpcvar.cli.common import OUT_PATH, emit, format_options, option, runs_dir_option, writing_out


@click.command("report")
@click.argument("runs", nargs=-1, required=True)
@option("-o", "--out", "output", default="report.html", show_default=True, type=OUT_PATH, aliases=("--output",),
        help="Output file; the format follows the extension: .html (self-contained) or .md.")
@click.option("--title", default="hpcvar report", show_default=True, help="Title of the report.")
@format_options
@runs_dir_option
@click.option("--baseline", default=None, metavar="RUN",
              help="A run (or characterization) to compare against: the verdict lists what degraded or improved "
                   "(the tests of 'hpcvar compare') and the plots overlay the baseline.")
def cli(runs, output, title, as_json, runs_dir, baseline):
    """Write one self-contained HTML (or Markdown) report of RUNS.

    RUNS are run directories, names, or 'latest'; a characterization includes
    all its steps. The report has the summary numbers with their uncertainty,
    warnings with remedies, then one section per run with plots, tables,
    parameters and metadata. At the top, the verdict: every step of a
    characterization (complete, failed with its error, skipped with its
    reason) and every headline judged good, bad or suspect against the
    reference it names; with --baseline, what degraded."""
    from hpcvar.report.document import write_report
    from hpcvar.results.store import Run, resolve_run

    loaded, tops = [], []
    for ref in runs:
        run = Run.open(resolve_run(ref, runs_dir))
        tops.append(run)
        loaded.extend(run.children() if run.info.get("command") == "characterize" else [run])
    base = Run.open(resolve_run(baseline, runs_dir)) if baseline else None
    with writing_out(output):
        out = write_report(loaded, output, title, tops=tops, baseline=base)
    # --format json/csv/md: what was written
    emit({"report": str(out), "runs": [r.id for r in loaded]}, as_json,
         lambda console, r: console.print(f"report written to {r['report']}", markup=False))
