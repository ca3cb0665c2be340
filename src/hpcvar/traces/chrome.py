"""Export of a simulated timeline as Chrome / Perfetto trace-event JSON.

One complete event (``"ph": "X"``) per replayed row: ``pid`` = node, ``tid`` =
task, ``ts``/``dur`` in microseconds, ``args`` = seq. Open the file in
https://ui.perfetto.dev or chrome://tracing.
"""

from __future__ import annotations

import json
from pathlib import Path

from hpcvar.results.store import atomic_write_text


def chrome_events(rows: list[dict], node_of: list[int]) -> dict:
    ev = []
    for node in sorted(set(node_of)):
        ev.append({"ph": "M", "name": "process_name", "pid": node, "tid": 0, "args": {"name": f"node {node}"}})
    for task, node in enumerate(node_of):
        ev.append({"ph": "M", "name": "thread_name", "pid": node, "tid": task, "args": {"name": f"task {task}"}})
    for r in rows:
        ev.append({"ph": "X", "name": r["op"], "cat": "mpi", "pid": node_of[r["task"]], "tid": r["task"],
                   "ts": r["start_s"] * 1e6, "dur": max(r["end_s"] - r["start_s"], 0.0) * 1e6,
                   "args": {"seq": r["seq"]}})
    return {"traceEvents": ev, "displayTimeUnit": "ns"}


def write_chrome(rows: list[dict], node_of: list[int], path: str | Path) -> Path:
    path = Path(path)
    atomic_write_text(path, json.dumps(chrome_events(rows, node_of)))
    return path


__all__ = ["chrome_events", "write_chrome"]
