"""The benchmark commands as library jobs: ``(params, BenchContext) -> (Run, result)``.

Each job is what ``hpcvar bench <name>`` does between parsing its flags and printing: run (or resume) the
benchmark through ``run_benchmark`` and draw the figures stored with the run. The CLI modules turn flags into
the benchmark's typed ``Params`` (``LatencyParams``, ``FaninParams``, ... in each benchmark's module) and
render the result; ``hpcvar characterize`` calls the same jobs and gets the Run back as a value (its launcher,
node list and warnings included), instead of re-entering the command line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hpcvar.bench.runner import BenchContext, run_benchmark
from hpcvar.results import Run

if TYPE_CHECKING:
    from hpcvar.kinds.bsp.job import BspParams


def bsp(params: BspParams, ctx: BenchContext) -> tuple[Run, dict]:
    """``params.work_iters`` and ``params.baseline`` as the CLI sets them (``bench.bsp.load_baseline``)."""
    from hpcvar.kinds.bsp.job import Bsp
    from hpcvar.kinds.bsp.views import plot_bsp

    def plots(run: Run, result: dict) -> None:
        result["plots"] = [str(p) for p in plot_bsp(run, run.read_table("bsp.phases"), result)]

    return run_benchmark(Bsp(), params, ctx, after=plots)
