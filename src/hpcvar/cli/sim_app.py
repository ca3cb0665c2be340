"""hpcvar sim app: replay an event trace on a simulated cluster (mappings x network models)."""

from __future__ import annotations

import sys

import click

from hpcvar.cli.common import (
    DIALECT_HELP,
    DURATION,
    FREQ,
    OUT_PATH,
    SIZE,
    FiniteFloat,
    emit_run,
    format_options,
    option,
    runs_dir_option,
    stderr_console,
)
from hpcvar.noise import DRAWN_ALIGNMENTS, UNSYNC


def _bandwidth(text: str, flag: str) -> float:
    from hpcvar.units import parse_byte_rate

    return parse_byte_rate(text, flag)


class _BW(click.ParamType):
    name = "bandwidth"

    def convert(self, value, param, ctx):
        if not isinstance(value, str):
            return value
        from hpcvar.cli.common import flag_name

        return _bandwidth(value, flag_name(param))


BANDWIDTH = _BW()


def _split(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


@click.command("app")
@click.argument("trace_file", metavar="APP.trace", type=click.Path())
@click.option("--from", "fmt", type=click.Choice(["auto", "parquet", "tit", "otf2", "native"]), default="auto",
              show_default=True, help="Trace format (auto: .txt/.tit = SimGrid TIT, .otf2 = OTF2, .parquet = "
                                      "parquet, what hpcvar trace writes; other names by content: Parquet's magic, "
                                      "else ASCII text = TIT; native is parquet's former name).")
@click.option("--flops-rate", type=FiniteFloat(0, min_open=True), default=None,
              help="TIT traces: flop/s that turn 'compute FLOPS' (and the FLOPS of reduce/allreduce) into seconds "
                   "(default: the cluster file's flops_rate, else 1e9).")
@click.option("--dialect", default="auto", show_default=True, help=DIALECT_HELP)
@click.option("--cluster", "cluster_file", type=click.Path(), default=None,
              help="Cluster file (nodes, cores_per_node, bandwidth, latency, shm_*, flops_rate, per-link "
                   "'link A B BW LAT').")
@click.option("--nodes", type=click.IntRange(1), default=None, help="Nodes (default: one per task).")
@click.option("--cores-per-node", type=click.IntRange(1), default=None, help="Cores per node (default 1).")
@click.option("--bandwidth", type=BANDWIDTH, default="1gbit", show_default=True,
              help="Inter-node link bandwidth with its unit: a tc rate (1gbit) or bytes per second (125MB/s).")
@click.option("--latency", type=DURATION, default="50us", show_default=True, help="Inter-node latency per message.")
@click.option("--shm-bandwidth", type=BANDWIDTH, default="5GB/s", show_default=True,
              help="Intra-node (shared-memory) bandwidth with its unit (5GB/s, 40gbit).")
@click.option("--shm-latency", type=DURATION, default="500ns", show_default=True, help="Intra-node latency.")
@click.option("--rndv-latency", type=DURATION, default="0s", show_default=True,
              help="Added to the latency of an inter-node message above --eager (the rendezvous handshake).")
@click.option("--shm-rndv-latency", type=DURATION, default="0s", show_default=True,
              help="Added to the latency of an intra-node message above --eager (handshake, single-copy set-up).")
@click.option("--send-buffer", type=SIZE, default="0", show_default=True,
              help="Bytes a transport holds when a send between nodes returns (a TCP socket's send buffer; "
                   "'buffered' in hpcvar bench latency): a send above --eager completes once at most this many of "
                   "its bytes are left to deliver. 0: with its transfer.")
@click.option("--rndv-first", type=SIZE, default="0", show_default=True,
              help="Bytes of a message above --eager between nodes sent with its request, before the receive is "
                   "posted (Open MPI's TCP transport sends its eager limit, 64KiB, with the rendezvous request).")
@click.option("--pair-messages", type=click.Choice(["serial", "shared"]), default="serial", show_default=True,
              help="Under a contention model, how one pair of tasks' messages between nodes share the network: "
                   "serial (one after the other, as a transport's connection carries them: a message's data waits "
                   "for the pair's previous one) or shared (each message a flow of its own beside the pair's "
                   "others, as SimGrid's SMPI does).")
@click.option("--mapping", default="rrn", show_default=True,
              help="Comma list of rrn (round-robin per node), rrp (fill a node first), random; several are compared.")
@click.option("--mapping-file", "mapping_files", multiple=True, type=click.Path(dir_okay=False),
              help="A mapping of its own: a file of 'TASK NODE' lines (repeatable), compared after the --mapping "
                   "ones.")
@click.option("--model", default="none", show_default=True,
              help="Comma list of network models: none, gige, myrinet, maxmin (several are compared).")
@click.option("--params", "params_file", type=click.Path(), default=None,
              help="Model parameters from 'hpcvar model fit' (used for the model it names).")
@click.option("--collectives", type=click.Choice(["binomial", "recdoub", "ring"]), default="binomial",
              show_default=True, help="Algorithm that decomposes collectives into messages (docs/replay.md).")
@click.option("--eager", type=SIZE, default="64KiB", show_default=True,
              help="Messages up to this size are sent eagerly (start at once, the send completes at once).")
@click.option("--jitter", "jitter_file", type=click.Path(), default=None,
              help="OS-jitter trace (two-column 'duration gap' cycles) applied to compute with jitSim semantics.")
@click.option("--jitter-freq", type=FREQ, default=None, help="Cycle frequency of the --jitter trace (2.4GHz).")
@click.option("--align", type=click.Choice(DRAWN_ALIGNMENTS), default=UNSYNC, show_default=True,
              help="Jitter alignment (jitSim): independent random offsets per task, one shared offset, or "
                   "co-scheduled windows (--window).")
@click.option("--window", type=DURATION, default=None,
              help="Co-scheduler window for --align cosched: every task starts its trace at a random window start.")
@click.option("--window-origin", type=DURATION, default=None,
              help="Start of one co-scheduler window in the jitter trace (default 0).")
@click.option("--replicas", type=click.IntRange(1), default=1, show_default=True,
              help="Replicas with seeds seed, seed+1, ... where randomness enters (random mapping, jitter).")
@click.option("--seed", type=int, default=1, show_default=True, help="Seed of the first replica.")
@click.option("--engine", type=click.Choice(["auto", "native", "python"]), default="auto", show_default=True,
              help="Replay engine: the C core (every model, jitter), the Python reference (with the Python TIT and "
                   "OTF2 importers), or auto (the core if built).")
@click.option("--chrome", "chrome_file", type=OUT_PATH, default=None,
              help="Write the first simulated timeline as Chrome/Perfetto JSON.")
@click.option("--plot", "plot_stem", type=OUT_PATH, default=None,
              help="Also write the per-task comparison figure (PNG+SVG) at this stem.")
@click.option("--compute", type=click.Choice(["wall", "cpu"]), default="wall", show_default=True,
              help="The compute between calls: wall (the measured gap, less the time in polls that found "
                   "nothing), or cpu (its thread CPU time, recorded by 'hpcvar trace --cpu-time': the work on a core "
                   "of its own, without the time the thread was descheduled).")
@click.option("--breakdown", is_flag=True,
              help="Also split the measured and predicted communication time of each task by MPI call kind and "
                   "by phase (table replay.breakdown; shown with the result, in 'runs show' and the report).")
@click.option("--phases", type=click.IntRange(1), default=None,
              help="With --breakdown: N equal slices of each task's measured span (default 1); a call belongs "
                   "to the slice where it starts (a count, no unit).")
@click.option("--stream/--no-stream", "stream", default=None,
              help="Replay a native Parquet trace without holding it in memory: its rows are read task by task and "
                   "its ops go to a temporary file in $TMPDIR (about 17 bytes per op) read back through a small "
                   "buffer per task; memory grows with the tasks and the distinct messages, not the trace's length, "
                   "and the results are the in-memory replay's. Without --chrome and --breakdown (they need every "
                   "row's time). Default: stream when the in-memory replay (about 85 bytes per event) would take "
                   "more than half of the available memory (a note says so); --no-stream never streams.")
@option("--plots/--no-plots", "plots", default=False, show_default=True,
        help="Draw the figures now (PNG and SVG in the run's plots/). By default none are drawn (they cost more "
             "than a small replay); 'hpcvar report' draws a run's missing figures when it needs them.")
@format_options(legacy=("fmt", ("auto", "parquet", "native", "tit", "otf2")))
@runs_dir_option
def cli(trace_file, fmt, flops_rate, dialect, cluster_file, nodes, cores_per_node, bandwidth, latency, shm_bandwidth,
        shm_latency, rndv_latency, shm_rndv_latency, send_buffer, rndv_first, pair_messages,
        mapping, mapping_files, model, params_file, collectives, eager, jitter_file, jitter_freq, align, window,
        window_origin,
        replicas, seed, engine, chrome_file, plot_stem, compute, breakdown, phases, stream, plots, as_json,
        runs_dir):
    """Replay APP.trace on a simulated cluster: predicted time per task and per event, communication
    time, conflicts met, average penalty, and E_abs against the measured trace, for each mapping x model.
    The run is stored (tables replay.runs, replay.tasks, replay.replicas, with --breakdown replay.breakdown;
    plots) like the other commands.

    The application simulator (cluster, mapping, sharing model) of Vienne, Martinasso, Vincent, Mehaut,
    Predictive models for bandwidth sharing in high performance clusters."""
    if engine != "python" and not cluster_file and stream is not True:  # the flop rate is known: parse meanwhile
        from hpcvar.traces import tit_prefetch

        tit_prefetch.start(trace_file, fmt, 1e9 if flops_rate is None else flops_rate, dialect)
    from hpcvar.kinds.sim_app.job import AppParams, job
    from hpcvar.results.context import JobContext

    names, files = _mappings(_split(mapping), mapping_files)
    p = AppParams(trace=trace_file, fmt=fmt, cluster_path=cluster_file, nodes=nodes, cores_per_node=cores_per_node,
                  bandwidth_bytes_per_s=bandwidth, latency_s=latency, shm_bandwidth_bytes_per_s=shm_bandwidth,
                  shm_latency_s=shm_latency, rndv_latency_s=rndv_latency, shm_rndv_latency_s=shm_rndv_latency,
                  send_buffer_bytes=send_buffer, rndv_first_bytes=rndv_first, pair_messages=pair_messages,
                  mappings=names, mapping_files=files,
                  models=tuple(_split(model)), params_path=params_file, collectives=collectives, eager_bytes=eager,
                  jitter_path=jitter_file, jitter_freq_hz=jitter_freq, align=align, window_s=window,
                  window_origin_s=window_origin, replicas=replicas, seed=seed, engine=engine, chrome_path=chrome_file,
                  plot_stem=plot_stem, plots=plots, breakdown=breakdown, phases=phases,
                  flops_per_s=flops_rate, dialect=dialect, compute=compute, stream=stream)
    # a progress bar on long replays, on stderr and only on a terminal (no terminal toolkit loaded otherwise)
    ctx = JobContext(runs_dir=runs_dir, argv=["hpcvar", *sys.argv[1:]],
                     console=stderr_console() if sys.stderr.isatty() else None, progress=not as_json)
    emit_run(job(p, ctx), as_json)


def _mappings(items: list[str], files: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(the mappings by name, the mapping files). An item of --mapping that names an existing file is taken as
    --mapping-file (the spelling of earlier versions), with a note on stderr."""
    from pathlib import Path

    from hpcvar.sim.replay import MAPPINGS

    names = [x for x in items if x in MAPPINGS or not Path(x).is_file()]
    old = [x for x in items if x not in names]
    for x in old:
        stderr_console().print(f"note: --mapping {x} names a file: give mapping files with --mapping-file "
                               "(--mapping takes names only in the future)", markup=False, highlight=False)
    return tuple(names), (*old, *files)
