"""hpcvar screen: screen an allocation, node by node and link by link, and answer "is it OK?"."""

from __future__ import annotations

import sys

import click

from hpcvar.cli.common import DURATION, SIZE, option, output_options


@click.command("screen")
@click.option("--launcher", type=click.Choice(["srun", "testbed", "template", "local"]), default="srun",
              show_default=True, help="srun: the nodes of the allocation (salloc/sbatch); testbed: the testbed's "
                                      "hosts; template: your own launcher (--template); local: this machine only.")
@click.option("--nodes", type=click.IntRange(1, 1 << 16), default=None,
              help="Nodes to screen (default: every node of the allocation or testbed).")
@click.option("--ranks-per-node", type=click.IntRange(1, 2), default=2, show_default=True,
              help="2: the second rank of each node measures the 8-byte latency inside it; 1: not measured.")
@click.option("--pairs", default="auto", show_default=True, metavar="all|ring|random:K",
              help="Pairs of nodes measured: all, ring (node i with i+1), or random:K (every node in K random "
                   "pairs or more); auto: all up to 64 nodes, random:4 above.")
@click.option("--seed", type=click.IntRange(0), default=1, show_default=True, help="Seed of --pairs random:K.")
@click.option("--rounds", type=click.IntRange(1, 100), default=3, show_default=True,
              help="Node measurement rounds: where nodes share CPUs (the testbed) they take turns within each, so "
                   "that a burst of load spreads over the nodes instead of hitting one.")
@click.option("--check", "check_s", type=DURATION, default="0.5s", show_default=True,
              help="Load check before measuring: what other processes use of the CPUs meanwhile (0: none).")
@click.option("--noise", "noise_s", type=DURATION, default="1s", show_default=True,
              help="OS noise recording per node and round (the spinning collector on every CPU; 0: none).")
@click.option("--kernel", "kernel_s", type=DURATION, default="0.5s", show_default=True,
              help="Compute kernel time per node and round, one pinned thread per CPU (0: none).")
@click.option("--quantum", type=DURATION, default="1ms", show_default=True,
              help="Length of one kernel call, calibrated on the first node; every node does the same work.")
@click.option("--timer-samples", type=click.IntRange(5), default=100, show_default=True,
              help="Clock cost samples (1000 back-to-back reads each) per node and round.")
@click.option("--shm-iters", type=click.IntRange(20), default=500, show_default=True,
              help="8-byte round trips inside a node per round.")
@click.option("--lat-iters", type=click.IntRange(20), default=200, show_default=True,
              help="8-byte round trips per pair of nodes.")
@click.option("--bw-size", type=SIZE, default="4MiB", show_default=True, help="Bandwidth message size.")
@click.option("--bw-iters", type=click.IntRange(3), default=5, show_default=True,
              help="Timed bandwidth messages per pair and direction.")
@click.option("--bw-warmup", type=click.IntRange(0), default=1, show_default=True,
              help="Untimed bandwidth messages per pair and direction.")
@click.option("--expect", "expect_file", type=click.Path(dir_okay=False), default=None, metavar="FILE",
              help="Site expectations (TOML, docs/screen.md): a value outside its bound is a finding.")
@click.option("--costs/--no-costs", default=True, show_default=True,
              help="Estimate what each outlier costs (jitSim for noise, a ring allreduce for links).")
@click.option("--srun-mpi", default="auto", show_default=True, metavar="PLUGIN", help="srun --mpi plugin.")
@click.option("--template", default=None, help="Launcher template for --launcher template ({np} {exe} {args} {rpn}).")
@click.option("--launcher-args", default="", help="Extra options for the launcher (split like a shell).")
@click.option("--timeout", type=DURATION, default=None, help="Stop the MPI job after this long.")
@click.option("--resume", default=None, metavar="RUN", help="Continue an interrupted screen (same parameters).")
@option("--timer", type=click.Choice(["tsc", "mono", "wtime"]), default=None, help="Clock of the timed loops.")
@output_options
def cli(launcher, nodes, ranks_per_node, pairs, seed, rounds, check_s, noise_s, kernel_s, quantum, timer_samples,
        shm_iters, lat_iters, bw_size, bw_iters, bw_warmup, expect_file, costs, srun_mpi, template, launcher_args,
        timeout, resume, timer, as_json, runs_dir):
    """Screen an allocation: which node, which link, is it OK?

    Per node (all at once, or in turns where nodes share CPUs): OS noise on every CPU, the compute kernel's
    speed, the cost of a clock read, the 8-byte latency inside the node. Per pair of nodes, in rounds of disjoint
    pairs: 8-byte latency and bandwidth both ways. Outliers by robust statistics, a slow link attributed to a node
    or a pair, what each costs, and the site's expectations (--expect). Prints one line first: OK, DEGRADED or
    UNRELIABLE, and exits with 0, 3 or 4 (docs/cli.md)."""
    import os

    from hpcvar.answer import Answer
    from hpcvar.cli.common import bench_context, emit_run
    from hpcvar.errors import UsageError, read_user_text
    from hpcvar.kinds.screen.job import ScreenParams, job

    kw = {"launcher": launcher, "map_by": "slot", "srun_mpi": srun_mpi, "template": template,
          "launcher_args": launcher_args, "np": 1, "timeout": timeout, "resume": resume,
          "ranks_per_node": ranks_per_node, "timer": timer, "runs_dir": runs_dir}
    ctx = bench_context(kw, ["hpcvar", *sys.argv[1:]])
    count = nodes or ctx.launcher.nodes()
    if not count:
        raise UsageError("cannot tell how many nodes to screen", "--nodes",
                         "Run inside an allocation (salloc -N 4), bring the testbed up, or give --nodes")
    text = read_user_text(expect_file, "Give an expectations file (docs/screen.md)") if expect_file else None
    if text is not None:
        from hpcvar import expect

        expect.parse(text, expect_file)  # its errors before anything is measured
    p = ScreenParams(nodes=count, ranks_per_node=ranks_per_node, pairs=pairs, seed=seed, rounds=rounds,
                     check_s=check_s, noise_s=noise_s, kernel_s=kernel_s, kernel_quantum_s=quantum,
                     timer_samples=timer_samples, timer_reads=1000, shm_iters=shm_iters, lat_iters=lat_iters,
                     lat_warmup=max(10, lat_iters // 10), bw_size_bytes=bw_size, bw_iters=bw_iters,
                     bw_warmup=bw_warmup, partition=os.environ.get("SLURM_JOB_PARTITION") or None,
                     expect_file=expect_file, expect_text=text, costs=costs)
    run = job(p, ctx)
    emit_run(run, as_json)
    return Answer.from_json((run.info.get("result") or {}).get("answer") or {}).exit_code
