"""hpcvar bench bsp."""

from __future__ import annotations

import click

from hpcvar.cli.common import POSITIVE_DURATION, bench_context, emit_run, launch_options, output_options


@click.command("bsp")
@click.option("--quantum", type=POSITIVE_DURATION, default="1ms", show_default=True,
              help="Work quantum W per phase: undisturbed CPU time of a calibrated loop (a detour stretches it).")
@click.option("--phases", type=int, default=1000, show_default=True, help="Measured phases N per repetition.")
@click.option("--warmup", type=int, default=10, show_default=True,
              help="Unmeasured phases before each repetition.")
@click.option("--repeat", type=int, default=3, show_default=True,
              help="Repetitions of N phases (one job); the mean and a 95% CI are reported.")
@click.option("--barrier", type=click.Choice(["mpi", "tree"]), default="mpi", show_default=True,
              help="MPI_Barrier, or the simulator's k-ary tree of zero-byte messages (sim jitter --barrier tree).")
@click.option("--arity", type=int, default=2, show_default=True, help="k of the --barrier tree.")
@click.option("--work-iters", type=int, default=None,
              help="Loop iterations per phase instead of calibrating (default: the --baseline run's, else "
                   "calibrated at start).")
@click.option("--pin/--no-pin", default=True, show_default=True,
              help="Pin rank r to the (r mod n)-th of the n CPUs it may use (its jitter is then one CPU's).")
@click.option("--rt-prio", type=int, default=0, show_default=True,
              help="Run the ranks SCHED_FIFO at this priority (0: normal scheduler): other user processes then "
                   "cannot preempt them; keep it below 'noise inject --rt-prio' (50) so that injected bursts do.")
@click.option("--baseline", default=None, metavar="RUN",
              help="A 'bench bsp' run of the same workload without injected noise: report (T/N)/(T0/N0) - 1 "
                   "and reuse its calibration.")
@click.option("--wait", default="auto", show_default=True,
              help="How the barrier waits: spin (MPI's busy wait), yield, sleep or sleep:TIME (test, then sleep "
                   "TIME, 1us..1s); auto: spin, or sleep 50us when the ranks outnumber the cores they share (a "
                   "spinning rank would take the CPU its neighbour computes on).")
@launch_options(default_np=2)
@output_options
def cli(quantum, phases, warmup, repeat, barrier, arity, work_iters, pin, rt_prio, baseline, wait, as_json, **kw):
    """Bulk-synchronous phases: fixed CPU work, then a barrier, on every rank.

    Measures how OS jitter (or noise injected with 'hpcvar noise inject')
    slows the workload that 'hpcvar sim jitter' simulates. Reports the total
    time T of N phases, T/(N*W) - 1 against pure compute and, with
    --baseline, the slowdown against a run without injected noise. Every
    rank's compute end and barrier exit of every phase is stored.
    """
    from hpcvar.bench.wait import parse_wait
    from hpcvar.kinds.bsp.job import BspParams, job, load_baseline

    ctx = bench_context(kw)
    base = load_baseline(baseline, ctx.runs_dir) if baseline else None
    if base and work_iters is None:
        work_iters = base.work_iters
    params = BspParams(quantum_s=quantum, phases=phases, warmup=warmup, repeat=repeat, barrier=barrier, arity=arity,
                       work_iters=work_iters, pin=pin, rt_prio=rt_prio, baseline=base, wait=parse_wait(wait))
    emit_run(job(params, ctx), as_json)
