"""jitSim on a multi-node recording (``hpcvar noise record --launcher srun|testbed``): simulated node j draws
from recorded node j mod N, and ``--align measured`` keeps the measured cross-node alignment.

The traces of all nodes are brought to one frequency (the first node's: cycles must mean the same) and one
length (the shortest recorded one), so that positions are comparable and every alignment mode can use
them. With ``measured``, the simulated nodes form groups of N (the recorded node count: simulated nodes
g*N .. g*N+N-1 are group g, node j of a group replays recorded node j). Every group picks one instant T_g,
uniformly in the recorded span (seeded like the other modes: hpcvar.sim.jitter_ref.replica_key), and each
task starts at the position of its node's trace that its node's clock read at T_g (the clock model of
hpcvar.noise.alignment.NodeTrace): inside a group the nodes keep the alignment they were recorded with.
Between groups the recording says what to do: nodes whose noise the recording finds aligned (its verdict,
hpcvar.noise.alignment.analyze) share one instant, T_g = T_0, since their noise has a common cause that
every node would share; otherwise (not aligned, mixed, inconclusive) the groups' instants are independent,
as the noise of nodes that were not recorded together has no relation the recording could show. So up to N
nodes ``measured`` replays the recording as it was, and beyond N it lies between ``sync`` and ``unsync``:
at ``sync`` for aligned noise, towards ``unsync`` for independent noise (docs/jitter-sim.md).
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


def quiet_as_event(c: CpuTrace, where: str) -> CpuTrace:
    """A CPU on which the collector recorded no detour above its threshold, as one event: no jitter, then the whole
    recorded length available (``recorded_cycles`` of its meta). A trace with events is returned as it is."""
    if c.events:
        return c
    length = int(c.meta.get("recorded_cycles", 0))
    if length <= 0:
        from hpcvar.errors import InputFileError

        raise InputFileError(f"CPU {c.cpu} has no detour and no recorded length", where,
                             todo="Record again (the collector writes recorded_cycles with every CPU)")
    return CpuTrace(c.cpu, np.zeros(1, np.int64), np.array([length], np.int64), {**c.meta, "lead_in_cycles": 0})


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
        scaled = [[rescale(quiet_as_event(c, f"node {n.host}"), f0 / n.trace.freq_hz) for c in n.trace.cpus]
                  for n in nodes]
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


# the stream of the groups' instants: its own key, so that group 0's instant stays the replica's (instant_s)
_GROUP_STREAM = 0x6D656173_75726564  # "measured"


def _mix64(z: np.ndarray) -> np.ndarray:
    """splitmix64's output function (hpcvar.sim.jitter_ref.mix64) on an array of uint64 (wrapping arithmetic)."""
    z = z ^ (z >> np.uint64(30))
    z = z * np.uint64(0xBF58476D1CE4E5B9)
    z = z ^ (z >> np.uint64(27))
    z = z * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@dataclass
class MeasuredAlignment:
    traces: NodeTraces
    common: bool | None = None  # the groups share one instant: the recording finds the nodes' noise aligned

    def __post_init__(self) -> None:
        if self.common is None:
            from hpcvar.noise.alignment import analyze

            self.common = analyze(self.traces.nodes)[2]["verdict"] == "aligned"

    def instant_s(self, seed: int, replica: int) -> float:
        """The common instant of a replica (group 0's): uniform in the recorded span."""
        u = mix64(replica_key(seed, replica))
        return (u / 2.0**64) * self.traces.span_s()

    def group_instants_s(self, groups: int, seed: int, replica: int) -> np.ndarray:
        """T_g of groups 0 .. groups-1: T_0 = instant_s; the others T_0 too when ``common``, else each its own
        uniform draw."""
        t = np.full(groups, self.instant_s(seed, replica))
        if not self.common and groups > 1:
            key = np.uint64(replica_key(seed ^ _GROUP_STREAM, replica))
            with np.errstate(over="ignore"):
                u = _mix64(key + np.uint64(0x9E3779B97F4A7C15) * np.arange(2, groups + 1, dtype=np.uint64))
            t[1:] = u.astype(np.float64) / 2.0**64 * self.traces.span_s()
        return t

    def positions(self, t_s: np.ndarray) -> np.ndarray:
        """[instant, node, core] trace positions: NodeTraces.position for an array of instants."""
        nts = self.traces
        cores = len(nts.cores[0])
        out = np.empty((t_s.size, len(nts.nodes), cores), dtype=np.int64)
        for j, n in enumerate(nts.nodes):
            common_ns = n.t0_common_ns + t_s * 1e9
            local_ns = common_ns * (1.0 + n.drift) + n.offset_ns - n.drift * n.t_ref_ns
            local_start = float(n.trace.meta.get("t0_mono_raw_ns", n.t0_common_ns + n.offset_ns))
            rec = (local_ns - local_start) * nts.freq_hz / 1e9
            for c in range(cores):
                lead = int(nts.cores[j][c].meta.get("lead_in_cycles", 0))
                out[:, j, c] = np.rint(rec - lead).astype(np.int64) % nts.length
        return out

    def offsets(self, ntasks: int, cores: int, seed: int, replica: int) -> np.ndarray:
        nn = len(self.traces.nodes)
        i = np.arange(ntasks, dtype=np.int64)
        node = i // cores
        groups = int(node[-1] // nn) + 1 if ntasks else 1
        pos = self.positions(self.group_instants_s(groups, seed, replica))
        return pos[node // nn, node % nn, i % cores]
