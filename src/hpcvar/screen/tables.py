"""The raw points of hv_screen (native/bench/screen.c) as tidy tables, and the node traces it left.

Every row of a raw point is ``kind, node, idx, v0, v1, v2, v3`` (the meaning of each per kind is in screen.c's
header); nodes are indices into the header's ``nodes`` list, turned into host names here. A run resumed on
other nodes (another allocation) would mix hosts under one index: the raw files must agree on the nodes.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from hpcvar.errors import ResultsError
from hpcvar.results import RawFile

K_LOAD, K_KERNEL, K_TIMER, K_SHM, K_NOISE, K_LAT, K_BW, K_PHASE, K_THROTTLE = 1, 2, 3, 4, 5, 6, 7, 8, 9
PHASES = {1: "noise", 2: "kernel", 3: "shm"}  # the parts of a node item with a load of their own
NOISE_WINDOW_S = 0.1  # the noise fraction per 100 ms window: the samples of a node's noise CI


def node_list(raws: list[RawFile], where: str) -> pd.DataFrame:
    """Node index -> host, boot id, CPUs, turn, from the raw headers (which must agree)."""
    seen = {str(r.meta["nodes"]) for r in raws if r.meta.get("nodes")}
    if len(seen) > 1:
        raise ResultsError(f"the raw files of this run name different nodes ({' / '.join(sorted(seen))})", where,
                           "A screen resumed in another allocation mixes nodes; start a new screen")
    if not seen:
        return pd.DataFrame({"node": [], "host": [], "boot_id": [], "cpus": [], "turn": []})
    meta = raws[-1].meta
    hosts = meta["nodes"].split(",")
    boots = (meta.get("boot_ids") or "").split(",")
    cpus = [int(x) for x in (meta.get("node_cpus") or "").split(",") if x]
    turns = [int(x) for x in (meta.get("turns") or "").split(",") if x]
    return pd.DataFrame({"node": np.arange(len(hosts), dtype=np.int64), "host": hosts,
                         "boot_id": [boots[i] if i < len(boots) else "" for i in range(len(hosts))],
                         "cpus": np.array([cpus[i] if i < len(cpus) else 0 for i in range(len(hosts))], dtype=np.int64),
                         "turn": np.array([turns[i] if i < len(turns) else 0 for i in range(len(hosts))],
                                          dtype=np.int64)})


def _points(raws: list[RawFile]):
    """(item, a, b, round, kernel iterations, rows) of every complete point; the last one of a key wins (a
    resumed launch; each launch calibrates the kernel anew, so its length travels with the point)."""
    out: dict[tuple, tuple] = {}
    for raw in raws:
        iters = int(raw.meta.get("kernel_iters") or 0)
        for p in raw.points:
            it = str(p.params.get("item"))
            if it in ("pair", "recheck"):
                key: tuple[str, int, int, int] = (it, int(p.params["a"]), int(p.params["b"]), -1)
            else:
                key = (it, int(p.params["node"]), -1, int(p.params.get("round", -1)))
            out[key] = (iters, p.rows)
    return [(*k, iters, rows) for k, (iters, rows) in out.items()]


def _frame(records: list[dict], columns: list[str]) -> pd.DataFrame:
    return pd.DataFrame(records, columns=columns) if records else pd.DataFrame({c: [] for c in columns})


LOAD_COLS = ["item", "a", "b", "round", "host", "phase", "local", "busy_ns", "cap_ns", "steal_ns", "own_ns",
             "throttled_ns"]


def _throttled(load: list[dict], h: str, idx: float, of_kind: float, ns: float) -> None:
    """A throttle row (kind 9) completes the load row the same rank wrote right before it."""
    last = load[-1] if load else None
    if last is not None and last["host"] == h and (
            (last["phase"], last["local"]) == (("all", int(idx)) if int(of_kind) == K_LOAD
                                               else (PHASES.get(int(idx), "?"), -1))):
        last["throttled_ns"] = ns


def raw_tables(raws: list[RawFile], where: str = "run") -> dict[str, pd.DataFrame]:
    """screen.nodes, screen.load, screen.kernel, screen.timer, screen.shm, screen.lat, screen.bw_raw (the
    noise tables come from the traces: ``noise_tables``)."""
    nodes = node_list(raws, where)
    host = dict(zip(nodes["node"], nodes["host"], strict=True))
    rec: dict[str, list[dict]] = {k: [] for k in ("load", "kernel", "timer", "shm", "lat", "bw")}
    for item, a, b, rnd, iters, rows in _points(raws):
        for r in rows:
            kind, node, idx, v0, v1, v2, v3 = (float(x) for x in r)
            h = host.get(int(node), f"node{int(node)}")
            if kind in (K_LOAD, K_PHASE):
                rec["load"].append({"item": item, "a": a, "b": b, "round": rnd, "host": h,
                                    "phase": PHASES.get(int(idx), "?") if kind == K_PHASE else "all",
                                    "local": int(idx) if kind == K_LOAD else -1,
                                    "busy_ns": v0, "cap_ns": v1, "steal_ns": v2, "own_ns": v3,
                                    "throttled_ns": np.nan})
            elif kind == K_THROTTLE:
                _throttled(rec["load"], h, idx, v1, v0)
            elif kind == K_KERNEL:
                rec["kernel"].append({"host": h, "round": rnd, "cpu": int(idx), "call": int(v1), "call_ns": v0,
                                      "start_ns": v2, "iters": iters, "ns_per_iter": v0 / iters if iters else np.nan})
            elif kind == K_TIMER:
                rec["timer"].append({"host": h, "round": rnd, "sample": int(idx), "read_ns": v0,
                                     "resolution_ns": v1})
            elif kind == K_SHM:
                rec["shm"].append({"host": h, "round": rnd, "iter": int(idx), "rtt_ns": v0, "oneway_ns": v0 / 2})
            elif kind == K_LAT:
                rec["lat"].append({"host_a": h, "host_b": host.get(int(v1), str(int(v1))), "iter": int(idx),
                                   "pass": int(v2), "rtt_ns": v0, "oneway_ns": v0 / 2})
            elif kind == K_BW:
                rec["bw"].append({"src": h, "dst": host.get(int(v2), str(int(v2))), "iter": int(idx),
                                  "t_ns": v0})
    return {
        "screen.nodes": nodes,
        "screen.load": _frame(rec["load"], LOAD_COLS),
        "screen.kernel": _frame(rec["kernel"], ["host", "round", "cpu", "call", "call_ns", "start_ns", "iters",
                                                "ns_per_iter"]),
        "screen.timer": _frame(rec["timer"], ["host", "round", "sample", "read_ns", "resolution_ns"]),
        "screen.shm": _frame(rec["shm"], ["host", "round", "iter", "rtt_ns", "oneway_ns"]),
        "screen.lat": _frame(rec["lat"], ["host_a", "host_b", "iter", "pass", "rtt_ns", "oneway_ns"]),
        "screen.bw_raw": _frame(rec["bw"], ["src", "dst", "iter", "t_ns"]),
    }


def bandwidth(bw_raw: pd.DataFrame, lat: pd.DataFrame, size: int) -> pd.DataFrame:
    """screen.bw: each sample's rate, size / (t - one-way 8-byte latency of the pair): the sender timed the
    message and the 8-byte answer, which takes about one small-message latency."""
    med = {}
    for (a, b), g in lat.groupby(["host_a", "host_b"]):
        med[(a, b)] = med[(b, a)] = float(np.median(g["oneway_ns"]))
    rows = []
    for r in bw_raw.itertuples(index=False):
        t = float(r.t_ns) - med.get((r.src, r.dst), 0.0)
        rows.append({"src": r.src, "dst": r.dst, "iter": int(r.iter), "t_ns": float(r.t_ns), "size_bytes": size,
                     "bw_bytes_per_s": size / (t * 1e-9) if t > 0 else float("nan")})
    return _frame(rows, ["src", "dst", "iter", "t_ns", "size_bytes", "bw_bytes_per_s"])


def noise_tables(nodes: pd.DataFrame, rounds: list[int], traces: Path) -> dict[str, pd.DataFrame]:
    """screen.noise (per node, round and CPU: lost fraction, events, longest detour, preemptions of the
    collector) and screen.noise_windows (the lost fraction per 100 ms window) from traces/<host>-r<round>.jtr."""
    from hpcvar.noise.formats import read_jtr

    per, win = [], []
    for host in nodes["host"]:
        for rnd in rounds:
            f = traces / f"{host}-r{rnd}.jtr"
            if not f.is_file():
                continue
            tr = read_jtr(f)
            for c in tr.cpus:
                length = max(c.length, 1)
                per.append({"host": host, "round": rnd, "cpu": c.cpu, "length_s": length / tr.freq_hz,
                            "noise_fraction": float(c.duration.sum()) / length,
                            "events_per_s": c.events / (length / tr.freq_hz),
                            "max_detour_ns": float(c.duration.max()) / tr.freq_hz * 1e9 if c.events else 0.0,
                            "preemptions": int(c.meta.get("nonvoluntary_ctxt_switches") or 0),
                            "overflow": bool(c.meta.get("overflow", False))})
                w = int(NOISE_WINDOW_S * tr.freq_hz)
                nwin = length // w if w else 0
                if nwin:
                    lost = np.bincount(np.minimum(c.starts() // w, nwin - 1), weights=c.duration, minlength=nwin)
                    win += [{"host": host, "round": rnd, "cpu": c.cpu, "window": i, "lost_fraction": float(x) / w}
                            for i, x in enumerate(lost[:nwin])]
    return {"screen.noise": _frame(per, ["host", "round", "cpu", "length_s", "noise_fraction", "events_per_s",
                                         "max_detour_ns", "preemptions", "overflow"]),
            "screen.noise_windows": _frame(win, ["host", "round", "cpu", "window", "lost_fraction"])}
