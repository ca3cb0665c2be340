"""hpcvar bench sharing."""

from __future__ import annotations

import click

from hpcvar.cli.common import SIZE, bench_context, emit_run, launch_options, option, output_options
from hpcvar.models.scheme import load_scheme


@click.command("sharing")
@click.argument("scheme")
@click.option("--size", type=SIZE, default="20MiB", show_default=True,
              help="Bytes per communication (a size in the scheme overrides it).")
@option("--repeat", "reps", type=click.IntRange(1), default=5, show_default=True, aliases=("--reps",),
        help="Measured repetitions (each: the reference alone, then all communications at once).")
@click.option("--warmup", type=click.IntRange(0), default=1, show_default=True,
              help="Unmeasured repetitions first (cache and connection warm-up).")
@launch_options(default_np=None)
@output_options
def cli(scheme, size, reps, warmup, as_json, **kw):
    """Penalties of concurrent communications: the table of Figure 2 of Vienne et al. for this machine.

    Vienne, Martinasso, Vincent, Mehaut, Predictive models for bandwidth sharing in high performance
    clusters. SCHEME is a scheme file (examples/schemes/) or inline text such as 'a: 0->1; b: 0->2'.
    T_ref is communication a alone; then every communication sends --size bytes at once with a
    blocking MPI_Send timed at its source (receivers use MPI_ANY_SOURCE); penalty = T / T_ref.
    One rank per communication end: --np defaults to that count locally; on the testbed each
    scheme node is a host (--np and --ranks-per-node default to fit the busiest node).
    """
    from hpcvar.kinds.sharing.job import SharingParams, job

    sch = load_scheme(scheme)
    emit_run(job(SharingParams(scheme=sch, size=size, reps=reps, warmup=warmup), bench_context(kw)), as_json)
