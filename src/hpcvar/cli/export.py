"""hpcvar export: stored runs in the formats of the tools sites already run (docs/watch.md)."""

from __future__ import annotations

import click

from hpcvar.cli.common import OUT_PATH, option, runs_dir_option


@click.group("export")
def cli() -> None:
    """Stored runs for Prometheus, ReFrame, Caliper/Thicket and Extra-P."""


def _write_or_print(text: str, out: str | None) -> None:
    from pathlib import Path

    from hpcvar.cli.common import writing_out
    from hpcvar.results.store import atomic_write_text

    if out is None:
        click.echo(text, nl=False)
        return
    with writing_out(out):
        atomic_write_text(Path(out), text)


@cli.command("prometheus")
@click.argument("run")
@option("-o", "--out", "out", default=None, type=OUT_PATH,
        help="Write here, atomically (e.g. /var/lib/node_exporter/textfile/hpcvar.prom); default: standard output.")
@runs_dir_option
def prometheus_cmd(run, out, runs_dir):
    """RUN's figures in the text format node_exporter's textfile collector reads.

    Per node and CPU: OS noise (share of time lost, longest detour); per pair of nodes and size: latency
    quantiles and bandwidth; a screen's per-node and per-link figures; the run's answer as a number
    (0 OK, 3 DEGRADED, 4 UNRELIABLE) and its run time. The file is replaced whole (temporary name, then
    rename), so the collector never reads half of it."""
    from hpcvar.export.prometheus import prometheus_text
    from hpcvar.results.store import Run, resolve_run

    _write_or_print(prometheus_text(Run.open(resolve_run(run, runs_dir))), out)


@cli.command("reframe-refs")
@click.argument("runs", nargs=-1, required=True)
@click.option("--drop-label", "drop", multiple=True, metavar="LABEL",
              help="Leave this label out of the variable names (node: one reference for every node of a "
                   "--distribute'd test). Repeatable.")
@option("-o", "--out", "out", default=None, type=OUT_PATH, help="Write the JSON here; default: standard output.")
@runs_dir_option
def reframe_refs_cmd(runs, drop, out, runs_dir):
    """ReFrame references (value, lower, upper, unit) from RUNS, bounds from the measured dispersion.

    One run: each figure's 95% CI; several runs of one group (a site's last good nights): the range of their
    values and CIs, which holds the run-to-run variation. Only the bad side is bounded. The JSON's
    'reference' is what hpcvar.integrations.reframe's tests take (their 'references' variable), and the
    same command on a test's own run gives its performance variables (docs/watch.md)."""
    from hpcvar.export.reframe import refs_json
    from hpcvar.results import dumps_standard
    from hpcvar.results.store import Run, resolve_run

    chosen = [Run.open(resolve_run(r, runs_dir)) for r in runs]
    _write_or_print(dumps_standard(refs_json(chosen, drop)) + "\n", out)


@cli.command("caliper")
@click.argument("runs", nargs=-1, required=True)
@click.option("-o", "--out", "out", required=True, type=click.Path(),
              help="A .json file for one run, or an existing directory: one <run>.json per run.")
@runs_dir_option
def caliper_cmd(runs, out, runs_dir):
    """RUNS as Caliper profiles (json-split, with the run's metadata) that Thicket and Hatchet read.

    One profile per run: regions hpcvar > command (a characterization: its steps) > metric, with the
    median, mean, min, max, p90, p99 and count of each metric's samples; the metadata names the cluster,
    nodes, ranks, MPI and hpcvar version. In Python: thicket.Thicket.from_caliper(files)."""
    from pathlib import Path

    from hpcvar.errors import UsageError
    from hpcvar.export.caliper import caliper_profile
    from hpcvar.results import dumps_standard
    from hpcvar.results.store import Run, resolve_run

    chosen = [Run.open(resolve_run(r, runs_dir)) for r in runs]
    target = Path(out)
    if target.suffix.lower() == ".json" and not target.is_dir():
        if len(chosen) > 1:
            raise UsageError(f"{len(chosen)} runs make {len(chosen)} profiles, not one file", "-o",
                             "Give an existing directory (one <run>.json each)")
        _write_or_print(dumps_standard(caliper_profile(chosen[0])) + "\n", str(target))
        click.echo(f"written {target}")
        return
    if not target.is_dir():
        raise UsageError(f"'{out}' is neither a .json file name nor an existing directory", "-o",
                         f"Create the directory first (mkdir -p {out}) or give a .json file for one run")
    for run in chosen:
        _write_or_print(dumps_standard(caliper_profile(run)) + "\n", str(target / f"{run.id}.json"))
    click.echo(f"written {len(chosen)} profile(s) into {target}")


@cli.command("extrap")
@click.argument("runs", nargs=-1, required=True)
@option("-o", "--out", "out", default=None, type=OUT_PATH,
        help="Write the JSON Lines here (e.g. sweep.jsonl); default: standard output.")
@runs_dir_option
def extrap_cmd(runs, out, runs_dir):
    """RUNS (sweeps over size, queue length, clients, or runs at several --np) as Extra-P JSON Lines.

    One line per repetition: every sample is kept. Then: extrap --jsonlines FILE (or Thicket's Extra-P
    modeling)."""
    from hpcvar.export.extrap import extrap_lines
    from hpcvar.results.store import Run, resolve_run

    _write_or_print(extrap_lines([Run.open(resolve_run(r, runs_dir)) for r in runs]), out)
