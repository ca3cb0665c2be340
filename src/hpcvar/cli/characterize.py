"""hpcvar characterize: characterize this machine and predict what it means for applications."""

from __future__ import annotations

import contextlib

import click

from hpcvar.cli.common import OUT_PATH, launch_options, option, output_options


@click.command("characterize")
@click.option("--quick", is_flag=True, help="About 3 minutes on a 2-core machine (the demo); default: thorough "
                                            "(tens of minutes).")
@click.option("--steps", default=None, help="Comma list of steps to run (default: all that apply); see --list.")
@click.option("--list", "list_steps", is_flag=True, help="List the steps and exit.")
@click.option("--baseline", default=None, metavar="RUN",
              help="An earlier characterization: the report's verdict lists what degraded against it and the "
                   "plots overlay it (hpcvar compare's tests).")
@option("-o", "--out", "report", default=None, type=OUT_PATH, aliases=("--output",),
        help="Also write the HTML (.html) or Markdown (.md) report here; it is always written "
                   "into the run directory as report.html.")
@click.option("--expect", "expect_file", type=click.Path(dir_okay=False), default=None, metavar="FILE",
              help="Site expectations (TOML, docs/screen.md): a measured value outside its bound is DEGRADED.")
@launch_options(default_np=2)
@output_options
def cli(quick, steps, list_steps, baseline, report, expect_file, as_json, **kw):
    """Characterize this machine and predict what it means for applications.

    Runs every benchmark, recording and prediction that applies to this machine
    and launcher, stores each step as soon as it finishes, and writes a
    self-contained HTML report. Prints one line first: OK, DEGRADED or
    UNRELIABLE, and exits with 0, 3 or 4 (docs/cli.md). --resume RUN continues
    an interrupted characterization."""
    from hpcvar import characterize as ch
    from hpcvar.cli.common import bench_context, emit, measurement_flags_given, stderr_console, writing_out

    if list_steps:
        emit({"steps": [{"name": s.name, "title": s.title, "needs": ", ".join(sorted(s.needs)) or "nothing"}
                        for s in ch.STEPS]}, as_json, _render_list)
        return 0
    if report:
        from pathlib import Path

        from hpcvar.cli.report import refuse_overwrite

        refuse_overwrite(Path(report), False, None)  # characterize has no --force: name another -o
    resume = kw.get("resume")
    given = tuple(n for n in measurement_flags_given() if n in ("quick", "steps"))
    ctx = bench_context(kw)
    with writing_out(report) if report else contextlib.nullcontext():
        result = ch.run_characterization(ctx, quick=quick, only=steps, resume=resume, report=report,
                                         console=stderr_console(), baseline=baseline, expect=expect_file,
                                         flags_given=given)
    emit(result, as_json, _render_result)
    return int(result["answer"]["exit_code"])


def _render_list(console, result: dict) -> None:
    for s in result["steps"]:
        console.print(f"{s['name']:16s} {s['title']}  (needs: {s['needs']})", markup=False)


ANSWER_STYLE = {"OK": "bold green", "DEGRADED": "bold red", "UNRELIABLE": "bold yellow"}


def _render_result(console, result: dict) -> None:
    from rich.markup import escape

    a = result["answer"]
    console.print(f"[{ANSWER_STYLE.get(a['status'], 'bold')}]{escape(a['line'])}[/]")
    console.print(f"characterization stored in {result['run']}", markup=False)
    for s in result["steps"]:
        detail = s.get("run") or s.get("error") or s.get("reason", "")
        console.print(f"  {s['name']:17s} {s['status']:9s} {detail}", markup=False)
    console.print(f"report: {result['report']}", markup=False)
