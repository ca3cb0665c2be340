"""jitSim on a multi-node recording (``hpcvar noise record --launcher srun|testbed``): simulated node j draws
from recorded node j mod N, and ``--align measured`` keeps the measured cross-node alignment.

The traces of all nodes are brought to one frequency (the first node's: cycles must mean the same) and one
length (the shortest recorded one), so that positions are comparable and every alignment mode can use
them. With ``measured``, every replica picks one common instant T, uniformly in the recorded span (seeded
like the other modes: hpcvar.sim.jitter_ref.replica_key), and each task starts at the position of its node's
trace that its node's clock read at T (the clock model of hpcvar.noise.alignment.NodeTrace).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hpcvar.noise.alignment import NodeTrace
from hpcvar.noise.trace import CpuTrace
from hpcvar.sim.jitter_ref import mix64, replica_key


def rescale(c: CpuTrace, factor: float) -> CpuTrace:
    """The trace at another frequency (cycles x factor, rounded so that the length scales exactly)."""
    if factor == 1.0:
        return c
    ends = np.round(np.cumsum(c.duration + c.gap) * factor).astype(np.int64)
    starts = np.concatenate([[0], ends[:-1]])
    jit_end = np.round((np.cumsum(c.duration + c.gap) - c.gap) * factor).astype(np.int64)
    d = np.maximum(jit_end - starts, 0)
    meta = dict(c.meta)
    meta["lead_in_cycles"] = int(round(int(c.meta.get("lead_in_cycles", 0)) * factor))
    return CpuTrace(c.cpu, d, ends - starts - d, meta)


def truncate(c: CpuTrace, length: int) -> CpuTrace:
    """The first ``length`` cycles of the trace (an event cut at the end keeps what fits)."""
    if c.length <= length:
        return c
    s = c.starts()
    keep = max(1, int(np.searchsorted(s, length, side="left")))
    d, g = c.duration[:keep].copy(), c.gap[:keep].copy()
    d[-1] = min(d[-1], length - s[keep - 1])
    g[-1] = length - s[keep - 1] - d[-1]
    return CpuTrace(c.cpu, d, g, dict(c.meta))


@dataclass
class NodeTraces:
    """The simulation's view of a multi-node recording: per node its core traces, one frequency and length."""

    nodes: list[NodeTrace]
    cores: list[list[CpuTrace]]  # [node][core]
    freq_hz: float
    length: int  # cycles, every trace

    @classmethod
    def build(cls, nodes: list[NodeTrace], cores_per_node: int) -> NodeTraces:
        f0 = nodes[0].trace.freq_hz
        scaled = [[rescale(c, f0 / n.trace.freq_hz) for c in n.trace.cpus] for n in nodes]
        length = min(c.length for cs in scaled for c in cs)
        per = [[truncate(cs[j % len(cs)], length) for j in range(cores_per_node)] for cs in scaled]
        return cls(nodes, per, f0, length)

    def flat(self) -> list[CpuTrace]:
        """Node-major: trace of (node j, core c) at j * cores + c (the core's layout, docs/jitter-sim.md)."""
        return [c for cs in self.cores for c in cs]

    def position(self, j: int, c: int, t_common_s: float) -> int:
        """Trace position (cycles in [0, L)) of node j's core c at common time T (s since the agreed start)."""
        n = self.nodes[j]
        common_ns = n.t0_common_ns + t_common_s * 1e9
        local_ns = common_ns * (1.0 + n.drift) + n.offset_ns - n.drift * n.t_ref_ns
        local_start = float(n.trace.meta.get("t0_mono_raw_ns", n.t0_common_ns + n.offset_ns))
        rec = (local_ns - local_start) * self.freq_hz / 1e9
        lead = int(self.cores[j][c].meta.get("lead_in_cycles", 0))
        return int(round(rec - lead)) % self.length

    def span_s(self) -> float:
        return self.length / self.freq_hz


@dataclass
class MeasuredAlignment:
    traces: NodeTraces

    def instant_s(self, seed: int, replica: int) -> float:
        """The common instant of a replica: uniform in the recorded span."""
        u = mix64(replica_key(seed, replica))
        return (u / 2.0**64) * self.traces.span_s()

    def offsets(self, ntasks: int, cores: int, seed: int, replica: int) -> np.ndarray:
        t = self.instant_s(seed, replica)
        nn = len(self.traces.nodes)
        pos = np.array([[self.traces.position(j, c, t) for c in range(cores)] for j in range(nn)], dtype=np.int64)
        i = np.arange(ntasks, dtype=np.int64)
        return pos[(i // cores) % nn, i % cores]
