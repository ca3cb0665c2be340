"""Noise on every node of a launcher: hv_noise_nodes under srun or the testbed, one trace per node on one
time base, and their cross-node alignment (docs/noise.md, "Noise on every node").

The run (command ``noise record``) holds ``traces/<host>.jtr`` per node, ``raw/sync.raw`` (the clock
offsets measured before and after), the per-node tables (``host`` column) and the tables
``noise.clock_sync``, ``noise.alignment`` and ``noise.windows``; ``run.info["nodes"]`` lists the hosts and
``run.info["alignment"]`` holds the verdict.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from hpcvar._native import find_program
from hpcvar.errors import HpcvarError
from hpcvar.launch import Launcher, LaunchSpec
from hpcvar.noise import alignment
from hpcvar.noise.formats import read_jtr
from hpcvar.results import Run, read_raw

METHODS = ("auto", "spin", "timer")
SYNC_ROUNDS = 100
MARGIN_S = 0.2  # between agreeing on the start (every collector calibrated and ready) and the start
DEFAULT_INTERVAL_NS = 200_000


@dataclass(frozen=True)
class NodesParams:
    cpus: str  # "all" or a comma list, the same on every node
    duration_s: float
    threshold_ns: float
    max_rate: float
    rt_prio: int
    method: str  # spin | timer (auto is resolved before)
    interval_ns: float
    min_detour_s: float
    window_s: float


def launch(launcher: Launcher, nodes: int, p: NodesParams, run: Run, timeout_s: float | None,
           launcher_args: list[str], argv: list[str] | None) -> None:
    """Run hv_noise_nodes with one rank on each of ``nodes`` nodes; traces go to the run's traces/."""
    exe = find_program("hv_noise_nodes", needs_mpi=True)
    tdir = run.path / "traces"
    tdir.mkdir(exist_ok=True)
    max_events = int(p.duration_s * p.max_rate) + 4096
    args = ["--out", str((run.raw_dir() / "sync.raw").resolve()), "--out-dir", str(tdir.resolve()),
            "--cpus", p.cpus, "--duration", repr(float(p.duration_s)), "--threshold-ns", repr(float(p.threshold_ns)),
            "--max-events", str(max_events), "--method", p.method, "--interval-ns", repr(float(p.interval_ns)),
            "--rt-prio", str(p.rt_prio), "--sync-rounds", str(SYNC_ROUNDS), "--margin", repr(MARGIN_S)]
    if argv:
        args += ["--argv", " ".join(argv)]
    timeout = timeout_s or (60.0 + 2.0 * p.duration_s + 5.0 * nodes)
    spec = LaunchSpec(np=nodes, exe=exe, args=args, timeout_s=timeout, ranks_per_node=1, extra_args=launcher_args)
    spec.args += launcher.layout_args(spec)
    cmd, _ = launcher.command(spec)
    run.info["launches"].append({"label": "noise-nodes", "argv": cmd, "timeout_s": timeout, "points": 1})
    run.save()
    launcher.run(spec, run.raw_dir(), "noise-nodes")


def load(run: Run) -> list[alignment.NodeTrace]:
    """The nodes' traces with their clock models, from a stored multi-node recording."""
    raw = read_raw(run.raw_dir() / "sync.raw")
    if not raw.points:
        raise HpcvarError("the recording has no clock synchronisation (sync.raw is incomplete)", str(run.path),
                          "Record again")
    rows = raw.points[0].rows
    col = {n: i for i, n in enumerate(raw.columns)}
    hosts = raw.meta.get("hosts", "").split(",")
    boots = raw.meta.get("boot_ids", "").split(",")
    t0 = float(raw.meta.get("t0_mono_raw_ns", 0))
    nodes = []
    for r in rows:
        rank = int(r[col["rank"]])
        host = hosts[rank] if rank < len(hosts) else f"rank{rank}"
        path = run.path / "traces" / f"{host}.jtr"
        if not path.is_file():
            raise HpcvarError(f"the trace of node {host} is missing ({path})", str(run.path),
                              "The runs directory must be on a file system every node sees (--runs-dir)")
        ob, oa = r[col["offset_before_ns"]], r[col["offset_after_ns"]]
        tb, ta = r[col["t_before_ns"]], r[col["t_after_ns"]]
        drift = (oa - ob) / (ta - tb) if ta > tb else 0.0
        prec = max(r[col["rtt_before_ns"]], r[col["rtt_after_ns"]]) / 2.0
        nodes.append(alignment.NodeTrace(host, read_jtr(path), float(ob), float(drift), float(tb), t0, float(prec),
                                         boots[rank] if rank < len(boots) else ""))
    return nodes


def clock_table(nodes: list[alignment.NodeTrace], run: Run) -> pd.DataFrame:
    raw = read_raw(run.raw_dir() / "sync.raw")
    rows = raw.points[0].rows
    col = {n: i for i, n in enumerate(raw.columns)}
    out = []
    for n, r in zip(nodes, rows, strict=True):
        out.append({"host": n.host, "rank": int(r[col["rank"]]), "boot_id": n.boot_id,
                    "offset_before_ns": float(r[col["offset_before_ns"]]),
                    "rtt_before_ns": float(r[col["rtt_before_ns"]]),
                    "offset_after_ns": float(r[col["offset_after_ns"]]), "rtt_after_ns": float(r[col["rtt_after_ns"]]),
                    "drift_ppm": n.drift * 1e6, "precision_ns": n.precision_ns,
                    "method": str(n.trace.meta.get("method", "spin"))})
    return pd.DataFrame(out)


def resolve_method(method: str, boot_ids_shared: bool | None) -> str:
    """auto: spin on real nodes; timer when the nodes are one machine (spinning collectors would steal each
    other's cores)."""
    if method != "auto":
        return method
    return "timer" if boot_ids_shared else "spin"


def shares_machine(launcher: Launcher) -> bool | None:
    """Whether the launcher's nodes are namespaces of this machine (the testbed, or its Slurm)."""
    if launcher.name == "testbed":
        return True
    import os

    conf = os.environ.get("SLURM_CONF", "")
    if launcher.name == "srun" and conf:
        from hpcvar.testbed.plan import default_state_path, load_state

        try:
            plan = load_state(default_state_path())
        except HpcvarError:
            return None
        return bool(plan and plan.slurm and plan.slurm.get("conf") == conf)
    return None


def tables(nodes: list[alignment.NodeTrace]) -> tuple[dict[str, pd.DataFrame], list[dict]]:
    """Per-node analysis tables (host column) and the per-node reports."""
    from hpcvar.noise import analysis, collector

    frames: dict[str, list[pd.DataFrame]] = {}
    reports = []
    for n in nodes:
        rep = analysis.analyze(n.trace)
        reports.append(rep)
        for name, df in collector.tables(rep, n.host).items():
            frames.setdefault(name, []).append(df)
    return {k: pd.concat(v, ignore_index=True) for k, v in frames.items()}, reports


def record(launcher: Launcher, nodes: int, p: NodesParams, run: Run, timeout_s: float | None = None,
           launcher_args: list[str] | None = None, argv: list[str] | None = None) -> dict:
    """Record on every node, analyse, store; returns the JSON result (the caller's ``run_lifecycle`` ends the
    run, failed included)."""
    launch(launcher, nodes, p, run, timeout_s, launcher_args or [], argv)
    ns = load(run)
    run.info["nodes"] = [n.host for n in ns]
    per_node, reports = tables(ns)
    for name, df in per_node.items():
        run.write_table(name, df)
    run.write_table("noise.clock_sync", clock_table(ns, run))
    hz = alignment.common_frequency(reports)
    pairs, windows, verdict = alignment.analyze(ns, p.min_detour_s, p.window_s, hz)
    run.write_table("noise.alignment", pairs)
    run.write_table("noise.windows", windows)
    run.info["alignment"] = verdict
    if verdict["steal_warning"]:
        run.warn(verdict["steal_warning"])
    prec = max(n.precision_ns for n in ns)
    drift = max(abs(n.drift) for n in ns) * 1e6
    if len({n.boot_id for n in ns}) < len(ns) and p.method == "spin":
        run.warn("several nodes are one machine (same boot id) and spinning collectors share its cores, so each "
                 "records the others as noise; use --method timer")
    return {"command": "noise record", "run": str(run.path), "nodes": [n.host for n in ns], "method": p.method,
            "clock": {"precision_ns": prec, "max_drift_ppm": drift},
            "per_node": [{"host": n.host, "noise_fraction": [round(c["noise_fraction"], 6) for c in r["cpus"]],
                          "events_per_s": [round(c["events_per_s"], 1) for c in r["cpus"]]}
                         for n, r in zip(ns, reports, strict=True)],
            "alignment": {k: verdict[k] for k in ("verdict", "counts", "jitsim_mode", "rule", "min_detour_s",
                                                  "window_s", "tolerance_s", "steal_warning", "pairs")}
            | {"phase_hz": hz},
            "median_excess": float(np.nanmedian(pairs["excess"])) if len(pairs) else float("nan")}
