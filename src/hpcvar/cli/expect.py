"""hpcvar expect: write site expectations from a good run (a TOML file for --expect)."""

from __future__ import annotations

import click

from hpcvar.cli.common import OUT_PATH, option, runs_dir_option


@click.command("expect")
@click.option("--from", "source", required=True, metavar="RUN",
              help="A good run: a screen (every node and link), a characterization, a latency or noise run.")
@option("-o", "--out", type=OUT_PATH, default=None, help="Write the file here (default: print it).")
@click.option("--hosts", default=None, metavar="PATTERNS",
              help="Comma list of host patterns the expectations apply to (default: the run's hosts).")
@click.option("--partition", default=None, help="Only for runs in this Slurm partition (default: the run's).")
@runs_dir_option
def cli(source, out, hosts, partition, runs_dir):
    """Write site expectations from a good run (a TOML file for --expect).

    Every metric's bound is derived from the run's own dispersion and confidence intervals: the median over
    its nodes (or links) minus, or plus on the bad side, the larger of 5.19 x MAD' (the outlier rule's own
    threshold: a node passes exactly when it would not stand out among the good run's nodes) and twice the
    median CI half-width (one measurement's precision). What the run found to stand out, and what was measured
    disturbed, is left out. Each line says how it was derived (its 'how')."""
    from pathlib import Path

    from hpcvar import expect
    from hpcvar.cli.common import stdout_console, writing_out
    from hpcvar.errors import UsageError
    from hpcvar.results.store import Run, atomic_write_text, resolve_run
    from hpcvar.screen.analysis import METRICS

    run = Run.open(resolve_run(source, runs_dir))
    obs = expect.observations_of(run)
    if not obs:
        raise UsageError(f"run {run.id} ({run.info.get('command')}) has nothing expectations judge", "--from",
                         "Give a screen, a characterization, or a latency or noise run across nodes")
    names = sorted({h for o in obs for h in o.hosts})
    pats = [h.strip() for h in hosts.split(",") if h.strip()] if hosts else names
    part = partition or _partition_of(run)
    floors = {m.name: (m.floor, m.abs_floor) for m in METRICS.values()}
    text = expect.derive(obs, floors, pats, str(run.path), part, expect.outliers_of(run))
    expect.parse(text, "derived")  # what is written reads back
    if out:
        with writing_out(out):
            atomic_write_text(Path(out), text)
        stdout_console().print(f"expectations for {len(pats)} host pattern(s) written to {out}", markup=False)
    else:
        click.echo(text, nl=False)
    return 0


def _partition_of(run) -> str | None:
    return (run.info.get("params") or {}).get("partition") or None
