"""hpcvar bench latency."""

from __future__ import annotations

import click

from hpcvar.cli.common import DURATION, SIZE_LIST, bench_context, emit_run, launch_options, output_options


@click.command("latency")
@click.option("--sizes", type=SIZE_LIST, default="0,1..4MiB", show_default=True,
              help="Message sizes in bytes (units: KiB, MiB; ranges: 8..1MiB doubles). The default is the "
                   "osu_latency sweep: 0, then every power of two up to 4 MiB.")
@click.option("--iters", type=click.IntRange(1), default=1000, show_default=True,
              help="Maximum measured round trips per size.")
@click.option("--min-iters", type=click.IntRange(1), default=10, show_default=True,
              help="Minimum measured round trips per size, whatever --time-per-size says.")
@click.option("--warmup", type=click.IntRange(0), default=100, show_default=True,
              help="Unmeasured round trips per size before measuring.")
@click.option("--time-per-size", type=DURATION, default="1s", show_default=True,
              help="Time budget per size (e.g. 500ms): fewer than --iters round trips when they would take longer.")
@launch_options(default_np=2)
@output_options
def cli(sizes, iters, min_iters, warmup, time_per_size, as_json, **kw):
    """Ping-pong latency and bandwidth between ranks 0 and 1.

    Reports one-way latency (round trip / 2) in ns: median with its 95% CI,
    p99, p99.9, and bandwidth = size / one-way median in bytes/s. Every round
    trip is stored.
    """
    from hpcvar.kinds.latency.job import LatencyParams, job

    params = LatencyParams(sizes=tuple(sizes), iters=iters, min_iters=min_iters, warmup=warmup,
                           time_per_size_s=time_per_size)
    emit_run(job(params, bench_context(kw)), as_json)
