"""hpcvar runs: read the results store back."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from hpcvar.cli.common import DURATION, emit, emit_run, output_options, stderr_console, stdout_console
from hpcvar.results.store import Run, list_runs, resolve_run, run_ref, runs_root

if TYPE_CHECKING:
    from rich.table import Table


@click.group("runs")
def cli() -> None:
    """List, show and remove stored runs (run directories under --runs-dir)."""


@cli.command("list")
@click.option("--all", "all_", is_flag=True,
              help="Also list the steps of each characterization (as PARENT/steps/CHILD; 'runs show' takes them).")
@output_options
def list_cmd(all_, as_json, runs_dir):
    """One line per run: id, command, status, start time (UTC), host. Every id can be given to 'runs show'."""
    root = runs_root(runs_dir)
    broken: list = []
    runs = list_runs(runs_dir, steps=all_, broken=broken)
    rows = [{"id": run_ref(r.path, root), "command": r.info.get("command"), "status": r.status,
             "started_utc": r.info.get("started_utc"), "host": r.info.get("metadata", {}).get("host"),
             "path": str(r.path)} for r in runs]
    for path, err in broken:
        # a damaged run is listed (and named on stderr), never hidden
        stderr_console().print(f"warning: {run_ref(path, root)} cannot be read: {err.what}. {err.todo or ''}",
                               markup=False)
        rows.append({"id": run_ref(path, root), "command": None, "status": "unreadable", "started_utc": None,
                     "host": None, "path": str(path)})
    emit({"runs_dir": str(root), "runs": rows}, as_json, _render_list)


def _render_list(console, result: dict) -> None:
    from rich.table import Table  # rich's tables: not for --help

    rows = result["runs"]
    if not rows:
        console.print(f"no runs in {result['runs_dir']}", markup=False)
        return
    t = Table(title=f"Runs in {result['runs_dir']}", title_justify="left")
    # the id is what 'runs show' takes back: never wrapped or cut
    t.add_column("id", no_wrap=True, min_width=max(len(r["id"]) for r in rows))
    for c in ("command", "status", "started (UTC)", "host"):
        t.add_column(c)
    for r in rows:
        t.add_row(r["id"], r["command"] or "", r["status"] or "", r["started_utc"] or "", r["host"] or "")
    console.print(t)


def _print_error(console, r: Run) -> None:
    """Why a failed or interrupted run ended, and what to do, from run.json's error."""
    err = r.info.get("error") or {}
    if err and r.status in ("failed", "interrupted"):
        console.print(f"why: {err.get('what')}" + (f" ({err['where']})" if err.get("where") else ""), markup=False)
        if err.get("todo"):
            console.print(f"what to do: {err['todo']}", markup=False)


def _metadata_table(meta: dict) -> Table:
    from rich.table import Table

    from hpcvar.report.humanize import value

    t = Table(title="Metadata", title_justify="left", show_header=False)
    for k in ("host", "cpu_model", "cores", "kernel", "governor", "virtualized", "clocksource", "git_sha"):
        t.add_row(*value(k, meta.get(k), "unknown"))
    launcher = meta.get("launcher") or {}
    for k, v in launcher.items():
        name, text = value(k, v)  # a nested value (the testbed's hosts) in full would widen every row: --json has it
        name = name if name.startswith("launcher") else f"launcher {name}"
        t.add_row(name, text if len(text) <= 100 else text[:97] + "...")
    native = meta.get("native") or {}
    for k in ("mpi_library", "timer", "timer_resolution_ns", "timer_cost_ns", "timer_tsc_hz", "hosts"):
        if k in native:
            name, text = value(k, native[k])
            t.add_row(name, text[:100])
    return t


@cli.command("show")
@click.argument("run")
@output_options
def show_cmd(run, as_json, runs_dir):
    """Parameters, metadata, status, tables and result of RUN (a path, a name, PARENT/steps/CHILD, or 'latest')."""
    r = Run.open(resolve_run(run, runs_dir))
    if as_json:
        emit(r.info, True, None)
        return
    from hpcvar.cli.common import current_format

    if current_format() != "table":
        emit_run(r, False)
        return
    console = stdout_console()
    info = r.info
    console.print(f"[bold]{run_ref(r.path, runs_root(runs_dir))}[/]  {info.get('command')}  status: "
                  f"{r.status}")
    if r.status == "lost":
        console.print("[yellow]its process is gone: it was killed before it could end the run (--resume RUN "
                      "continues a resumable benchmark)[/]")
    _print_error(console, r)
    console.print(f"path: {r.path}", markup=False)
    console.print(f"started {info.get('started_utc')}  ended {info.get('ended_utc')}")
    console.print(f"command line: {' '.join(info.get('argv', []))}", markup=False)
    console.print(_metadata_table(info.get("metadata", {})))
    from rich.table import Table

    p = Table(title="Parameters", title_justify="left", show_header=False)
    from hpcvar.report.humanize import value

    for k, v in (info.get("params") or {}).items():
        p.add_row(*value(str(k), v))
    console.print(p)
    console.print(f"tables: {', '.join(info.get('tables', [])) or 'none'}")
    steps = r.children()
    if steps:
        console.print("steps: " + ", ".join(run_ref(c.path, runs_root(runs_dir)) for c in steps), markup=False)
    if info.get("result"):
        from hpcvar.report.terminal import render_run

        render_run(console, r)  # the run's warnings too
        return
    for w in info.get("warnings", []):
        console.print(f"[yellow]warning:[/] {w}")


def _render_removal(console, result: dict) -> None:
    from hpcvar.units import format_size

    for r in result["removed"]:
        console.print(f"{'would remove' if result['dry_run'] else 'removed'} {r['id']}  ({format_size(r['bytes'])})",
                      markup=False)
    for r in result["kept"]:
        console.print(f"kept {r['id']}: {r['why'].removeprefix('kept: ')}", markup=False)
    verb = "would free" if result["dry_run"] else "freed"
    console.print(f"{len(result['removed'])} run(s) {'to remove' if result['dry_run'] else 'removed'}, {verb} "
                  f"{format_size(result['bytes'])}", markup=False)


def _removal_result(plan, dry_run: bool, root, shown_kept) -> dict:
    from hpcvar.results.upkeep import dir_bytes

    removed = [{"id": run_ref(d.run.path, root), "command": d.run.info.get("command"),
                "started_utc": d.run.info.get("started_utc"), "why": d.why,
                "bytes": dir_bytes(d.run.path) if dry_run else d.bytes} for d in plan.removed]
    kept = [{"id": run_ref(d.run.path, root), "why": d.why} for d in plan.kept if shown_kept(d)]
    return {"runs_dir": str(root), "dry_run": dry_run, "removed": removed, "kept": kept,
            "bytes": sum(r["bytes"] for r in removed)}


@cli.command("rm")
@click.argument("runs", nargs=-1, required=True)
@click.option("--dry-run", is_flag=True, help="Say what would be removed; remove nothing.")
@output_options
def rm_cmd(runs, dry_run, as_json, runs_dir):
    """Remove RUNS (names, paths or 'latest') from the store, with everything they hold.

    Refused for a run in progress, for a step of a characterization (remove the characterization) and for
    a run that another run refers to (a characterization's baseline, the latency run a simulation used),
    unless that run is removed too."""
    from hpcvar.errors import UsageError
    from hpcvar.results import upkeep

    root = runs_root(runs_dir)
    targets = [Run.open(resolve_run(r, runs_dir)) for r in runs]
    upkeep.check_targets(targets, root)
    plan = upkeep.plan_removal(list_runs(runs_dir), targets)
    named = {t.id for t in targets}
    refused = [d for d in plan.kept if d.run.id in named]
    if refused:
        d = refused[0]
        raise UsageError(f"run {d.run.id} is {d.why.removeprefix('kept: ')}", "RUN",
                         "Wait for it to end" if "in progress" in d.why else
                         "Remove the run that refers to it as well (name both), or keep it")
    if not dry_run:
        upkeep.apply(plan)
    emit(_removal_result(plan, dry_run, root, lambda d: False), as_json, _render_removal)


@cli.command("prune")
@click.option("--older-than", type=DURATION, default=None, metavar="DURATION",
              help="Remove runs started longer ago than this (e.g. 30d, 12h).")
@click.option("--keep-last", type=click.IntRange(0), default=None, metavar="N",
              help="Keep the N newest runs of each group (one command on one set of hosts), however old.")
@click.option("--dry-run", is_flag=True, help="Say what would be removed; remove nothing.")
@output_options
def prune_cmd(older_than, keep_last, dry_run, as_json, runs_dir):
    """Remove old runs: those started before --older-than, beyond the --keep-last newest of their group.

    Never removes a run in progress, nor a run that a kept run refers to (a kept characterization's
    baseline, the latency run a kept simulation used). Steps go with their characterization."""
    import datetime as dt

    from hpcvar.errors import UsageError
    from hpcvar.results import upkeep

    if older_than is None and keep_last is None:
        raise UsageError("prune needs --older-than, --keep-last or both", "--older-than",
                         "e.g. hpcvar runs prune --older-than 30d --keep-last 10")
    root = runs_root(runs_dir)
    plan = upkeep.plan_prune(list_runs(runs_dir), dt.datetime.now(dt.UTC), older_than, keep_last)
    if not dry_run:
        upkeep.apply(plan)
    emit(_removal_result(plan, dry_run, root, lambda d: "refers to it" in d.why or "in progress" in d.why),
         as_json, _render_removal)
