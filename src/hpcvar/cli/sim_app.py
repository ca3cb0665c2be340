"""hpcvar sim app: replay an event trace on a simulated cluster (mappings x network models)."""

from __future__ import annotations

import sys

import click

from hpcvar.cli.common import (
    DIALECT_HELP,
    DURATION,
    OUT_PATH,
    SIZE,
    emit_run,
    format_options,
    option,
    runs_dir_option,
)


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
@click.option("--from", "fmt", type=click.Choice(["auto", "native", "tit", "otf2"]), default="auto",
              show_default=True, help="Trace format (auto: by extension; .txt/.tit = SimGrid TIT, .otf2 = OTF2).")
@click.option("--flops-rate", type=float, default=None,
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
@click.option("--mapping", default="rrn", show_default=True,
              help="Comma list of rrn (round-robin per node), rrp (fill a node first), random, or a file of "
                   "'TASK NODE' lines; several are compared.")
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
@click.option("--jitter-freq", type=float, default=None, help="Cycle frequency (Hz) of the --jitter trace.")
@click.option("--align", type=click.Choice(["unsync", "sync", "cosched"]), default="unsync", show_default=True,
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
              help="Also write the per-task comparison figure (PNG+SVG) at this stem (the run's plots/ always "
                   "gets it).")
@click.option("--breakdown", is_flag=True,
              help="Also split the measured and predicted communication time of each task by MPI call kind and "
                   "by phase (table replay.breakdown; shown with the result, in 'runs show' and the report).")
@click.option("--phases", type=click.IntRange(1), default=None,
              help="With --breakdown: N equal slices of each task's measured span (default 1); a call belongs "
                   "to the slice where it starts (a count, no unit).")
@option("--plots/--no-plots", "plots", default=True, show_default=True, help="Draw the plots.")
@format_options(legacy=("fmt", ("auto", "native", "tit", "otf2")))
@runs_dir_option
def cli(trace_file, fmt, flops_rate, dialect, cluster_file, nodes, cores_per_node, bandwidth, latency, shm_bandwidth,
        shm_latency, rndv_latency, shm_rndv_latency, send_buffer, rndv_first,
        mapping, model, params_file, collectives, eager, jitter_file, jitter_freq, align, window, window_origin,
        replicas, seed, engine, chrome_file, plot_stem, breakdown, phases, plots, as_json, runs_dir):
    """Replay APP.trace on a simulated cluster: predicted time per task and per event, communication
    time, conflicts met, average penalty, and E_abs against the measured trace, for each mapping x model.
    The run is stored (tables replay.runs, replay.tasks, replay.replicas, with --breakdown replay.breakdown;
    plots) like the other commands.

    The application simulator (cluster, mapping, sharing model) of Vienne, Martinasso, Vincent, Mehaut,
    Predictive models for bandwidth sharing in high performance clusters."""
    from hpcvar.kinds.sim_app.job import Params, run_job

    p = Params(trace=trace_file, fmt=fmt, cluster_file=cluster_file, nodes=nodes, cores_per_node=cores_per_node,
               bandwidth=bandwidth, latency=latency, shm_bandwidth=shm_bandwidth, shm_latency=shm_latency,
               rndv_latency=rndv_latency, shm_rndv_latency=shm_rndv_latency, send_buffer=send_buffer,
               rndv_first=rndv_first, mappings=tuple(_split(mapping)), models=tuple(_split(model)),
               params_file=params_file,
               collectives=collectives, eager=eager, jitter_file=jitter_file, jitter_freq=jitter_freq, align=align,
               window=window, window_origin=window_origin, replicas=replicas, seed=seed, engine=engine,
               chrome_file=chrome_file, plot_stem=plot_stem, no_plots=not plots, breakdown=breakdown, phases=phases,
               flops_rate=flops_rate, dialect=dialect)
    # a progress bar on long replays, on stderr and only on a terminal: never inside --json output
    run, out = run_job(p, runs_dir, ["hpcvar", *sys.argv[1:]], show_progress=None if not as_json else False)
    emit_run(run, as_json)
