"""Every kind of run in one table: where its job and its views live.

A kind is named by the command recorded in a run's ``run.json`` (``"bench latency"``) and lives in one folder,
``src/hpcvar/kinds/<folder>/``: ``job.py`` holds its frozen Params (hpcvar.results.params) and the job,
``views.py`` what shows a stored run. Its entry here names those functions; they are resolved only when used
(the command line starts fast), and this table is how they meet: a job never imports its views (it draws its
figures through ``draw_plots``), and the command line, ``hpcvar runs show``, ``hpcvar report`` and ``hpcvar
compare`` find a run's views from its command.

- ``job`` (in job.py): ``job(params, ctx) -> Run``: takes its Params subclass and a
  hpcvar.results.context.JobContext (``hpcvar.bench.runner.BenchContext`` for MPI kinds), creates or resumes
  the run, works inside ``hpcvar.results.store.run_lifecycle``, leaves its JSON result in
  ``run.info["result"]`` (built from the run's declared tables) and its warnings in the run (``run.warn``);
- ``render`` (in views.py): the terminal view of a stored run, ``(console, run) -> None``, reading
  ``run.info["result"]`` and the run's tables. ``hpcvar.report.terminal.render_run`` calls it and then says
  what every view says: the run's warnings, its figures and where it is stored;
- ``section``: the HTML/Markdown report section, ``(run) -> Section`` (hpcvar.report.sections);
- ``metrics``: what ``hpcvar compare`` tests, ``(run) -> list[Metric]`` (raw samples);
- ``plots``: the figures stored with the run, ``(run) -> list[Path]``, drawn into ``run.plots_dir()``; the job
  calls them through ``draw_plots(run)`` before its run ends;
- ``cli``, ``cli_help``: for ``bench`` kinds, the click command as ``"module:attribute"`` relative to the
  command-line package (``"bench_latency:cli"``), which only that package resolves (the library never imports
  the command line, not even through this table), and its one-line help;
- ``summary``: the main table(s) (declared in hpcvar.results.schema): what ``--format csv|md`` prints.

Each of ``job``, ``render``, ``section``, ``metrics`` and ``plots`` is the name of a function of the kind's
module (job.py for ``job``, views.py for the others; the defaults are those names) or None when the kind has
no such view. Adding a kind: its folder, then one entry here (docs/developing.md shows one).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hpcvar.errors import HpcvarError

if TYPE_CHECKING:
    from hpcvar.results.store import Run

PACKAGE = "hpcvar.kinds"
VIEWS = ("render", "section", "metrics", "plots")


@dataclass(frozen=True)
class Kind:
    command: str
    title: str
    folder: str = ""  # src/hpcvar/kinds/<folder>/: job.py and views.py
    job: str | None = "job"
    render: str | None = "render"
    section: str | None = "section"
    metrics: str | None = "metrics"
    plots: str | None = "plots"
    cli: str | None = None
    cli_help: str = ""
    # the main summary table(s) (declared in hpcvar.results.schema): what --format csv/md prints of a run
    summary: tuple[str, ...] = ()

    def ref(self, name: str) -> str | None:
        """``"module:function"`` of ``job`` or a view, or None when the kind has none."""
        fn = getattr(self, name)
        return f"{PACKAGE}.{self.folder}.{'job' if name == 'job' else 'views'}:{fn}" if fn else None

    def view(self, name: str) -> Callable[..., Any] | None:
        """The function of ``job`` or of a view (``render``, ``section``, ``metrics``, ``plots``; not ``cli``),
        or None."""
        return resolve(self.ref(name))


def resolve(ref: str | None) -> Callable[..., Any] | None:
    if not ref:
        return None
    module, _, attr = ref.partition(":")
    try:
        fn: Callable[..., Any] = getattr(importlib.import_module(module), attr)
        return fn
    except (ImportError, AttributeError) as e:  # a broken table entry is a defect of hpcvar, named as such
        raise HpcvarError(f"the kind table names '{ref}', which does not exist: {e}", None,
                          "This is a bug in hpcvar; please report it") from None


KINDS: dict[str, Kind] = {k.command: k for k in [
    Kind("bench latency", "Ping-pong latency and bandwidth", "latency",
         cli="bench_latency:cli", cli_help="Ping-pong latency and bandwidth between ranks 0 and 1.",
         summary=("latency.summary",)),
    Kind("bench queues posted", "Latency against the posted-receive queue", "queues",
         job="posted", render="render_posted", section="posted_section", metrics="posted_metrics",
         plots="posted_plots", cli="bench_queues:cli", summary=("queues_posted.summary", "queues_posted.fit"),
         cli_help="Latency under long MPI queues: posted receives and unexpected messages."),
    Kind("bench queues unexpected", "Latency against the unexpected-message queue", "queues",
         job="unexpected", render="render_unexpected", section="unexpected_section", metrics="unexpected_metrics",
         plots="unexpected_plots", cli="bench_queues:cli", summary=("queues_unexpected.summary",),
         cli_help="Latency under long MPI queues: posted receives and unexpected messages."),
    Kind("bench ace", "ACE: emulated applications", "ace", cli="bench_ace:cli", summary=("ace.summary",),
         cli_help="Emulate applications: cycles of busy-wait compute and communication, predicted vs measured."),
    Kind("bench sharing", "Bandwidth-sharing penalties", "sharing", cli="bench_sharing:cli",
         summary=("sharing.summary",),
         cli_help="Penalties of concurrent communications: the table of Figure 2 of Vienne et al. for this machine."),
    Kind("bench fanin", "Fan-in", "fanin", cli="bench_fanin:cli", summary=("fanin.points",),
         cli_help="Fan-in: large-buffer clients and chatter clients into one root."),
    Kind("bench bsp", "Bulk-synchronous phases", "bsp", cli="bench_bsp:cli", summary=("bsp.reps",),
         cli_help="Bulk-synchronous phases: fixed CPU work, then a barrier, on every rank."),
    Kind("screen", "Screen: which node, which link", "screen",
         summary=("screen.findings", "screen.node_metrics", "screen.link_metrics")),
    Kind("noise record", "OS jitter recording", "noise_record", summary=("noise.summary",)),
    Kind("sim jitter", "jitSim prediction", "sim_jitter", metrics=None, summary=("jitter.points",)),
    Kind("sim app", "Application replay", "sim_app", metrics=None, summary=("replay.runs",)),
]}


def kind_of(command: str | None) -> Kind | None:
    return KINDS.get(command or "")


def draw_plots(run: Run) -> list[str]:
    """The figures of ``run`` drawn by its kind's ``plots`` view (into ``run.plots_dir()``), as paths: what a
    job calls, before its run ends, instead of importing its views."""
    kind = kind_of(run.info.get("command"))
    fn = kind.view("plots") if kind else None
    return [str(p) for p in fn(run)] if fn else []


def bench_commands() -> dict[str, tuple[str, str]]:
    """``hpcvar bench`` subcommands: name -> (click command reference relative to the command-line package,
    one-line help), from the bench kinds."""
    out: dict[str, tuple[str, str]] = {}
    for k in KINDS.values():
        if k.cli and k.command.startswith("bench "):
            out.setdefault(k.command.split()[1], (k.cli, k.cli_help))
    return out
