"""What a job needs besides its parameters: where to store its run, how it was asked for, where to speak.

Every kind's job is ``job(params, ctx) -> Run`` (hpcvar.results.kinds): ``params`` a frozen
``hpcvar.results.params.Params`` subclass, ``ctx`` a ``JobContext``, or for the kinds that launch MPI
programs ``hpcvar.bench.runner.BenchContext`` (a JobContext plus the launcher, the ranks and the limits).
The command line builds the context from its flags; ``hpcvar characterize`` builds one per step (its runs
directory is the characterization's ``steps/``).

A job speaks only through ``ctx.say`` (progress messages on stderr) and a progress bar when
``ctx.show_progress()``; what the user must know about the result is a warning kept in the run
(``run.warn``), printed once with the run's view (hpcvar.report.terminal.render_run).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hpcvar.results.store import Run

if TYPE_CHECKING:
    from rich.console import Console

    from hpcvar.results.params import Params


@dataclass(kw_only=True)
class JobContext:
    """Where a job stores its run (``runs_dir``: None is $HPCVAR_RUNS or ./hpcvar-runs), the command line
    recorded in it (``argv``), and the console on stderr for progress (None: silent)."""

    runs_dir: str | None = None
    argv: list[str] | None = None
    console: Console | None = None
    progress: bool = True

    def say(self, text: str) -> None:
        """A progress message on stderr ("recording 10 s on CPU 0,1 into ...")."""
        if self.console is not None:
            self.console.print(text, markup=False, highlight=False)

    def show_progress(self) -> bool:
        """Whether to draw a progress bar: asked for, and stderr is a terminal (never into a pipe or a log)."""
        return bool(self.progress and self.console is not None and getattr(self.console, "is_terminal", False))

    def create_run(self, command: str, params: Params, metadata: dict[str, Any] | None = None) -> Run:
        """A new run of ``command`` (``"bench latency"``) storing ``params.to_json()``, status ``running``;
        the job then works inside ``with run_lifecycle(run):``."""
        return Run.create(command, params.to_json(), self.runs_dir, self.argv, metadata)


__all__ = ["JobContext"]
