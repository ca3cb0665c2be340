"""Stored runs as series: grouped by command and hosts, one point per run and metric (median, 95% CI)."""

from __future__ import annotations

import datetime as _dt
import fnmatch
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from hpcvar.errors import UsageError
from hpcvar.results.groups import group_key, group_label
from hpcvar.results.store import Run, list_runs
from hpcvar.results.upkeep import started

if TYPE_CHECKING:
    from hpcvar.history.changes import Change

# run statuses a history takes: a failed characterization still has its complete steps, a failed benchmark its
# stored points; runs in progress, interrupted or lost are left out (named in the result)
USED_STATUSES = ("complete", "failed")


@dataclass
class Point:
    """One run's value of one metric: the median of its samples with the 95% CI of the median."""

    run: str  # run id
    started_utc: str
    value: float
    ci_lo: float
    ci_hi: float
    n: int
    samples: np.ndarray = field(repr=False)


@dataclass
class Series:
    metric: str
    unit: str
    higher_is_worse: bool
    floor: float = 0.0  # hpcvar.compare.Metric.floor: a move of the level within it is no change
    points: list[Point] = field(default_factory=list)
    changes: list[Change] = field(default_factory=list)  # confirmed, in run order
    latest: Change | None = None  # the last run against the runs since the last change (confirmed or not)
    segments: list[tuple[int, int]] = field(default_factory=list)  # [start, end) run positions between changes


@dataclass
class Group:
    key: tuple[str, str]
    runs: list[Run]
    series: list[Series] = field(default_factory=list)

    @property
    def label(self) -> str:
        return group_label(self.key)


@dataclass
class Window:
    """The runs' start times a history takes: [since, until)."""

    since: _dt.datetime | None = None
    until: _dt.datetime | None = None

    def __contains__(self, t: _dt.datetime | None) -> bool:
        if t is None:
            return self.since is None and self.until is None
        return (self.since is None or t >= self.since) and (self.until is None or t < self.until)


def parse_instant(text: str, flag: str, now: _dt.datetime) -> _dt.datetime:
    """An instant given as a UTC date or date-time (2026-11-01, 2026-11-01T06:00) or as an age (7d, 12h: that
    long before now)."""
    from hpcvar.units import parse_time

    t = text.strip()
    try:
        when = _dt.datetime.fromisoformat(t.replace("Z", "+00:00"))
    except ValueError:
        try:
            return now - _dt.timedelta(seconds=parse_time(t, flag))
        except UsageError:
            raise UsageError(f"'{text}' is neither a date nor an age", flag, "Give a UTC date or date-time "
                             "(2026-11-01, 2026-11-01T06:00) or an age (7d, 12h)") from None
    return when if when.tzinfo else when.replace(tzinfo=_dt.UTC)


def select_groups(runs_dir: str | None, window: Window, command: str | None = None, hosts: str | None = None
                  ) -> tuple[list[Group], list[Run]]:
    """The groups of runs in the window (each oldest first), and the runs left out for their status."""
    groups: dict[tuple[str, str], list[Run]] = {}
    skipped: list[Run] = []
    for run in list_runs(runs_dir):
        if started(run) not in window:
            continue
        if command and run.info.get("command") != command:
            continue
        key = group_key(run)
        if hosts and key[0] != ",".join(sorted(h for h in hosts.split(",") if h)):
            continue
        if run.status not in USED_STATUSES:
            skipped.append(run)
            continue
        groups.setdefault(key, []).append(run)
    out = [Group(k, sorted(v, key=lambda r: (str(r.info.get("started_utc")), r.id))) for k, v in groups.items()]
    return sorted(out, key=lambda g: g.key), skipped


def wanted(name: str, patterns: tuple[str, ...]) -> bool:
    """A metric named by ``--metric``: a glob (``*latency*size=8B``), or a part of its name."""
    return not patterns or any(fnmatch.fnmatchcase(name, p) if any(c in p for c in "*?[") else p in name
                               for p in patterns)


def build_series(group: Group, patterns: tuple[str, ...] = (), all_metrics: bool = False) -> None:
    """The headline metrics of the group's runs (every metric with ``all_metrics``), each as a series (in their
    first run's order); ``patterns`` select among them (``--metric``)."""
    from hpcvar.compare import metrics_of
    from hpcvar.stats import median_ci_order

    by_name: dict[str, Series] = {}
    for run in group.runs:
        for name, m in metrics_of(run).items():
            x = np.asarray(m.samples, dtype=float)
            x = x[np.isfinite(x)]
            if not x.size or not (m.headline or all_metrics) or not wanted(name, patterns):
                continue
            s = by_name.setdefault(name, Series(name, m.unit, m.higher_is_worse, m.floor))
            lo, hi = median_ci_order(x)
            s.points.append(Point(run.id, str(run.info.get("started_utc")), float(np.median(x)), lo, hi, int(x.size),
                                  x))
    group.series = list(by_name.values())
