"""What each kind of run contributes to the HTML/Markdown report.

Every benchmark, analysis or simulation registers a builder for its run
command: ``register("bench latency")(fn)`` where ``fn(run) -> Section``.
The report (hpcvar report) only walks runs and renders their sections; it
knows nothing of any benchmark.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd


@dataclass
class Headline:
    """One number that matters: value with uncertainty and a one-line meaning."""

    label: str
    value: str  # formatted, with unit, e.g. "1.82 us [1.81, 1.83]"
    meaning: str


@dataclass
class Section:
    title: str
    headlines: list[Headline] = field(default_factory=list)
    tables: list[tuple[str, pd.DataFrame]] = field(default_factory=list)  # (caption, frame)
    figures: list[tuple[str, Path]] = field(default_factory=list)  # (caption, PNG path)
    notes: list[str] = field(default_factory=list)  # warnings with remedies, readings


SECTION_BUILDERS: dict[str, Callable] = {}

# modules whose import registers section builders (one line per area)
SECTION_MODULES = [
    "hpcvar.report.sec_latency",
    "hpcvar.report.metrics",
    "hpcvar.report.sec_sharing",
    "hpcvar.report.sec_queues",
    "hpcvar.report.sec_ace",
    "hpcvar.report.fanin",
    "hpcvar.noise.render",
    "hpcvar.sim.jitter_report",
    "hpcvar.report.bsp",
    "hpcvar.sim.app_report",
]


def load_all() -> None:
    import importlib

    for m in SECTION_MODULES:
        importlib.import_module(m)


def register(command: str):
    def deco(fn):
        SECTION_BUILDERS[command] = fn
        return fn

    return deco


def section_for(run) -> Section | None:
    load_all()
    fn = SECTION_BUILDERS.get(run.info.get("command", ""))
    return fn(run) if fn else None
