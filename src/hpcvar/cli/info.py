"""hpcvar info: what hpcvar was built with and what this machine is."""

from __future__ import annotations

import click

from hpcvar._native import build_info, native_dirs
from hpcvar.cli.common import print_json, stdout_console
from hpcvar.errors import MissingToolError
from hpcvar.launch.mpi import default_mpiexec, detect_flavor


@click.command("info")
@click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON on stdout.")
def cli(as_json):
    """Show the MPI hpcvar was built with, the timers and the machine.

    The MPI compiler and version used at build time, the matching mpiexec, the
    timers (calibrated TSC frequency in Hz, resolution and cost in ns) and the
    machine's metadata."""
    from hpcvar import metadata  # with rich's tables below: not for --help (0.02 s of its start-up)

    meta = metadata.collect()
    b = build_info()
    try:
        mpiexec = str(default_mpiexec())
        flavor = detect_flavor(mpiexec)
        launcher = {"mpiexec": mpiexec, "family": flavor.family, "version": flavor.version}
    except MissingToolError as e:
        launcher = {"error": e.what}
    out = {"build": b, "mpiexec": launcher, "native_dirs": [str(d) for d in native_dirs()], "machine": meta}
    if as_json:
        print_json(out)
        return
    from rich.table import Table

    from hpcvar.report.humanize import number, value  # numpy: not for --help

    c = stdout_console()
    t = Table(title="hpcvar build", title_justify="left", show_header=False)
    t.add_row("version", meta["hpcvar_version"] + (f" ({meta['git_sha'][:12]})" if meta.get("git_sha") else ""))
    t.add_row("native programs", str(b.get("native_dir")))
    t.add_row("MPI found at build", number(b.get("mpi_found")))
    if b.get("mpi_found"):
        t.add_row("mpicc", b.get("mpicc", ""))
        t.add_row("MPI standard", b.get("mpi_version", ""))
    for k, v in launcher.items():
        t.add_row(f"mpiexec {k}", number(v))
    c.print(t)
    if not b.get("mpi_found"):
        c.print("[yellow]MPI benchmarks are unavailable:[/] install an MPI (pip install 'hpcvar[mpich]', or put "
                "your system's mpicc on PATH / in MPICC) and reinstall hpcvar.")
    m = Table(title="machine", title_justify="left", show_header=False)
    for k in ("host", "cpu_model", "cores", "kernel", "governor", "virtualized", "smt_active", "clocksource"):
        m.add_row(*value(k, meta.get(k), "unknown"))
    for k, v in meta.get("timer_probe", {}).items():
        name, text = value(k, v)
        m.add_row(f"timer: {name}", text)
    c.print(m)
