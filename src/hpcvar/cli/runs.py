"""hpcvar runs: read the results store back."""

from __future__ import annotations

import click
from rich.table import Table

from hpcvar.cli.common import emit, emit_run, output_options, stderr_console, stdout_console
from hpcvar.results.store import Run, list_runs, resolve_run, run_ref, runs_root


@click.group("runs")
def cli() -> None:
    """List and show stored runs (run directories under --runs-dir)."""


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
    t = Table(title="Metadata", title_justify="left", show_header=False)
    for k in ("host", "cpu_model", "cores", "kernel", "governor", "virtualized", "clocksource", "git_sha"):
        t.add_row(k, str(meta.get(k)))
    launcher = meta.get("launcher") or {}
    for k, v in launcher.items():
        text = str(v)  # a nested value (the testbed's hosts) in full would widen every row: --json has it whole
        t.add_row(f"launcher.{k}", text if len(text) <= 100 else text[:97] + "...")
    native = meta.get("native") or {}
    for k in ("mpi_library", "timer", "timer_resolution_ns", "timer_cost_ns", "timer_tsc_hz", "hosts"):
        if k in native:
            t.add_row(f"native.{k}", str(native[k])[:100])
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
    p = Table(title="Parameters", title_justify="left", show_header=False)
    for k, v in (info.get("params") or {}).items():
        p.add_row(k, str(v))
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
