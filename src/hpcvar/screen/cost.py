"""What an outlier costs a job on the screened nodes.

- A slow link: a ring allreduce of ``RING_BYTES`` over the nodes in their order moves 2 (n - 1) chunks of S / n
  bytes, every step paced by the slowest link of the ring (and its latency):
  T = 2 (n - 1) (max latency + S / n / min bandwidth). The cost is T over the same ring with every link's
  bandwidth at the median of the other (healthy) links, minus 1.
- A slow latency: the same ring with an 8-byte allreduce (latency bound).
- A slow compute kernel: a bulk-synchronous job waits for its slowest node every phase: median speed / speed - 1.
- OS noise: jitSim (hpcvar.sim.jitter) replays the recorded traces on a bulk-synchronous job on these nodes (one
  task per CPU, ``BSP_WORK_S`` of compute then a tree barrier per phase, unsynchronized, ``REPLICAS`` replicas):
  the run time with the noisy nodes as recorded, over the run time with their traces replaced by the median
  node's, minus 1.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from hpcvar.noise.trace import JitterTrace

RING_BYTES = 64 << 20
BSP_WORK_S = 1e-3
REPLICAS = 5
SEED = 1


def ring_time(bw: dict[tuple[str, str], float], lat: dict[frozenset, float], hosts: list[str],
              size: float) -> float:
    """Seconds of a ring allreduce of ``size`` bytes over ``hosts`` in order (bw in bytes/s, lat in s)."""
    n = len(hosts)
    links = [(hosts[i], hosts[(i + 1) % n]) for i in range(n)]
    slow = min(bw.get(link, np.inf) for link in links)
    worst = max(lat.get(frozenset(link), 0.0) for link in links)
    return 2 * (n - 1) * (worst + (size / n) / slow if np.isfinite(slow) else worst)


def link_cost(links: pd.DataFrame, hosts: list[str], metric: str, reference: float) -> tuple[float, str]:
    """The cost of the screen's slow links to a ring allreduce over its nodes: the ring as measured, against the
    same ring with every link's ``metric`` at ``reference`` (the median of the healthy links; B/s or ns)."""
    if len(hosts) < 2 or not reference > 0:
        return float("nan"), ""
    bw = {(r.src, r.dst): r.value for r in links[links["metric"] == "link_bandwidth"].itertuples(index=False)}
    lat = {frozenset((r.src, r.dst)): r.value * 1e-9
           for r in links[links["metric"] == "link_latency"].itertuples(index=False)}
    if metric == "link_bandwidth":
        ref_bw, ref_lat, size = {k: reference for k in bw}, lat, RING_BYTES
    else:
        ref_bw, ref_lat, size = bw, {k: reference * 1e-9 for k in lat}, 8
    t, t0 = ring_time(bw, lat, hosts, size), ring_time(ref_bw, ref_lat, hosts, size)
    if not (t0 > 0 and np.isfinite(t)):
        return float("nan"), ""
    what = f"a {RING_BYTES >> 20} MiB" if metric == "link_bandwidth" else "an 8-byte"
    return t / t0 - 1, (f"{what} ring allreduce over these {len(hosts)} nodes takes {t * 1e3:.3g} ms, "
                        f"{t / t0:.2f}x the {t0 * 1e3:.3g} ms it takes with every link at the others' median")


def throttle_cost(pct: float) -> tuple[float, str]:
    """What a node whose processes' cgroup was throttled ``pct`` % of its CPU time costs at least: its processes
    could run (100 - pct) % of the time, and a bulk-synchronous job waits for its slowest node every phase. At
    least: a quota stops every thread of the group at once until its next period, so a phase that meets it waits
    that long, and its cost is the quota's period as well as its share (jitSim's case of unsynchronized noise)."""
    if not 0 < pct < 100:
        return float("nan"), ""
    c = pct / (100.0 - pct)
    return c, (f"its processes could run {100 - pct:.3g}% of the time: at least {100 * c:+.1f}% run time for a "
               "bulk-synchronous job, which waits for its slowest node every phase")


def compute_cost(value: float, median: float) -> tuple[float, str]:
    if not value > 0:
        return float("nan"), ""
    c = median / value - 1
    return c, (f"a bulk-synchronous job waits for its slowest node every phase: {100 * c:+.0f}% run time "
               "against a node at the median speed")


def _cores(trace: JitterTrace, cores: int, f0: float, length: int):
    from hpcvar.sim.jitter_nodes import rescale, truncate

    return [truncate(rescale(trace.cpus[j % len(trace.cpus)], f0 / trace.freq_hz), length) for j in range(cores)]


def noise_cost(traces: dict[str, JitterTrace], noisy: list[str], typical: str) -> tuple[float, str]:
    """jitSim: the allocation's job with the noisy nodes as recorded, against the same with their traces
    replaced by ``typical``'s (see the module docstring). ``traces``: host -> JitterTrace (one round)."""
    from hpcvar.sim import jitter as J

    hosts = list(traces)
    if len(hosts) < 2 or typical not in traces:
        return float("nan"), ""
    cores = min(len(t.cpus) for t in traces.values())
    f0 = next(iter(traces.values())).freq_hz
    length = min(int(round(c.length * f0 / t.freq_hz)) for t in traces.values() for c in t.cpus)
    work = int(BSP_WORK_S * f0)
    phases = max(10, min(200, int(0.5 * length / max(work, 1))))
    wl = J.Workload(work=work, phases=phases, barrier="tree", arity=2, cores_per_node=cores,
                    trace_nodes=len(hosts))
    ntasks = len(hosts) * cores

    def run(replace: bool) -> float:
        cpus = [c for h in hosts for c in _cores(traces[typical if replace and h in noisy else h], cores, f0,
                                                 length)]
        pr = J.run_point(J.NativeTraces(cpus), wl, ntasks, J.Alignment("unsync"), SEED, REPLICAS, "screen")
        return float(np.mean([o.total for o in pr.replicas]))

    t, t0 = run(False), run(True)
    if not t0 > 0:
        return float("nan"), ""
    c = t / t0 - 1
    return c, (f"jitSim: a bulk-synchronous job on these {len(hosts)} nodes ({ntasks} tasks, "
               f"{BSP_WORK_S * 1e3:g} ms phases and a tree barrier, {phases} phases, {REPLICAS} replicas) runs "
               f"{100 * c:+.1f}% longer with {', '.join(noisy)} as recorded than with "
               f"{'its' if len(noisy) == 1 else 'their'} noise as low as {typical}'s")
