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

import numpy as np

from hpcvar.results.store import Run

# the one-line answer (hpcvar.answer, issue 31) as a number: the exit code the commands return for it
ANSWER_CODES = {"OK": 0, "DEGRADED": 3, "UNRELIABLE": 4}
WINDOW_S = 0.1  # the windows of the noise fraction's CI: those of the noise record view's metric
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


def mpi_name(run: Run) -> str:
    """The MPI library of a run in a few words: "MPICH 5.0.2", "Open MPI v5.0.11"."""
    native = (run.info.get("metadata") or {}).get("native") or {}
    lib = str(native.get("mpi_library") or "").split(" MPICH Release")[0].split(",")[0]
    return " ".join(lib.replace("Version:", "").split())


def _hosts(run: Run) -> list[str]:
    native = (run.info.get("metadata") or {}).get("native") or {}
    hosts = [h for h in str(native.get("hosts") or "").split(",") if h]
    return hosts or [str((run.info.get("metadata") or {}).get("host") or "")]


def _noise(run: Run) -> Iterator[Figure]:
    if not run.has_table("noise.summary"):
        return
    default = str((run.info.get("metadata") or {}).get("host") or "")
    windows = _noise_windows(run)
    for r in run.read_table("noise.summary").itertuples(index=False):
        host = str(getattr(r, "host", "") or default)
        labels = {"node": host, "cpu": str(int(r.cpu))}
        lo, hi = _mean_ci(windows.get((host, int(r.cpu))) or windows.get(("", int(r.cpu))) or [])
        yield Figure("noise_lost_ratio", "Share of the CPU's time lost to OS noise (detours)",
                     float(r.noise_fraction), labels, lo, hi)
        yield Figure("noise_longest_detour_seconds", "Longest detour of the CPU", float(r.max_ns) * 1e-9, labels)
        rate, n = float(r.events_per_s), float(r.events)
        half = 1.96 * math.sqrt(n) / float(r.length_s) if n > 0 and float(r.length_s) > 0 else math.nan
        yield Figure("noise_detours_per_second", "Detours per second on the CPU", rate, labels, rate - half,
                     rate + half)


def _noise_windows(run: Run) -> dict[tuple[str, int], list[float]]:
    """The CPU time lost in each 100 ms window, per (node, CPU), from the recording's trace(s) (node '' for a
    recording of this machine)."""
    from hpcvar.noise.formats import load_trace

    paths = [("", run.path / "trace.jtr")] if (run.path / "trace.jtr").is_file() else [
        (p.stem, p) for p in sorted((run.path / "traces").glob("*.jtr"))]
    out: dict[tuple[str, int], list[float]] = {}
    for host, p in paths:
        trace = load_trace(p)
        window = int(WINDOW_S * trace.freq_hz)
        for c in trace.cpus:
            n = int(c.length // window) if window > 0 else 0
            if n < 2:
                continue
            idx = c.starts() // window
            keep = idx < n
            lost = np.bincount(idx[keep], weights=c.duration[keep], minlength=n)[:n] / window
            out[(host, int(c.cpu))] = [float(v) for v in lost]
    return out


def _mean_ci(x: list[float]) -> tuple[float, float]:
    """95% CI of the mean (normal approximation; NaN below 2 values)."""
    if len(x) < 2:
        return math.nan, math.nan
    m = sum(x) / len(x)
    sd = math.sqrt(sum((v - m) ** 2 for v in x) / (len(x) - 1))
    half = 1.96 * sd / math.sqrt(len(x))
    return m - half, m + half


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
    "cpu_throttled": ("node_cpu_throttled_ratio", "Share of the node's CPU time its processes' cgroup was "
                      "throttled by a CPU quota (cpu.stat)", 0.01),
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
