"""The figures of a stored run that monitoring and regression tools take: per node and CPU (OS noise), per pair
of nodes and message size (latency quantiles, bandwidth), per node and link (a screen), the run's time and its
one-line answer. Each is read from the run's declared tables (hpcvar.results.schema), so every run stored by this
hpcvar, and the older runs it reads, give the same figures; a characterization gives its steps' figures.

Units are SI base units (seconds, bytes, ratios of 1), as Prometheus names them.
"""

from __future__ import annotations

import datetime as _dt
import math
from collections.abc import Iterator
from dataclasses import dataclass, field

from hpcvar.results.store import Run

# the one-line answer (hpcvar.answer, issue 31) as a number: the exit code the commands return for it
ANSWER_CODES = {"OK": 0, "DEGRADED": 3, "UNRELIABLE": 4}
LATENCY_QUANTILES = (("0.5", "median_ns"), ("0.9", "p90_ns"), ("0.99", "p99_ns"), ("0.999", "p99_9_ns"))


@dataclass
class Figure:
    name: str  # metric family, without the hpcvar_ prefix, unit last (Prometheus style)
    help: str
    value: float
    labels: dict[str, str] = field(default_factory=dict)
    # a spread for references: the value's 95% CI when the run has one (NaN: none)
    ci_lo: float = math.nan
    ci_hi: float = math.nan


def _seconds(text: object) -> float | None:
    if not isinstance(text, str):
        return None
    try:
        return _dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def run_figures(run: Run) -> list[Figure]:
    """Every figure of ``run`` and of its steps."""
    out = list(_run_time(run))
    out += list(_answer(run))
    for r in [run, *run.children()]:
        fn = _BY_COMMAND.get(str(r.info.get("command")))
        if fn is not None:
            out += list(fn(r))
    return out


def _run_time(run: Run) -> Iterator[Figure]:
    labels = {"command": str(run.info.get("command"))}
    t0, t1 = _seconds(run.info.get("started_utc")), _seconds(run.info.get("ended_utc"))
    if t0 is not None:
        yield Figure("run_start_time_seconds", "When the run started (Unix time)", t0, labels)
    if t0 is not None and t1 is not None:
        yield Figure("run_duration_seconds", "How long the run took", t1 - t0, labels)
    yield Figure("run_complete", "1 when the run completed, 0 when it failed or was interrupted",
                 1.0 if run.info.get("status") == "complete" else 0.0, labels)


def answer_of(run: Run) -> dict | None:
    """The run's one-line answer (OK / DEGRADED / UNRELIABLE) when it has one (characterize, screen)."""
    a = (run.info.get("result") or {}).get("answer")
    return a if isinstance(a, dict) and a.get("status") in ANSWER_CODES else None


def _answer(run: Run) -> Iterator[Figure]:
    a = answer_of(run)
    if a is None:
        return
    labels = {"command": str(run.info.get("command"))}
    yield Figure("verdict", "The run's answer as its exit code: 0 OK, 3 DEGRADED, 4 UNRELIABLE",
                 float(ANSWER_CODES[a["status"]]), labels)
    for status in ANSWER_CODES:
        yield Figure("verdict_state", "1 for the run's answer (OK, DEGRADED or UNRELIABLE), 0 for the others",
                     1.0 if a["status"] == status else 0.0, {**labels, "state": status})


def _hosts(run: Run) -> list[str]:
    native = (run.info.get("metadata") or {}).get("native") or {}
    hosts = [h for h in str(native.get("hosts") or "").split(",") if h]
    return hosts or [str((run.info.get("metadata") or {}).get("host") or "")]


def _noise(run: Run) -> Iterator[Figure]:
    if not run.has_table("noise.summary"):
        return
    default = str((run.info.get("metadata") or {}).get("host") or "")
    for r in run.read_table("noise.summary").itertuples(index=False):
        labels = {"node": str(getattr(r, "host", "") or default), "cpu": str(int(r.cpu))}
        yield Figure("noise_lost_ratio", "Share of the CPU's time lost to OS noise (detours)",
                     float(r.noise_fraction), labels)
        yield Figure("noise_longest_detour_seconds", "Longest detour of the CPU", float(r.max_ns) * 1e-9, labels)
        yield Figure("noise_detours_per_second", "Detours per second on the CPU", float(r.events_per_s), labels)


def _latency(run: Run) -> Iterator[Figure]:
    if not run.has_table("latency.summary"):
        return
    hosts = _hosts(run)
    pair = {"src": hosts[0], "dst": hosts[1] if len(hosts) > 1 else hosts[0]}
    summ = run.read_table("latency.summary").sort_values("size_bytes")
    for r in summ.itertuples(index=False):
        size = {**pair, "size_bytes": str(int(r.size_bytes))}
        for q, col in LATENCY_QUANTILES:
            ci = (float(r.median_ci_lo_ns) * 1e-9, float(r.median_ci_hi_ns) * 1e-9) if q == "0.5" else (math.nan,) * 2
            yield Figure("latency_seconds", "One-way latency (half the ping-pong round trip), by quantile",
                         float(getattr(r, col)) * 1e-9, {**size, "quantile": q}, *ci)
    if len(summ):
        top = summ.iloc[-1]
        bw = float(top["bw_bytes_per_s"])
        slow, fast = float(top["median_ci_hi_ns"]), float(top["median_ci_lo_ns"])
        nbytes = float(top["size_bytes"])
        yield Figure("pingpong_bandwidth_bytes_per_second", "Ping-pong bandwidth at the largest size (size / "
                     "median one-way latency)", bw, {**pair, "size_bytes": str(int(nbytes))},
                     nbytes / slow * 1e9 if slow > 0 else math.nan, nbytes / fast * 1e9 if fast > 0 else math.nan)


# screen's per-node metrics (hpcvar screen, issue 31): table unit -> factor to SI
_SCREEN_NODE = {
    "noise_fraction": ("node_noise_lost_ratio", "Share of the node's CPU time lost to OS noise", 0.01),
    "longest_detour": ("node_longest_detour_seconds", "Longest detour seen on the node", 1e-9),
    "compute_rate": ("node_compute_ops_per_second", "Speed of the node's compute kernel", 1.0),
    "timer_cost": ("node_timer_cost_seconds", "Cost of one clock read on the node", 1e-9),
    "shm_latency": ("node_shm_latency_seconds", "One-way latency between two CPUs of the node", 1e-9),
}
_SCREEN_LINK = {
    "link_bandwidth": ("link_bandwidth_bytes_per_second", "Bandwidth of the link, sender to receiver", 1.0),
    "link_latency": ("link_latency_seconds", "8-byte one-way latency between the two nodes", 1e-9),
}
_UNIT_FACTOR = {"%": 0.01, "ns": 1e-9, "B/s": 1.0, "op/s": 1.0}


def _factor(unit: object, default: float) -> float:
    return _UNIT_FACTOR.get(str(unit), default) if unit is not None else default


def _screen(run: Run) -> Iterator[Figure]:
    if run.has_table("screen.node_metrics"):
        for r in run.read_table("screen.node_metrics").itertuples(index=False):
            spec = _SCREEN_NODE.get(str(r.metric))
            if spec is None:
                continue
            f = _factor(getattr(r, "unit", None), spec[2])
            labels = {"node": str(r.host)}
            yield Figure(spec[0], spec[1], float(r.value) * f, labels, float(r.ci_lo) * f, float(r.ci_hi) * f)
            yield Figure("node_outlier", "1 when the screen's outlier rule flagged the node's figure",
                         1.0 if bool(r.outlier) else 0.0, {**labels, "metric": str(r.metric)})
    if run.has_table("screen.link_metrics"):
        for r in run.read_table("screen.link_metrics").itertuples(index=False):
            spec = _SCREEN_LINK.get(str(r.metric))
            if spec is None:
                continue
            f = _factor(getattr(r, "unit", None), spec[2])
            yield Figure(spec[0], spec[1], float(r.value) * f, {"src": str(r.src), "dst": str(r.dst)},
                         float(r.ci_lo) * f, float(r.ci_hi) * f)


_BY_COMMAND = {"noise record": _noise, "bench latency": _latency, "screen": _screen}
