"""hpcvar bench fanin."""

from __future__ import annotations

import click

from hpcvar.cli.common import (
    DURATION,
    FLOAT_LIST,
    INT_LIST,
    SIZE,
    bench_context,
    emit_run,
    launch_options,
    output_options,
)


@click.command("fanin")
@click.option("--servers", type=int, default=1, show_default=True,
              help="Roots (fan-in targets); client i sends to root i mod --servers (M-to-N when above 1).")
@click.option("--clients", type=INT_LIST, default="1,2", show_default=True,
              help="Large-buffer clients per point, a list to sweep (e.g. 1,2,4,8 or 1..16).")
@click.option("--chatter-ratio", type=FLOAT_LIST, default="4", show_default=True,
              help="Chatter (small-buffer) clients per large-buffer client; a list, e.g. 0,4 for without/with.")
@click.option("--chatter", type=INT_LIST, default=None,
              help="Chatter clients as counts (a list); replaces --chatter-ratio.")
@click.option("--large", type=SIZE, default="4MiB", show_default=True, help="Large-buffer message size.")
@click.option("--small", type=SIZE, default="4KiB", show_default=True, help="Chatter message size.")
@click.option("--duration", type=DURATION, default=None,
              help="Measured window per point (default 2s unless --messages is given).")
@click.option("--messages", type=int, default=None,
              help="Instead of --duration: messages per large-buffer client; the window ends with the last one.")
@click.option("--queues", default="single", show_default=True,
              help="Root receive queues: single (one queue for all messages), dual (large vs small/control); "
                   "a list sweeps.")
@click.option("--depth", default="deep", show_default=True,
              help="Posted receives per queue: deep (one per client) or a number such as 20; a list sweeps.")
@click.option("--match", "match_", default="any", show_default=True,
              help="Matching: any (MPI_ANY_SOURCE/ANY_TAG) or exact (specific source and tag); a list sweeps.")
@click.option("--bin", "bin_", type=DURATION, default=None,
              help="Bin of the root's receive-rate time series (default: window / 50, at least 1 ms).")
@click.option("--repeat", type=int, default=1, show_default=True,
              help="Relaunch the job this many times and report between-run vs within-run variance.")
@click.option("--placement", type=click.Choice(["fixed", "shuffle"]), default="fixed", show_default=True,
              help="Rank-to-role mapping per launch: fixed (servers, clients, chatter by rank) or a seeded shuffle.")
@click.option("--seed", type=click.IntRange(0), default=1, show_default=True,
              help="Seed of --placement shuffle (repetition r uses seed + r).")
@click.option("--max-samples", type=int, default=20000, show_default=True,
              help="Chatter round trips recorded per client and point (beyond, every 2nd, 4th, ... is kept).")
@click.option("--wait", default="auto", show_default=True,
              help="How ranks wait for MPI: spin (MPI's busy wait), yield, sleep or sleep:TIME (test, then sleep "
                   "TIME, with its unit: sleep:20us; default 50us). auto: spin, or sleep when ranks outnumber the "
                   "cores they share.")
@launch_options(default_np=None)
@output_options
def cli(servers, clients, chatter_ratio, chatter, large, small, duration, messages, queues, depth, match_, bin_,
        repeat, placement, seed, max_samples, wait, as_json, **kw):
    """Fan-in: large-buffer clients and chatter clients into one root.

    The "Reservation" benchmark of Jones & Settlemyer, Fan-In Communications On A Cray Gemini Interconnect.

    Ranks take roles by position: servers first, then large-buffer clients,
    then chatter clients; the rest idle (--np defaults to the largest point's
    need). Reports per point the aggregate large-buffer bandwidth at the root,
    the chatter bandwidth, the chatter round trip (request + root's ack),
    per-client bytes and Jain's index, and the root's receive rate over time.
    """
    from hpcvar.kinds.fanin.job import MATCHES, QUEUES, FaninParams, parse_choice_list, parse_depth_list, parse_wait

    if duration is None and messages is None:
        duration = 2.0
    params = FaninParams(
        servers=servers, clients=tuple(clients), chatter_ratio=tuple(chatter_ratio),
        chatter=None if chatter is None else tuple(chatter), large=large, small=small, duration_s=duration,
        messages=messages, queues=tuple(parse_choice_list(queues, QUEUES, "--queues")),
        depth=tuple(parse_depth_list(depth)), match=tuple(parse_choice_list(match_, MATCHES, "--match")),
        bin_s=bin_, repeat=repeat, placement=placement, seed=seed, max_samples=max_samples, wait=parse_wait(wait))
    from hpcvar.kinds.fanin.job import job

    emit_run(job(params, bench_context(kw)), as_json)
