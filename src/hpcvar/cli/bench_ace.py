"""hpcvar bench ace: the application communication emulator (Evans & Hood, Network Performance Variability in NOW
Clusters, section 4)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from hpcvar.cli.common import FLOAT_LIST, SIZE_LIST, bench_context, emit, emit_run, launch_options, output_options
from hpcvar.errors import UsageError

if TYPE_CHECKING:
    from hpcvar.kinds.ace.job import AceParams


@click.command("ace")
@click.option("--ea", "ea_texts", multiple=True, metavar="KEY=VALUE,...",
              help="An emulated application (repeatable), e.g. 'pattern=pairs,mode=blocking,size=1MiB,load=20,"
                   "cycles=1000' plus optional ranks=N|0.5, name=, alpha=75.9us, beta=0.01057us/B (skip phase 1; "
                   "alpha and beta take their unit), "
                   "dims=4x2, periodic=yes, bench_sizes=0:512KiB:1MiB. Patterns: pairs, ring, cart2d, cart3d, "
                   "alltoall, allreduce, bcast.")
@click.option("--config", type=click.Path(dir_okay=False), default=None,
              help="TOML file with one [[ea]] table per EA (keys as in --ea); added after the --ea ones.")
@click.option("--loads", type=FLOAT_LIST, default=None,
              help="Sweep the communication load (percent, 1..100), e.g. 10..80:10; replaces each EA's load.")
@click.option("--sizes", type=SIZE_LIST, default=None,
              help="Sweep the message size, e.g. 1KiB,1MiB; replaces each EA's size.")
@click.option("--repeat", type=click.IntRange(1, 1000), default=1, show_default=True,
              help="Repeat every sweep point this many times (run-to-run variability).")
@click.option("--bench-iters", type=click.IntRange(1, 1000000), default=20, show_default=True,
              help="Phase 1: timed exchanges per benchmark size and process.")
@click.option("--bench-warmup", type=click.IntRange(0, 1000000), default=5, show_default=True,
              help="Phase 1: unmeasured exchanges per benchmark size.")
@click.option("--predict-only", is_flag=True,
              help="Print the prediction (T_comm, T_comp, T_run) from the EAs' alpha and beta; launch nothing.")
@launch_options(default_np=2)
@output_options
def cli(ea_texts, config, loads, sizes, repeat, bench_iters, bench_warmup, predict_only, as_json, **kw):
    """Emulate applications: cycles of busy-wait compute and communication, predicted vs measured.

    The Application Communication Emulator of Evans & Hood, Network Performance Variability in NOW Clusters.

    Per EA and sweep point: phase 1 fits alpha and beta (per message, least squares, averaged over
    the EA's processes) unless both are given; then T_comm = m (alpha + beta n) per cycle (m: the
    pattern's messages per cycle, docs/ace.md), T_comp = T_comm 100 / L - T_comm (eq. 6) and the
    predicted run time c (T_comp + T_comm) (eq. 4) are compared with the measured run time. Every
    cycle's compute, communication and barrier times are stored; each sweep point is one launch.
    """
    from hpcvar.kinds.ace import job as ace  # lazily: pandas and scipy stay out of CLI start-up

    specs = [ace.parse_ea(t) for t in ea_texts]
    if config:
        specs += ace.load_config(config)
    if not specs:
        raise UsageError("no emulated application", "--ea", "Give --ea pattern=pairs,size=1MiB,load=20 or --config")
    if loads:
        loads = [int(x) if float(x) == int(x) else float(x) for x in loads]
        bad = [x for x in loads if not 1 <= x <= 100]
        if bad:
            raise UsageError(f"load {bad[0]:g}% is outside 1..100", "--loads", "Give loads in percent, 1 to 100")
    params = ace.AceParams(eas=tuple(specs), np=kw["np"], loads=tuple(loads) if loads else None,
                           sizes=tuple(sizes) if sizes else None, repeat=repeat, bench_iters=bench_iters,
                           bench_warmup=bench_warmup)
    if predict_only:
        from hpcvar.kinds.ace.views import render_ace_result

        emit(predict(params), as_json, render_ace_result)
        return
    emit_run(ace.job(params, bench_context(kw)), as_json)


def predict(params: AceParams) -> dict:
    """Predictions for every EA at every sweep point, from the given alpha and beta."""
    from hpcvar.kinds.ace import job as ace

    out = []
    for point in ace.sweep_points(params):
        if point["repeat"]:
            continue
        for e in ace.eas_at(params, point):
            if e.spec.alpha_s is None:
                raise UsageError(f"EA {e.spec.name} has no alpha and beta to predict from", e.spec.where,
                                 "Add alpha=75.9us,beta=0.01057us/B (or run without --predict-only to measure them)")
            d = ace.predict_ea(e)
            d["point"] = point["point"]
            out.append(d)
    return {"benchmark": "ace", "predict_only": True, "eas": out}
