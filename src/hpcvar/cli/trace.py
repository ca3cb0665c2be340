"""hpcvar trace: record MPI applications with the PMPI tracer, import and inspect event traces."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

import click

from hpcvar.cli.common import (
    DIALECT_HELP,
    OUT_PATH,
    POSITIVE_DURATION,
    FiniteFloat,
    emit,
    format_options,
    option,
    stderr_console,
    writing_out,
)
from hpcvar.errors import LaunchError, UsageError
from hpcvar.launch.guard import preexec


class _RunByDefault(click.Group):
    """``hpcvar trace -o APP.trace -- <launcher and app>`` is ``hpcvar trace run -o ...``: when the first
    argument is an option (other than --help) rather than a subcommand name, the ``run`` subcommand is meant."""

    def parse_args(self, ctx, args):
        if args and args[0].startswith("-") and args[0] not in ("--help", "-h"):
            args = ["run", *args]
        return super().parse_args(ctx, args)


@click.group("trace", cls=_RunByDefault)
def cli() -> None:
    """Trace MPI applications (PMPI) and convert traces.

    \b
    hpcvar trace -o APP.trace -- mpiexec -n 4 ./app     (the same as 'hpcvar trace run ...')
    hpcvar trace import SOURCE -o APP.trace             (OTF2 or SimGrid TIT)
    hpcvar trace export APP.trace --to tit -o APP.txt   (SimGrid TIT, for smpirun -replay)
    hpcvar trace show APP.trace
    hpcvar trace cut APP.trace -o PART.trace --after-collective -1
    """


def _tracer_lib(lib: str | None) -> Path:
    if lib:
        p = Path(lib)
        if not p.is_file():
            raise UsageError(f"no tracer library at '{lib}'", "--lib",
                             "Give the libhv_trace.so built against the application's MPI (docs/replay.md)")
        return p.resolve()
    from hpcvar._native import find_library

    return find_library("libhv_trace.so").resolve()


@cli.command("run", context_settings={"ignore_unknown_options": True})
@option("-o", "--out", "output", required=True, type=OUT_PATH, aliases=("--output",),
        help="Native event trace to write (Parquet), e.g. app.trace.")
@click.option("--lib", default=None, help="Tracer library to preload (default: the one built with hpcvar; give "
                                          "one built against the application's MPI, see docs/replay.md).")
@click.option("--raw-dir", type=click.Path(file_okay=False), default=None,
              help="Directory for the per-rank raw files (default: a temporary directory next to --out; it "
                   "must be visible to every node). Kept when given.")
@click.option("--clock", type=click.Choice(["auto", "tsc", "mono"]), default="auto", show_default=True,
              help="Tracer clock: the cheaper exact one (auto), rdtsc, or clock_gettime.")
@click.option("--cpu-time/--no-cpu-time", "cpu_time", default=False, show_default=True,
              help="Also record each thread's CPU time at every call's entry and exit (column cpu_ns: the CPU time "
                   "of the computation between calls, for 'sim app --compute cpu'). Costs two system calls per MPI "
                   "call (0.3-1 us each here).")
@click.option("--cpu-clock", type=click.Choice(["thread", "user"]), default=None,
              help="The CPU time --cpu-time records: the thread's CPU clock (exact; the default), or its user-mode "
                   "time, which "
                   "leaves out the network stack's interrupt work that a kernel without IRQ time accounting charges "
                   "to the computing thread it interrupts (split at the kernel's tick where accounting is "
                   "tick-based; docs/replay.md, 'Compute as CPU time').")
@click.option("--timeout", type=POSITIVE_DURATION, default=None,
              help="Stop the application after this long (e.g. 10m).")
@format_options
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def run_cmd(output, lib, raw_dir, clock, cpu_time, cpu_clock, timeout, as_json, command):
    """Run COMMAND (launcher and MPI application, after --) with the tracer preloaded; merge the ranks'
    records into one native trace.

    Example: hpcvar trace -o lj.trace -- mpiexec -n 2 lmp -in in.lj  ('run' may be left out)

    LD_PRELOAD and HV_TRACE_DIR are set in the launcher's environment; MPICH's mpiexec passes them to
    every rank; Open MPI's mpirun passes them to local ranks, for remote ones add '-x LD_PRELOAD -x
    HV_TRACE_DIR' to its options.
    """
    from hpcvar.traces.parquet import merge_raw, write_parquet

    if cpu_clock and not cpu_time:
        raise UsageError(f"--cpu-clock {cpu_clock} chooses the CPU time that --cpu-time records, and --cpu-time is "
                         "not given: the trace would hold no CPU time", "--cpu-clock",
                         f"Add --cpu-time (--cpu-time --cpu-clock {cpu_clock}), or leave --cpu-clock out")
    libp = _tracer_lib(lib)
    if not shutil.which(command[0]):
        raise UsageError(f"command '{command[0]}' not found", "COMMAND",
                         "Give the launcher, e.g. -- mpiexec -n 2 ./app")
    out = Path(output)
    keep = raw_dir is not None
    rdir = Path(raw_dir) if keep else Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent.resolve()))
    rdir.mkdir(parents=True, exist_ok=True)
    for old in rdir.glob("rank.*.hvt"):
        old.unlink()
    env = dict(os.environ)
    env["LD_PRELOAD"] = f"{libp}:{env['LD_PRELOAD']}" if env.get("LD_PRELOAD") else str(libp)
    env["HV_TRACE_DIR"] = str(rdir.resolve())
    if clock != "auto":
        env["HV_TRACE_CLOCK"] = clock
    env["HV_TRACE_CPU"] = (cpu_clock or "thread") if cpu_time else "0"
    err = stderr_console()
    err.print(f"tracing: {' '.join(command)}")
    try:
        # the application (its launcher) is told to stop when hpcvar dies, kill -9 included
        res = subprocess.run(list(command), env=env, timeout=timeout, preexec_fn=preexec(signal.SIGTERM))
    except subprocess.TimeoutExpired:
        raise LaunchError(f"the application did not finish within {timeout:g} s", "--timeout",
                          "Raise --timeout or shorten the run") from None
    try:
        if res.returncode != 0:
            if not list(rdir.glob("rank.*.hvt")):
                raise LaunchError(f"the application exited with status {res.returncode} and wrote no trace",
                                  " ".join(command)[:80], "Run it without hpcvar first to check it works")
            err.print(f"[yellow]warning: the application exited with status {res.returncode}; merging what the "
                      "ranks wrote[/]")
        trace = merge_raw(rdir, source=" ".join(command))
        with writing_out(out):
            write_parquet(trace, out)
    finally:
        if not keep:
            shutil.rmtree(rdir, ignore_errors=True)
    emit(_summary(trace, out), as_json, _render_summary)


def _summary(trace, path) -> dict:
    ev = trace.events
    span = (ev.groupby("task")["t_end_ns"].max() - ev.groupby("task")["t_start_ns"].min()) * 1e-9
    from hpcvar.sim.replay import mpi_time_s
    from hpcvar.traces.cut import world_collectives

    comm = mpi_time_s(ev, trace.ntasks)
    polls = ev.groupby("task")["poll_ns"].sum().to_dict() if "poll_ns" in ev.columns else {}
    coll = world_collectives(trace)
    first = coll[coll["task"] == 0]
    return {"world_collectives": int(len(first)),
            "last_world_collective": ({"k": int(first["k"].iloc[-1]), "op": str(first["op"].iloc[-1]),
                                       "t_end_s": float(first["t_end_ns"].iloc[-1]) * 1e-9} if len(first) else None),
            "trace": str(path), "ntasks": trace.ntasks, "rows": int(len(ev)), "timed": trace.timed,
            "ops": {k: int(v) for k, v in ev["op"].value_counts().items() if v},
            "comms": len(trace.comms), "clock": trace.meta.get("clock"), "cpu_time": "cpu_ns" in ev.columns,
            "cpu_clock": trace.meta.get("cpu"),
            "polls": trace.meta.get("polls"),
            "tasks": [{"task": int(t), "span_s": float(span[t]), "mpi_s": float(comm[t]),
                       "poll_s": float(polls.get(t, 0)) * 1e-9} for t in range(trace.ntasks) if t in span.index]}


def _render_summary(c, s: dict) -> None:
    from rich.table import Table

    c.print(f"{s['trace']}: {s['ntasks']} tasks, {s['rows']} rows, {s['comms']} communicators"
            + (f", clock {s['clock']}" if s.get("clock") else "") + ("" if s["timed"] else " (time-independent)")
            + (f", with the threads' {'user ' if s.get('cpu_clock') == 'user' else ''}CPU time (sim app --compute "
               "cpu)" if s.get("cpu_time") else ""))
    c.print("ops: " + ", ".join(f"{k} {v}" for k, v in s["ops"].items()))
    last = s.get("last_world_collective")
    if last:
        c.print(f"collectives on MPI_COMM_WORLD per task: {s['world_collectives']} (the last, number "
                f"{last['k']} or -1, is a {last['op']} ending at {last['t_end_s']:.6f} s on task 0; "
                "'hpcvar trace cut' cuts at them)")
    from hpcvar.report.terminal import seconds

    if s.get("polls"):
        c.print(f"polls that found nothing (MPI_Iprobe, MPI_Test*): {sum(s['polls']):,} (their time is in MPI)")
    t = Table("task", "span", "in MPI", "of it polling", box=None)
    for r in s["tasks"]:
        t.add_row(str(r["task"]), seconds(r["span_s"]), seconds(r["mpi_s"]), seconds(r.get("poll_s", 0.0)))
    c.print(t)


@cli.command("import")
@click.argument("source", type=click.Path(exists=True))
@option("-o", "--out", "output", required=True, type=OUT_PATH, aliases=("--output",), help="Native trace to write.")
@click.option("--from", "fmt", type=click.Choice(["auto", "tit", "otf2"]), default="auto", show_default=True,
              help="Input format: SimGrid time-independent trace (tit) or OTF2 archive (the .otf2 anchor file).")
@click.option("--flops-rate", type=FiniteFloat(0, min_open=True), default=1e9, show_default=True,
              help="TIT: flop/s that turn 'compute FLOPS' (and the FLOPS of reduce/allreduce) into seconds.")
@click.option("--dialect", default="auto", show_default=True, help=DIALECT_HELP)
@click.option("--engine", type=click.Choice(["auto", "native", "python"]), default=None,
              help="Importer: C (native/sim/tit.c; OTF2: libotf2, where hpcvar was built with it), the Python "
                   "reference, or auto (C when installed) [default: $HPCVAR_IMPORT_ENGINE, else auto].")
@format_options(legacy=("fmt", ("auto", "tit", "otf2")))
def import_cmd(source, output, fmt, flops_rate, dialect, engine, as_json):
    """Convert an OTF2 or SimGrid TIT trace to the native format.

    A TIT trace is one file or an index of per-rank files (what 'smpirun -trace-ti' writes), in SimGrid's
    dialect of 3.20 and later ('isend DST TAG COUNT DATATYPE') or of 3.19 and before ('Isend DST COUNT'),
    chosen per file from its lines (docs/formats.md).
    """
    from hpcvar.traces import load_trace
    from hpcvar.traces.parquet import write_parquet

    if fmt == "auto":
        fmt = "otf2" if source.endswith(".otf2") else "tit"
    trace = load_trace(source, fmt, flops_rate, engine, dialect)
    with writing_out(output):
        write_parquet(trace, output)
    emit(_summary(trace, output), as_json, _render_summary)


@cli.command("show")
@click.argument("trace_file", type=click.Path())
@format_options
def show_cmd(trace_file, as_json):
    """Summarize a native trace: tasks, rows per op, time in MPI."""
    from hpcvar.traces.parquet import read_parquet

    emit(_summary(read_parquet(trace_file), trace_file), as_json, _render_summary)


@cli.command("cut")
@click.argument("trace_file", type=click.Path())
@option("-o", "--out", "output", required=True, type=OUT_PATH, help="Native trace to write (the section).")
@click.option("--after-collective", "after", type=int, default=None,
              help="Keep what each task does after its K-th collective on MPI_COMM_WORLD (0 the first, -1 the "
                   "last).")
@click.option("--before-collective", "before", type=int, default=None,
              help="Keep what each task does before its K-th collective on MPI_COMM_WORLD.")
@format_options
def cut_cmd(trace_file, output, after, before, as_json):
    """Cut one section of a program out of a trace, at collectives on MPI_COMM_WORLD.

    Every rank calls the collectives of a communicator in the same order, so the K-th one is the same
    point of the program in every task; a message or a request that crosses the cut is refused. The
    section keeps the compute before its first and after its last call. Example: the HPL section of
    the HPC Challenge suite (hpcc runs HPL last, after its last world collective):

    \b
    hpcvar trace cut hpcc.trace -o hpl.trace --after-collective -1
    """
    from hpcvar.traces import load_trace
    from hpcvar.traces.cut import cut
    from hpcvar.traces.parquet import write_parquet

    part = cut(load_trace(trace_file), after, before, where=str(trace_file))
    with writing_out(output):
        write_parquet(part, output)
    emit(_summary(part, output), as_json, _render_summary)


@cli.command("export")
@click.argument("trace_file", type=click.Path())
@click.option("--to", "to", type=click.Choice(["tit"]), required=True,
              help="tit: SimGrid's time-independent trace (the dialect of SimGrid 3.20 and later), an index file and "
                   "one file per rank in <OUT>_files/, which 'smpirun -replay OUT' replays.")
@option("-o", "--out", "output", required=True, type=OUT_PATH, help="The index file to write, e.g. app.txt.")
@click.option("--flops-rate", type=FiniteFloat(0, min_open=True), default=1e9, show_default=True,
              help="flop/s that the compute between calls is written in: the speed of the hosts SimGrid replays on "
                   "(its platform's 'speed').")
@click.option("--collectives", type=click.Choice(["binomial", "recdoub", "ring"]), default="binomial",
              show_default=True,
              help="The algorithm that writes as messages the collectives TIT cannot hold (on communicators other "
                   "than MPI_COMM_WORLD, v-collectives): that of 'sim app --collectives'.")
@click.option("--from", "fmt", type=click.Choice(["auto", "native", "tit", "otf2"]), default="auto",
              show_default=True, help="Format of TRACE_FILE (auto: by extension).")
@format_options
def export_cmd(trace_file, to, output, flops_rate, collectives, fmt, as_json):
    """Write a trace in another simulator's format: SimGrid's time-independent trace (--to tit).

    Example: replay a trace recorded with 'hpcvar trace' in SimGrid (docs/replay.md, "SimGrid"):

    \b
    hpcvar trace export app.trace --to tit -o app.txt
    smpirun -np 4 -platform cluster.xml -hostfile hosts -replay app.txt
    """
    from hpcvar.traces import load_trace
    from hpcvar.traces.tit_export import write_tit

    trace = load_trace(trace_file, fmt)
    with writing_out(output):
        files = write_tit(trace, output, flops_rate, collectives)
    emit({"trace": str(trace_file), "to": to, "index": str(output), "files": [str(f) for f in files[:-1]],
          "ntasks": trace.ntasks, "rows": int(len(trace.events)), "flops_rate": flops_rate}, as_json, _render_export)


def _render_export(c, s: dict) -> None:
    c.print(f"{s['trace']}: {s['ntasks']} tasks, {s['rows']} rows written as SimGrid's time-independent trace "
            f"{s['index']} (one file per rank in {s['index']}_files/, compute at {s['flops_rate']:g} flop/s)")
    c.print(f"replay it in SimGrid: smpirun -np {s['ntasks']} -platform PLATFORM.xml -hostfile HOSTS -replay "
            f"{s['index']}   (hosts of speed {s['flops_rate']:g}f; run it where the index's paths lead)")
