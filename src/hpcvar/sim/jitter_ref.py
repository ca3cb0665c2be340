"""jitSim reference: the slow, obvious, exact implementation of docs/jitter-sim.md.

Everything is Python integers in cycles. It walks the trace event by event, as
the paper's Figure 2 does, and is kept simple on purpose: the C core
(native/sim/jitsim.c, through hpcvar.sim.jitter) must give identical results,
and the tests compare both on many random small cases.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field

GOLDEN = 0x9E3779B97F4A7C15
MASK = (1 << 64) - 1


# ---- the trace and advance() -------------------------------------------------------------------

class RefTrace:
    """One CPU's trace: events (d_k, g_k), starts S_k, length L."""

    def __init__(self, duration, gap):
        self.d = [int(x) for x in duration]
        self.g = [int(x) for x in gap]
        if not self.d or len(self.d) != len(self.g):
            raise ValueError("a trace needs at least one event and as many gaps as durations")
        self.S = [0]
        for dk, gk in zip(self.d, self.g, strict=True):
            self.S.append(self.S[-1] + dk + gk)
        self.L = self.S[-1]
        if sum(self.g) <= 0:
            raise ValueError("a trace needs compute-available time")

    def advance(self, o: int, t: int, w: int) -> int:
        """The earliest t' >= t such that the compute-available time between trace
        positions o+t and o+t' is w (jitter in progress at t is absorbed first; a jitter
        starting exactly when w is reached is not)."""
        if w == 0:
            return t
        now = o + t
        lap, p = divmod(now, self.L)
        k = bisect_right(self.S, p) - 1  # S_k <= p < S_{k+1}
        remaining = w
        while True:
            base = lap * self.L + self.S[k]
            jitter_end = base + self.d[k]
            gap_end = jitter_end + self.g[k]
            if now < jitter_end:
                now = jitter_end  # absorb the jitter in progress
            avail = gap_end - now
            if avail >= remaining:
                return now + remaining - o
            remaining -= avail
            now = gap_end
            k += 1
            if k == len(self.d):
                k = 0
                lap += 1


# ---- seeded offsets (same derivation as the C core) --------------------------------------------

def mix64(z: int) -> int:
    """splitmix64's output function on 64-bit unsigned integers."""
    z &= MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def replica_key(seed: int, replica: int) -> int:
    return mix64(seed + GOLDEN * (replica + 1))


def task_uniform(seed: int, replica: int, task: int) -> int:
    """The 64-bit uniform of task i in replica r: mix64(key_r + GOLDEN * (i + 1))."""
    return mix64(replica_key(seed, replica) + GOLDEN * (task + 1))


def offsets(traces: list[RefTrace], ntasks: int, align: str, seed: int, replica: int = 0,
            window: int = 0, origin: int = 0) -> list[int]:
    """Trace positions of the tasks (task i uses traces[i % K])."""
    key = replica_key(seed, replica)
    shared = mix64(key)
    out = []
    for i in range(ntasks):
        tr = traces[i % len(traces)]
        u = shared if align == "sync" else mix64(key + GOLDEN * (i + 1))
        if align == "cosched":
            r = origin % window
            nw = (tr.L - 1 - r) // window + 1
            out.append(r + ((u * nw) >> 64) * window)
        elif align in ("unsync", "sync"):
            out.append((u * tr.L) >> 64)
        else:
            raise ValueError(f"unknown alignment {align!r}")
    return out


# ---- the BSP simulation -----------------------------------------------------------------------

@dataclass
class RefResult:
    total: int
    phase_end: list[int]
    compute_end: list[list[int]]  # [phase][task]
    next_start: list[list[int]]  # [phase][task]
    absorbed: list[int]  # per task
    extra: dict = field(default_factory=dict)


def simulate(traces: list[RefTrace] | None, offs: list[int], wl) -> RefResult:
    """N phases of compute W + barrier for len(offs) tasks; ``wl`` the workload in cycles (work, phases,
    barrier, arity, send, recv, lat_intra, lat_inter, cores_per_node, trace_nodes: hpcvar.sim.jitter.Workload).
    traces=None: no jitter (the baseline T0). With trace_nodes > 1, ``traces`` holds cores traces per recorded
    node, node-major, and task i (node i // cores) uses recorded node (i // cores) mod trace_nodes."""
    return _RefRun(traces, offs, wl).run()


class _RefRun:
    """One reference simulation: the tasks' traces and offsets, the jitter each absorbed."""

    def __init__(self, traces: list[RefTrace] | None, offs: list[int], wl):
        self.traces, self.offs, self.wl = traces, offs, wl
        self.n = len(offs)
        self.absorbed = [0] * self.n

    def trace(self, i: int) -> RefTrace:
        assert self.traces is not None  # only called with traces
        cores, nodes = self.wl.cores_per_node, self.wl.trace_nodes
        if nodes > 1:
            return self.traces[((i // cores) % nodes) * cores + i % cores]
        return self.traces[i % cores]

    def adv(self, i: int, t: int, w: int) -> int:
        """Task i's clock after w cycles of work from t (stretched by its trace's detours)."""
        if self.traces is None:
            return t + w
        t2 = self.trace(i).advance(self.offs[i], t, w)
        self.absorbed[i] += t2 - t - w
        return t2

    def lat(self, i: int, j: int) -> int:
        cores = self.wl.cores_per_node
        return self.wl.lat_intra if i // cores == j // cores else self.wl.lat_inter

    def run(self) -> RefResult:
        wl, n = self.wl, self.n
        start = [0] * n
        phase_end, ce_all, ns_all = [], [], []
        for _ in range(wl.phases):
            finish = [self.adv(i, start[i], wl.work) for i in range(n)]
            if wl.barrier == "none":
                nxt = [max(finish)] * n
            elif wl.barrier == "tree":
                nxt = self.tree_barrier(finish)
            else:
                raise ValueError(f"unknown barrier {wl.barrier!r}")
            ce_all.append(finish)
            ns_all.append(nxt)
            phase_end.append(max(nxt))
            start = nxt
        return RefResult(total=phase_end[-1] if phase_end else 0, phase_end=phase_end, compute_end=ce_all,
                         next_start=ns_all, absorbed=self.absorbed)

    def tree_barrier(self, finish: list[int]) -> list[int]:
        """The k-ary tree barrier after the phase's work: up (every child before its parent, a parent receives
        in order of arrival), then down; each task's start of the next phase."""
        wl, n, k = self.wl, self.n, self.wl.arity
        children = {i: [c for c in range(k * i + 1, k * i + k + 1) if c < n] for i in range(n)}
        arrive: dict[int, int] = {}  # child -> arrival time of its message at the parent
        up_cursor = [0] * n
        for i in reversed(range(n)):  # every child before its parent
            cur = finish[i]
            for c in sorted(children[i], key=lambda c: (arrive[c], c)):
                cur = self.adv(i, max(cur, arrive[c]), wl.recv)
            if i > 0:
                cur = self.adv(i, cur, wl.send)
                arrive[i] = cur + self.lat(i, (i - 1) // k)
            up_cursor[i] = cur
        release: dict[int, int] = {}
        nxt = [0] * n
        for i in range(n):  # every parent before its children
            cur = up_cursor[i] if i == 0 else self.adv(i, release[i], wl.recv)
            for c in children[i]:
                cur = self.adv(i, cur, wl.send)
                release[c] = cur + self.lat(i, c)
            nxt[i] = cur
        return nxt
