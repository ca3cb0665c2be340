"""hpcvar sim jitter: trace-driven OS-jitter simulation of BSP phases (jitSim, docs/jitter-sim.md)."""

from __future__ import annotations

import sys

import click

from hpcvar.cli.common import DURATION, FREQ, INT_LIST, OUT_PATH, emit_run, option, output_options, stderr_console


@click.command("jitter")
@click.option("--trace", "traces", multiple=True, type=click.Path(),
              help="Jitter trace (.jtr, or two-column 'd g' text with --freq), or the directory of a multi-node "
                   "recording (noise record --launcher srun|testbed): simulated node j then uses recorded node j "
                   "mod N. Repeat to compare configurations.")
@click.option("--synthetic", "synthetics", multiple=True,
              help="Synthetic trace instead: sources like '250Hz:2us,10Hz:100us,poisson:0.1Hz:1ms'; repeatable.")
@option("--duration", "trace_length", type=DURATION, default="1h", show_default=True, aliases=("--trace-length",),
        metavar="DURATION", help="Length of a --synthetic trace (a time with its unit: 10s, 1h).")
@click.option("--freq", type=FREQ, default=None, help="Cycles per second of the trace (2.4GHz); needed for text "
                                                       "traces; default 2.4GHz for --synthetic.")
@click.option("--align", default="unsync", show_default=True,
              help="Offsets: unsync, sync, cosched, or measured (a multi-node recording's own cross-node "
                   "alignment); a comma list compares them.")
@click.option("--window", default=None,
              metavar="CYCLES|DURATION", help="Co-scheduler window C (cycles or time) for --align cosched.")
@click.option("--window-origin", default=None,
              metavar="CYCLES|DURATION", help="Start C0 of one co-scheduler window (cycles or time).")
@click.option("--offsets", "offsets_file", type=click.Path(dir_okay=False), default=None,
              help="File of explicit offsets, one trace position (cycles) per task.")
@click.option("--seed", type=click.IntRange(0, 2**64 - 1), default=1, show_default=True, help="Seed of the offsets.")
@click.option("--replicas", type=click.IntRange(1), default=1, show_default=True,
              help="Repeat with derived seeds; report the mean and a 95% CI.")
@click.option("--cores-per-node", type=int, default=None,
              help="K: task i runs on core i mod K (its trace: CPU (i mod K) mod C of the trace); "
                   "default: the trace's CPU count.")
@click.option("--work", default=None, metavar="CYCLES", help="Work quantum W per phase in cycles.")
@click.option("--quantum", type=DURATION, default=None,
              metavar="DURATION", help="Work quantum per phase as a time (1ms); default 1ms.")
@click.option("--barrier", type=click.Choice(["tree", "none"]), default="tree", show_default=True)
@click.option("--arity", type=int, default=2, show_default=True, help="k of the k-ary barrier tree.")
@click.option("--send-cycles", default="0", show_default=True,
              metavar="CYCLES|DURATION|run:REF", help="S: CPU cost of a send (cycles, time, run:REF).")
@click.option("--recv-cycles", default="0", show_default=True,
              metavar="CYCLES|DURATION|run:REF", help="R: CPU cost of a receive.")
@click.option("--latency-intra", default="0", show_default=True,
              metavar="CYCLES|DURATION|run:REF", help="Wire time inside a node (cycles, time, run:REF).")
@click.option("--latency-inter", default="0", show_default=True,
              metavar="CYCLES|DURATION|run:REF", help="Wire time between nodes.")
@click.option("--phases", type=int, default=10, show_default=True, help="N phases of compute + barrier.")
@click.option("--tasks", "task_list", type=INT_LIST, default="1..1K", show_default=True,
              help="Task counts (ranges: 1..1M doubles).")
@click.option("--per-task", "per_task", type=OUT_PATH, default=None,
              help="Write CSV task,phase,compute_end,next_start (cycles) of replica 0 (one task count).")
@option("--plots/--no-plots", "plots", default=False, show_default=True,
        help="Draw the figures now (PNG and SVG in the run's plots/). By default none are drawn (they cost more "
             "than a small simulation); 'hpcvar report' draws a run's missing figures when it needs them.")
@click.option("--threads", default="auto", show_default=True,
              help="POSIX threads of the C core: a count, or auto (one per CPU this process may use). The same "
                   "results for any count; a run too small to share stays on one thread.")
@output_options
def cli(traces, synthetics, trace_length, freq, align, window, window_origin, offsets_file, seed, replicas,
        cores_per_node, work, quantum, barrier, arity, send_cycles, recv_cycles, latency_intra, latency_inter,
        phases, task_list, per_task, plots, threads, as_json, runs_dir):
    """Simulate N phases of (compute W, barrier) for many tasks on a jitter trace (jitSim).

    After De & Mann, jitSim: A Simulator for Predicting Scalability of Parallel Applications in Presence
    of OS Jitter.

    Every task starts at a position of the trace (--align) and computes W cycles of
    compute-available time; jitter delays it. Reports T, the jitter-free T0 and the
    slowdown T/T0 - 1, with the closed form beside it for a periodic trace.
    """
    from hpcvar.errors import UsageError
    from hpcvar.kinds.sim_jitter.job import JitterParams, Span, job, parse_span
    from hpcvar.results.context import JobContext

    if work is not None and quantum is not None:
        raise UsageError("both --work and --quantum", "--work", "Give the work in cycles or as a time, not both")
    if work is not None and not work.strip().isdigit():
        raise UsageError(f"'{work}' is not a cycle count", "--work", "Give cycles, or use --quantum 1ms")

    def span(text: str | None, flag: str) -> Span | None:
        return None if text is None else parse_span(text, flag, runs_dir)

    params = JitterParams(
        traces=tuple(traces), synthetics=tuple(synthetics), duration_s=trace_length, freq_hz=freq,
        align=tuple(a.strip() for a in align.split(",") if a.strip()), window=span(window, "--window"),
        window_origin=span(window_origin, "--window-origin"), offsets_path=offsets_file, seed=seed,
        replicas=replicas, cores_per_node=cores_per_node,
        work=Span(cycles=int(work)) if work is not None else Span(seconds=quantum if quantum is not None else 1e-3),
        barrier=barrier, arity=arity, send=span(send_cycles, "--send-cycles"), recv=span(recv_cycles, "--recv-cycles"),
        latency_intra=span(latency_intra, "--latency-intra"), latency_inter=span(latency_inter, "--latency-inter"),
        phases=phases, tasks=tuple(task_list), per_task_path=per_task, plots=plots, threads=_threads(threads))
    ctx = JobContext(runs_dir=runs_dir, argv=["hpcvar", *sys.argv[1:]],
                     console=stderr_console() if sys.stderr.isatty() else None)
    emit_run(job(params, ctx), as_json)


def _threads(text: str) -> int:
    """--threads: a count (1 or more), or auto (stored as 0)."""
    from hpcvar.errors import UsageError

    if text.strip() == "auto":
        return 0
    try:
        n = int(text)
    except ValueError:
        n = -1
    if n < 1:
        raise UsageError(f"'{text}' is not a thread count", "--threads", "Give a count such as 2, or auto")
    return n
