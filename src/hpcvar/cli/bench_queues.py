"""hpcvar bench queues posted|unexpected (docs/queues.md)."""

from __future__ import annotations

import click

from hpcvar import units
from hpcvar.cli.common import DURATION, SIZE_LIST, _UnitType, bench_context, emit_run, launch_options, output_options
from hpcvar.errors import UsageError
from hpcvar.kinds.queues import FIT_STAT_NAMES, MAX_POSTED_LENGTH, MAX_UNEXPECTED_LENGTH


def _signed_int(text: str, flag: str) -> int:
    """An integer, negative ones included: the benchmark's validation states the allowed range."""
    try:
        return int(text.strip())
    except ValueError:
        raise UsageError(f"'{text}' is not an integer", flag, "Give whole numbers such as 0,100,1000") from None


SIGNED_INT_LIST = _UnitType(lambda v, f: units.parse_list(v, lambda x: _signed_int(x, f), f), "integers")


def _common(f):
    opts = [
        click.option("--iters", type=click.IntRange(1), default=1000, show_default=True,
                     help="Maximum measured iterations per point (the inner loop of Underwood & Brightwell, The Impact "
                          "of MPI Queue Usage on Message Latency: 1000); every one is kept."),
        click.option("--min-iters", type=click.IntRange(1), default=20, show_default=True,
                     help="Minimum measured iterations per point, whatever --time-per-point says."),
        click.option("--warmup", type=click.IntRange(0), default=10, show_default=True,
                     help="Unmeasured iterations per point before measuring."),
        click.option("--time-per-point", type=DURATION, default="1s", show_default=True,
                     help="Time budget per point (e.g. 300ms): fewer than --iters iterations when they would "
                          "take longer (each iteration also fills and clears the queue)."),
        click.option("--pin/--no-pin", default=True, show_default=True,
                     help="Pin rank r to the (r mod n)-th of the n CPUs it may use, so that the ping-pong ranks "
                          "never share a core."),
        click.option("--fit-stat", type=click.Choice(sorted(FIT_STAT_NAMES)), default="median", show_default=True,
                     help="Per-point statistic the per-entry slope is fitted on; p10 or min resist a busy host "
                          "(ranks descheduled in many round trips)."),
    ]
    for o in reversed(opts):
        f = o(f)
    return f


@click.group("queues")
def cli() -> None:
    """Latency under long MPI queues: posted receives and unexpected messages.

    Ping-pong latency as applications pay it when the MPI must search its
    matching queues (Underwood & Brightwell, The Impact of MPI Queue Usage on
    Message Latency, Figures 1 and 2). Reports
    one-way latency (round trip / 2) per point, and the cost per queue entry
    (least-squares slope with a 95% CI) against the length-0 baseline.
    """


@cli.command("posted")
@click.option("--lengths", type=SIGNED_INT_LIST, default="0,10,100,1000", show_default=True,
              help=f"Posted-queue lengths: extra receives posted on each rank (0..{MAX_POSTED_LENGTH}; "
                   "ranges: 0..1000:250).")
@click.option("--traversed", type=SIGNED_INT_LIST, default="0,50,100", show_default=True,
              help="Percent of the queue posted in front of the matching receive (0..100).")
@click.option("--sizes", type=SIZE_LIST, default="8", show_default=True,
              help="Message sizes in bytes (units: KiB, MiB). Each extra receive gets its own buffer of this size.")
@click.option("--any-source", is_flag=True,
              help="Post every receive with MPI_ANY_SOURCE (the wildcard that defeats matching hashed by source).")
@_common
@launch_options(default_np=2)
@output_options
def posted(lengths, traversed, sizes, any_source, iters, min_iters, warmup, time_per_point, pin, fit_stat,
           as_json, **kw):
    """Latency with a long posted-receive queue (Figure 1 of Underwood & Brightwell).

    After Underwood & Brightwell, The Impact of MPI Queue Usage on Message Latency, Figure 1.

    Per point and iteration, on both ranks: post the receives that will be
    traversed (non-matching tags), the matching receive, the rest of the
    queue; a two-message sync in which rank 1 leaves first; time one
    ping-pong; clear the extra receives with zero-byte messages.
    """
    ctx = bench_context(kw)
    from hpcvar.kinds.queues import job

    params = job.PostedParams(lengths=tuple(lengths), traversed=tuple(traversed), sizes=tuple(sizes),
                              any_source=any_source, iters=iters, min_iters=min_iters, warmup=warmup,
                              time_per_point_s=time_per_point, pin=pin, fit_stat=fit_stat)
    emit_run(job.posted(params, ctx), as_json)


@cli.command("unexpected")
@click.option("--lengths", type=SIGNED_INT_LIST, default="0,10,100,1000", show_default=True,
              help=f"Unexpected-queue lengths: messages waiting at each rank (0..{MAX_UNEXPECTED_LENGTH}).")
@click.option("--sizes", type=SIZE_LIST, default="8", show_default=True,
              help="Message sizes in bytes of the timed ping-pong (the unexpected messages are empty).")
@_common
@launch_options(default_np=2)
@output_options
def unexpected(lengths, sizes, iters, min_iters, warmup, time_per_point, pin, fit_stat, as_json, **kw):
    """Latency with a long unexpected-message queue (Figure 2 of Underwood & Brightwell).

    After Underwood & Brightwell, The Impact of MPI Queue Usage on Message Latency, Figure 2.

    Per point and iteration: both ranks send the unexpected messages; sync
    (rank 1 leaves first); rank 0 times Isend(ping) + Irecv(pong) + Waitall,
    so the receive post (its search of the unexpected queue) is measured;
    then the unexpected messages are received.
    """
    ctx = bench_context(kw)
    from hpcvar.kinds.queues import job

    params = job.UnexpectedParams(lengths=tuple(lengths), sizes=tuple(sizes), iters=iters, min_iters=min_iters,
                                  warmup=warmup, time_per_point_s=time_per_point, pin=pin, fit_stat=fit_stat)
    emit_run(job.unexpected(params, ctx), as_json)
