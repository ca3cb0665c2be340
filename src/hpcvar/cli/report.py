"""hpcvar report: one self-contained HTML file (or Markdown) from runs."""

from __future__ import annotations

import click

from hpcvar.cli.common import OUT_PATH, emit, format_options, option, runs_dir_option, writing_out


@click.command("report")
@click.argument("runs", nargs=-1, required=True)
@option("-o", "--out", "output", default="report.html", show_default=True, type=OUT_PATH, aliases=("--output",),
        help="Output file; the format follows the extension: .html (self-contained) or .md.")
@click.option("--title", default="hpcvar report", show_default=True, help="Title of the report.")
@click.option("--force", is_flag=True,
              help="Overwrite the output file even when it is not a report hpcvar wrote (by default only those are "
                   "overwritten).")
@format_options
@runs_dir_option
@click.option("--expect", "expect_file", type=click.Path(dir_okay=False), default=None, metavar="FILE",
              help="Site expectations (TOML, docs/screen.md) to judge the runs against; with it the command exits "
                   "with the verdict's code (0 OK, 3 DEGRADED, 4 UNRELIABLE).")
@click.option("--baseline", default=None, metavar="RUN",
              help="A run (or characterization) to compare against: the verdict lists what degraded or improved "
                   "(the tests of 'hpcvar compare') and the plots overlay the baseline.")
def cli(runs, output, title, force, as_json, runs_dir, expect_file, baseline):
    """Write one self-contained HTML (or Markdown) report of RUNS.

    RUNS are run directories, names, or 'latest'; a characterization includes
    all its steps. The report has the summary numbers with their uncertainty,
    warnings with remedies, then one section per run with plots, tables,
    parameters and metadata. At the top, the verdict: every step of a
    characterization (complete, failed with its error, skipped with its
    reason) and every headline judged good, bad or suspect against the
    reference it names; with --baseline, what degraded; with --expect, every value outside the site's
    expectations. It opens with one line: OK, DEGRADED or UNRELIABLE. Without -o it writes ./report.html and
    says so; a file there that is not an hpcvar report is not overwritten without --force."""
    from pathlib import Path

    from hpcvar.report.document import write_report
    from hpcvar.results.store import Run, resolve_run

    refuse_overwrite(Path(output), force)

    loaded, tops = [], []
    for ref in runs:
        run = Run.open(resolve_run(ref, runs_dir))
        tops.append(run)
        loaded.extend(run.children() if run.info.get("command") == "characterize" else [run])
    base = Run.open(resolve_run(baseline, runs_dir)) if baseline else None
    exp = None
    if expect_file:
        from hpcvar import expect

        exp = expect.load(expect_file)
    verdicts: list = []
    with writing_out(output):
        out = write_report(loaded, output, title, tops=tops, baseline=base, expectations=exp, verdict_out=verdicts)
    answer = verdicts[0].answer
    # --format json/csv/md: what was written
    emit({"report": str(Path(out).resolve()), "runs": [r.id for r in loaded], "answer": answer.to_json()}, as_json,
         lambda console, r: console.print(f"{r['answer']['line']}\nreport written to {r['report']}", markup=False))
    return answer.exit_code if exp is not None else 0


def refuse_overwrite(path, force: bool, flag: str | None = "--force") -> None:
    """An existing file that hpcvar did not write as a report is not replaced by one (unless ``force``)."""
    from hpcvar.errors import UsageError
    from hpcvar.report.document import is_report

    if force or not path.exists() or is_report(path):
        return
    what = "a directory" if path.is_dir() else "a file that is not an hpcvar report"
    raise UsageError(f"'{path}' exists and is {what}: writing the report would replace it", "-o",
                     "Give another -o FILE" + (f", or {flag} to overwrite it" if flag and not path.is_dir() else ""))
