"""Keeping the results store tidy: removing runs and pruning old ones, safely.

Never removed, whatever is asked:
- a run in progress (status ``running`` with its process alive, or on another host where it cannot be told);
  a run whose process is gone (``lost``) can be removed;
- a step of a characterization on its own (it goes with its characterization);
- a run that a run being kept refers to: a characterization's baseline, the latency run a jitter simulation took
  its costs from, ... Any mention of a run's id in another run's ``run.json`` (its parameters, command line or
  result, its steps' too) counts as a reference: a false match keeps a run, it never removes one.

A run is removed by renaming its directory to a hidden name in the same root (atomic: readers see it whole or
not at all) and then deleting that.
"""

from __future__ import annotations

import datetime as _dt
import os
import re
import shutil
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from hpcvar.errors import ResultsError, UsageError
from hpcvar.results.groups import group_key
from hpcvar.results.store import Run

IN_PROGRESS = "running"


def dir_bytes(path: Path) -> int:
    """Bytes of every file under ``path`` (apparent sizes)."""
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            try:
                total += (Path(root) / f).lstat().st_size
            except OSError:
                pass
    return total


def started(run: Run) -> _dt.datetime | None:
    text = run.info.get("started_utc")
    if not isinstance(text, str):
        return None
    try:
        return _dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def _strings(obj: object) -> list[str]:
    if isinstance(obj, str):
        return [obj]
    if isinstance(obj, dict):
        return [s for k, v in obj.items() for s in [str(k), *_strings(v)]]
    if isinstance(obj, list):
        return [s for v in obj for s in _strings(v)]
    return []


def _mentions(run: Run) -> str:
    """The text of every string in ``run``'s run.json and its steps', less the names of its own steps (a step can
    have the same name as a run at the top, made in the same second)."""
    own = {c.id for c in run.children()}
    out = []
    for r in [run, *run.children()]:
        for s in _strings(r.info):
            if s in own:
                continue
            for c in own:
                s = s.replace(f"steps/{c}", "steps/")
            out.append(s)
    return "\n".join(out)


def references(runs: list[Run]) -> dict[str, set[str]]:
    """Run id -> the ids of the other runs (of ``runs``) whose run.json (or a step's) mentions it: the id as a
    whole word (``...-bench-latency`` is not mentioned by ``...-bench-latency-2``)."""
    ids = [r.id for r in runs]
    out: dict[str, set[str]] = {i: set() for i in ids}
    for r in runs:
        text = _mentions(r)
        for i in ids:
            if i != r.id and re.search(rf"(?<![\w.-]){re.escape(i)}(?![\w.-])", text):
                out[i].add(r.id)
    return out


@dataclass
class Decision:
    run: Run
    remove: bool
    why: str  # why kept, or why removed
    bytes: int = 0


@dataclass
class Plan:
    decisions: list[Decision] = field(default_factory=list)

    @property
    def removed(self) -> list[Decision]:
        return [d for d in self.decisions if d.remove]

    @property
    def kept(self) -> list[Decision]:
        return [d for d in self.decisions if not d.remove]


def _protect(plan: Plan, refs: dict[str, set[str]]) -> None:
    """Keep every run a kept run refers to (to a fixed point: a kept run keeps what it refers to in turn)."""
    by_id = {d.run.id: d for d in plan.decisions}
    changed = True
    while changed:
        changed = False
        for d in plan.removed:
            keepers = sorted(k for k in refs.get(d.run.id, ()) if k in by_id and not by_id[k].remove)
            if keepers:
                d.remove, d.why = False, f"kept: run {keepers[0]} refers to it"
                changed = True


def _busy(run: Run) -> bool:
    return run.status == IN_PROGRESS


def plan_removal(all_runs: list[Run], targets: list[Run]) -> Plan:
    """``hpcvar runs rm``: the targets, unless in progress or referred to by a run that stays."""
    wanted = {r.id for r in targets}
    plan = Plan()
    for r in all_runs:
        if r.id not in wanted:
            plan.decisions.append(Decision(r, False, "not named"))
        elif _busy(r):
            plan.decisions.append(Decision(r, False, "kept: in progress (its process is running)"))
        else:
            plan.decisions.append(Decision(r, True, "named"))
    _protect(plan, references(all_runs))
    return plan


def plan_prune(all_runs: list[Run], now: _dt.datetime, older_than_s: float | None,
               keep_last: int | None) -> Plan:
    """``hpcvar runs prune``: runs started more than ``older_than_s`` ago (every run when None), except the
    ``keep_last`` newest of each group (same command on the same hosts), runs in progress and runs a kept run
    refers to."""
    newest: dict[tuple[str, str], list[str]] = {}
    for r in sorted(all_runs, key=lambda r: (started(r) or now, r.id), reverse=True):
        newest.setdefault(group_key(r), []).append(r.id)
    plan = Plan()
    for r in all_runs:
        t = started(r)
        rank = newest[group_key(r)].index(r.id)
        if _busy(r):
            plan.decisions.append(Decision(r, False, "kept: in progress (its process is running)"))
        elif keep_last is not None and rank < keep_last:
            plan.decisions.append(Decision(r, False, f"kept: among the {keep_last} newest of its group"))
        elif older_than_s is not None and t is not None and (now - t).total_seconds() <= older_than_s:
            plan.decisions.append(Decision(r, False, "kept: not old enough"))
        elif older_than_s is not None and t is None:
            plan.decisions.append(Decision(r, False, "kept: its start time is unknown"))
        else:
            plan.decisions.append(Decision(r, True, "old" if older_than_s is not None else "beyond --keep-last"))
    _protect(plan, references(all_runs))
    return plan


def apply(plan: Plan) -> None:
    """Remove the runs the plan removes (each renamed away first, then deleted); records their sizes."""
    for d in plan.removed:
        d.bytes = dir_bytes(d.run.path)
        remove_dir(d.run.path)


def remove_dir(path: Path) -> None:
    path = Path(path)
    hidden = path.with_name(f".removing-{path.name}")
    try:
        os.replace(path, hidden)
    except OSError as e:
        raise ResultsError(f"cannot remove the run: {e.strerror or e}", str(path),
                           "Check the permissions of the runs directory") from None
    shutil.rmtree(hidden, ignore_errors=True)


def check_targets(targets: Iterable[Run], root: Path) -> None:
    """A step of a characterization is removed with its characterization, never alone."""
    for r in targets:
        if r.path.parent.name == "steps" and (r.path.parent.parent / "run.json").is_file():
            parent = r.path.parent.parent.name
            raise UsageError(f"run {r.id} is a step of characterization {parent}", "RUN",
                             f"Remove the characterization ({parent}) to remove its steps")
        if r.path.parent.resolve() != Path(root).resolve():
            raise UsageError(f"run {r.path} is not in the runs directory {root}", "RUN",
                             "Give a run of --runs-dir (or pass the --runs-dir that holds it)")
