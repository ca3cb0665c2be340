"""Runs as Caliper profiles (the json-split format ``cali-query -O json-split`` writes and Hatchet/Thicket read):
one file per run, so that Thicket compares runs as it compares application profiles.

- Regions (the ``path`` hierarchy): ``hpcvar`` > the run's command (a characterization: each step) > one region
  per metric of the run (the raw samples hpcvar compare tests), named with its unit (``latency one-way size=8B
  [ns]``).
- Columns per region: ``median``, ``mean``, ``min``, ``max``, ``p90``, ``p99`` (in the region's unit), ``count``
  (samples), and ``Node order`` (Hatchet orders the regions by it).
- Run metadata, one value each (Thicket's metadata table): ``cluster`` (the Slurm cluster, else the hosts' common
  name), ``hosts``, ``num_nodes``, ``mpi.world.size`` (ranks), ``mpi_library``, ``hpcvar_version``, ``hpcvar.run``,
  ``hpcvar.command``, ``hpcvar.status``, ``launchdate`` (Unix time), ``cpu_model``, ``kernel`` and the run's
  parameters as ``hpcvar.param.<name>``.
"""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np

from hpcvar import __version__
from hpcvar.export.figures import mpi_name
from hpcvar.results.groups import run_hosts
from hpcvar.results.store import Run

COLUMNS = ("median", "mean", "min", "max", "p90", "p99", "count")


def _regions(run: Run) -> list[tuple[str, str, np.ndarray]]:
    """(parent label, region label, samples) of every metric, a characterization's by step."""
    from hpcvar.compare import metrics_of

    out = []
    for name, m in metrics_of(run).items():
        parent, sep, rest = name.partition(": ")
        if not sep or run.info.get("command") != "characterize":
            parent, rest = str(run.info.get("command")), name
        x = np.asarray(m.samples, dtype=float)
        x = x[np.isfinite(x)]
        if x.size:
            out.append((parent, f"{rest} [{m.unit}]" if m.unit else rest, x))
    return out


def _cluster(run: Run, hosts: tuple[str, ...]) -> str:
    launcher = (run.info.get("metadata") or {}).get("launcher") or {}
    for key in ("slurm_cluster", "cluster"):
        if launcher.get(key):
            return str(launcher[key])
    prefix = os.path.commonprefix(list(hosts)).rstrip("-_0123456789") if hosts else ""
    return prefix or (hosts[0] if hosts else "unknown")


def _metadata(run: Run) -> dict[str, Any]:
    meta = run.info.get("metadata") or {}
    native = meta.get("native") or {}
    hosts = run_hosts(run)
    started = run.info.get("started_utc")
    launch = None
    if isinstance(started, str):
        import datetime as dt

        launch = int(dt.datetime.fromisoformat(started.replace("Z", "+00:00")).timestamp())
    ranks = native.get("nranks") or (run.info.get("params") or {}).get("np") or meta.get("np")
    out: dict[str, Any] = {
        "cluster": _cluster(run, hosts), "hosts": ",".join(hosts), "num_nodes": len(hosts),
        "mpi.world.size": int(ranks) if ranks else None,
        "mpi_library": mpi_name(run),
        "hpcvar_version": str(run.info.get("hpcvar_version") or __version__),
        "hpcvar.run": run.id, "hpcvar.command": run.info.get("command"), "hpcvar.status": run.info.get("status"),
        "launchdate": launch, "cpu_model": meta.get("cpu_model"), "kernel": meta.get("kernel"),
    }
    for k, v in (run.info.get("params") or {}).items():
        out[f"hpcvar.param.{k}"] = v if isinstance(v, (int, float, str, bool)) or v is None else json.dumps(v)
    return out


def caliper_profile(run: Run) -> dict[str, Any]:
    """The run as one Caliper json-split document."""
    nodes: list[dict[str, Any]] = [{"label": "hpcvar", "column": "path"}]
    parents: dict[str, int] = {}
    data: list[list[Any]] = [[0, 0, *([0.0] * (len(COLUMNS) - 1)), 0]]  # the root region: no samples
    for parent, label, x in _regions(run):
        if parent not in parents:
            parents[parent] = len(nodes)
            nodes.append({"label": parent, "column": "path", "parent": 0})
            data.append([len(data), parents[parent], *([0.0] * (len(COLUMNS) - 1)), 0])
        nodes.append({"label": label, "column": "path", "parent": parents[parent]})
        p90, p99 = np.percentile(x, [90, 99])
        data.append([len(data), len(nodes) - 1, float(np.median(x)), float(np.mean(x)), float(np.min(x)),
                     float(np.max(x)), float(p90), float(p99), int(x.size)])
    columns = ["Node order", "path", *COLUMNS]
    column_metadata = [{"is_value": True, "attribute.alias": "Node order"}, {"is_value": False},
                       *({"is_value": True} for _ in COLUMNS)]
    return {"data": data, "columns": columns, "column_metadata": column_metadata, "nodes": nodes,
            **_metadata(run)}
