"""Every kind of run in one table: what stores it and where each view of it lives.

A kind is named by the command recorded in a run's ``run.json`` (``"bench latency"``). Its entry says,
as ``"module:function"`` references resolved only when used (so that the command line starts fast and no
view imports another kind's code):

- ``job``: the library job that makes and stores the run and returns it with its JSON result (bench kinds:
  ``(params, BenchContext) -> (Run, result)``; the others take their own parameters). The command line and
  ``hpcvar characterize`` call it; it ends the run through ``hpcvar.results.store.run_lifecycle``;
- ``render``: the terminal renderer of a stored run (``(console, run) -> None``, reading ``run.info["result"]``
  and the run's tables): the command prints its run through it once the run is stored, and ``hpcvar runs show``
  ends with it (``hpcvar.report.terminal.render_run``), so both show the same view;
- ``section``: the HTML/Markdown report section built from the stored run (``(run) -> Section``);
- ``metrics``: what ``hpcvar compare`` tests, from the stored run (``(run) -> list[Metric]``);
- ``cli``: for ``bench`` kinds, the click command as ``"module:attribute"`` relative to the command-line
  package (``"bench_latency:cli"``: the ``cli`` of its module ``bench_latency``), which only that package
  resolves (its ``bench`` group), and its one-line help (``hpcvar bench <name>``). The library never imports
  the command line, not even through this table.

Adding a kind: write its module(s), then add one entry here (docs/developing.md shows one).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hpcvar.errors import HpcvarError


@dataclass(frozen=True)
class Kind:
    command: str
    title: str
    job: str | None = None
    render: str | None = None
    section: str | None = None
    metrics: str | None = None
    cli: str | None = None
    cli_help: str = ""
    # the main summary table(s) (declared in hpcvar.results.schema): what --format csv/md prints of a run
    summary: tuple[str, ...] = ()

    def view(self, name: str) -> Callable[..., Any] | None:
        """The function of one view (``job``, ``render``, ``section`` or ``metrics``; not ``cli``), or None."""
        return resolve(getattr(self, name))


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


_R = "hpcvar.report"
KINDS: dict[str, Kind] = {k.command: k for k in [
    Kind("bench latency", "Ping-pong latency and bandwidth",
         job="hpcvar.bench.jobs:latency", render=f"{_R}.terminal:render_latency",
         section=f"{_R}.sec_latency:latency_section", metrics=f"{_R}.sec_latency:latency_metrics",
         cli="bench_latency:cli", cli_help="Ping-pong latency and bandwidth between ranks 0 and 1.",
         summary=("latency.summary",)),
    Kind("bench queues posted", "Latency against the posted-receive queue",
         job="hpcvar.bench.jobs:queues_posted", render=f"{_R}.sec_queues:render_queues_posted",
         section=f"{_R}.sec_queues:posted_section", metrics=f"{_R}.metrics:queues_posted_metrics",
         cli="bench_queues:cli", summary=("queues_posted.summary", "queues_posted.fit"),
         cli_help="Latency under long MPI queues: posted receives and unexpected messages."),
    Kind("bench queues unexpected", "Latency against the unexpected-message queue",
         job="hpcvar.bench.jobs:queues_unexpected", render=f"{_R}.sec_queues:render_queues_unexpected",
         section=f"{_R}.sec_queues:unexpected_section", metrics=f"{_R}.metrics:queues_unexpected_metrics",
         cli="bench_queues:cli", summary=("queues_unexpected.summary",),
         cli_help="Latency under long MPI queues: posted receives and unexpected messages."),
    Kind("bench ace", "ACE: emulated applications",
         job="hpcvar.bench.jobs:ace", render=f"{_R}.sec_ace:render_ace", section=f"{_R}.sec_ace:ace_section",
         metrics=f"{_R}.metrics:ace_metrics", cli="bench_ace:cli", summary=("ace.summary",),
         cli_help="Emulate applications: cycles of busy-wait compute and communication, predicted vs measured."),
    Kind("bench sharing", "Bandwidth-sharing penalties",
         job="hpcvar.bench.jobs:sharing", render=f"{_R}.sharing_render:render_sharing",
         section=f"{_R}.sec_sharing:sharing_section", metrics=f"{_R}.metrics:sharing_metrics",
         cli="bench_sharing:cli", summary=("sharing.summary",),
         cli_help="Penalties of concurrent communications: the table of Figure 2 of Vienne et al. for this machine."),
    Kind("bench fanin", "Fan-in",
         job="hpcvar.bench.jobs:fanin", render=f"{_R}.fanin:render_fanin", section=f"{_R}.fanin:fanin_section",
         metrics=f"{_R}.metrics:fanin_metrics", cli="bench_fanin:cli", summary=("fanin.points",),
         cli_help="Fan-in: large-buffer clients and chatter clients into one root."),
    Kind("bench bsp", "Bulk-synchronous phases",
         job="hpcvar.bench.jobs:bsp", render=f"{_R}.bsp:render_bsp", section=f"{_R}.bsp:bsp_section",
         metrics=f"{_R}.metrics:bsp_metrics", cli="bench_bsp:cli", summary=("bsp.reps",),
         cli_help="Bulk-synchronous phases: fixed CPU work, then a barrier, on every rank."),
    Kind("noise record", "OS jitter recording", job="hpcvar.noise.jobs:record",
         render="hpcvar.noise.render:render_noise", section="hpcvar.noise.render:noise_section",
         metrics=f"{_R}.metrics:noise_metrics", summary=("noise.summary",)),
    Kind("sim jitter", "jitSim prediction", job="hpcvar.sim.jitter_job:run_job",
         render="hpcvar.sim.jitter_report:render_jitter", section="hpcvar.sim.jitter_report:jitter_section",
         summary=("jitter.points",)),
    Kind("sim app", "Application replay", job="hpcvar.sim.app_job:run_job",
         render="hpcvar.sim.app_report:render_app", section="hpcvar.sim.app_report:app_section",
         summary=("replay.runs",)),
]}


def kind_of(command: str | None) -> Kind | None:
    return KINDS.get(command or "")


def bench_commands() -> dict[str, tuple[str, str]]:
    """``hpcvar bench`` subcommands: name -> (click command reference relative to the command-line package,
    one-line help), from the bench kinds."""
    out: dict[str, tuple[str, str]] = {}
    for k in KINDS.values():
        if k.cli and k.command.startswith("bench "):
            out.setdefault(k.command.split()[1], (k.cli, k.cli_help))
    return out
