"""hpcvar runs: read the results store back."""

from __future__ import annotations

import click
from rich.table import Table

from hpcvar.cli.common import output_options, print_json, stdout_console
from hpcvar.results.store import Run, list_runs, resolve_run, runs_root


@click.group("runs")
def cli() -> None:
    """List and show stored runs (run directories under --runs-dir)."""


@cli.command("list")
@output_options
def list_cmd(as_json, runs_dir):
    """One line per run: name, command, status, start time (UTC), host."""
    runs = list_runs(runs_dir)
    rows = [{"id": r.id, "command": r.info.get("command"), "status": r.info.get("status"),
             "started_utc": r.info.get("started_utc"), "host": r.info.get("metadata", {}).get("host"),
             "path": str(r.path)} for r in runs]
    if as_json:
        print_json({"runs_dir": str(runs_root(runs_dir)), "runs": rows})
        return
    console = stdout_console()
    if not rows:
        console.print(f"no runs in {runs_root(runs_dir)}")
        return
    t = Table(title=f"Runs in {runs_root(runs_dir)}", title_justify="left")
    for c in ("id", "command", "status", "started (UTC)", "host"):
        t.add_column(c)
    for r in rows:
        t.add_row(r["id"], r["command"], r["status"], r["started_utc"], r["host"] or "")
    console.print(t)


@cli.command("show")
@click.argument("run")
@output_options
def show_cmd(run, as_json, runs_dir):
    """Parameters, metadata, status, tables and result of RUN (a path, a name, or 'latest')."""
    r = Run.open(resolve_run(run, runs_dir))
    if as_json:
        print_json(r.info)
        return
    console = stdout_console()
    info = r.info
    console.print(f"[bold]{r.id}[/]  {info.get('command')}  status: {info.get('status')}")
    console.print(f"path: {r.path}")
    console.print(f"started {info.get('started_utc')}  ended {info.get('ended_utc')}")
    console.print(f"command line: {' '.join(info.get('argv', []))}")
    meta = info.get("metadata", {})
    t = Table(title="Metadata", title_justify="left", show_header=False)
    for k in ("host", "cpu_model", "cores", "kernel", "governor", "virtualized", "clocksource", "git_sha"):
        t.add_row(k, str(meta.get(k)))
    launcher = meta.get("launcher") or {}
    for k, v in launcher.items():
        t.add_row(f"launcher.{k}", str(v))
    native = meta.get("native") or {}
    for k in ("mpi_library", "timer", "timer_resolution_ns", "timer_cost_ns", "timer_tsc_hz", "hosts"):
        if k in native:
            t.add_row(f"native.{k}", native[k][:100])
    console.print(t)
    p = Table(title="Parameters", title_justify="left", show_header=False)
    for k, v in (info.get("params") or {}).items():
        p.add_row(k, str(v))
    console.print(p)
    console.print(f"tables: {', '.join(info.get('tables', [])) or 'none'}")
    for w in info.get("warnings", []):
        console.print(f"[yellow]warning:[/] {w}")
    if info.get("result"):
        from hpcvar.report.terminal import render_run

        render_run(console, r)
