"""Sweeps as Extra-P's JSON Lines input (extrap --jsonlines; Extra-P 4.2's ``jsonlines_file_reader``): one line
per measured repetition, ``{"params": {...}, "callpath": ..., "metric": ..., "value": ...}``. Every sample is
kept: Extra-P models their mean or median per point itself.

The parameters of each kind of run, from its samples table (a parameter with one value in all the runs given is
left out: Extra-P models what varies):

=========================  ===========================  ==================================================
run                        parameters                   value (metric)
=========================  ===========================  ==================================================
bench latency              size (bytes)                 one-way latency of each round trip (oneway_ns)
bench queues posted        length, traversed, size      one-way latency (oneway_ns)
bench queues unexpected    length, size                 one-way latency (oneway_ns)
bench fanin                clients, chatter             large-buffer bytes/s of each full bin
=========================  ===========================  ==================================================

Runs of one kind at different rank counts (``--np``) add the parameter ``ranks``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from hpcvar.errors import UsageError
from hpcvar.results.store import Run


@dataclass(frozen=True)
class Sweep:
    table: str
    params: dict[str, str]  # Extra-P parameter -> column
    value: str
    metric: str
    full_bins_only: bool = False


SWEEPS = {
    "bench latency": Sweep("latency.samples", {"size": "size_bytes"}, "oneway_ns", "oneway_ns"),
    "bench queues posted": Sweep("queues_posted.samples", {"length": "length", "traversed": "traversed_pct",
                                                           "size": "size_bytes"}, "oneway_ns", "oneway_ns"),
    "bench queues unexpected": Sweep("queues_unexpected.samples", {"length": "length", "size": "size_bytes"},
                                     "oneway_ns", "oneway_ns"),
    "bench fanin": Sweep("fanin.bins", {"clients": "clients", "chatter": "chatter"}, "large_bytes_per_s",
                         "large_bytes_per_s", full_bins_only=True),
}


def _ranks(run: Run) -> int | None:
    native = (run.info.get("metadata") or {}).get("native") or {}
    n = native.get("nranks") or (run.info.get("metadata") or {}).get("np")
    return int(n) if n else None


def extrap_lines(runs: list[Run]) -> str:
    """The JSON Lines of ``runs`` (of one kind; a characterization: give its step's run)."""
    import pandas as pd

    kinds = {str(r.info.get("command")) for r in runs}
    if len(kinds) != 1 or next(iter(kinds)) not in SWEEPS:
        raise UsageError(f"runs of {', '.join(sorted(kinds))}: Extra-P takes the sweeps of one kind of run, one of "
                         f"{', '.join(SWEEPS)}", "RUNS",
                         "Give runs of one sweep (a characterization's step: PARENT/steps/CHILD)")
    sweep = SWEEPS[next(iter(kinds))]
    frames = []
    for run in runs:
        df = run.read_table(sweep.table)
        if sweep.full_bins_only:
            df = df[df["full"]]
        part = pd.DataFrame({p: df[c].to_numpy() for p, c in sweep.params.items()})
        part["ranks"] = _ranks(run)
        part["value"] = df[sweep.value].to_numpy(dtype=float)
        frames.append(part)
    data = pd.concat(frames, ignore_index=True)
    data = data[data["value"].notna()]
    params = [p for p in [*sweep.params, "ranks"] if data[p].nunique(dropna=True) > 1]
    if not params:
        raise UsageError("the runs measured one point only: nothing varies for Extra-P to model", "RUNS",
                         "Give a sweep (several sizes, lengths or client counts), or runs at several --np")
    callpath = str(runs[0].info.get("command")).replace("bench ", "")
    lines = []
    for row in data.itertuples(index=False):
        values = {p: _num(getattr(row, p)) for p in params}
        lines.append(json.dumps({"params": values, "callpath": callpath, "metric": sweep.metric,
                                 "value": float(row.value)}))
    return "\n".join(lines) + "\n"


def _num(v: object) -> float | int:
    f = float(v)  # type: ignore[arg-type]  # numpy and pandas scalars
    return int(f) if f.is_integer() else f
