"""hpcvar characterize: characterize this machine and predict what it means for applications."""

from __future__ import annotations

import click

from hpcvar.cli.common import launch_options, output_options


@click.command("characterize")
@click.option("--quick", is_flag=True, help="About 3 minutes on a 2-core machine (the demo); default: thorough "
                                            "(tens of minutes).")
@click.option("--steps", default=None, help="Comma list of steps to run (default: all that apply); see --list.")
@click.option("--list", "list_steps", is_flag=True, help="List the steps and exit.")
@click.option("--baseline", default=None, metavar="RUN",
              help="An earlier characterization: the report's verdict lists what degraded against it and the "
                   "plots overlay it (hpcvar compare's tests).")
@click.option("-o", "--output", "report", default=None, type=click.Path(dir_okay=False),
              help="Also write the HTML (.html) or Markdown (.md) report here; it is always written "
                   "into the run directory as report.html.")
@launch_options(default_np=2)
@output_options
def cli(quick, steps, list_steps, baseline, report, as_json, **kw):
    """Characterize this machine and predict what it means for applications.

    Runs every benchmark, recording and prediction that applies to this machine
    and launcher, stores each step as soon as it finishes, and writes a
    self-contained HTML report. --resume RUN continues an interrupted
    characterization."""
    from hpcvar import characterize as ch
    from hpcvar.cli.common import bench_context, print_json, stderr_console

    if list_steps:
        for s in ch.STEPS:
            click.echo(f"{s.name:16s} {s.title}  (needs: {', '.join(sorted(s.needs)) or 'nothing'})")
        return 0
    resume = kw.get("resume")
    ctx = bench_context(kw)
    result = ch.run_characterization(ctx, quick=quick, only=steps, resume=resume, report=report,
                                     console=stderr_console(), baseline=baseline)
    if as_json:
        print_json(result)
    else:
        click.echo(f"characterization stored in {result['run']}")
        for s in result["steps"]:
            detail = s.get("run") or s.get("error") or s.get("reason", "")
            click.echo(f"  {s['name']:17s} {s['status']:9s} {detail}")
        click.echo(f"report: {result['report']}")
    return 0 if all(s["status"] in ("complete", "skipped") for s in result["steps"]) else 1
