"""How noise lines up across nodes: the measurement that decides between jitSim's unsynchronized and
synchronized modes (docs/noise.md, "Noise on every node").

Input: one trace per node, each with its clock model against rank 0 (offset, drift, from the ping-pongs of
hv_noise_nodes). Every detour is put on the common time base (rank 0's clock, seconds from the agreed start).
Then, for every pair of CPUs on two different nodes (on one machine, such as the testbed, a CPU of one
"node" is the same physical CPU as that of another, so those pairs are left out: they share noise
trivially):

- **overlap**: the fraction of A's long detours (``min_detour`` or longer) that overlap in time (within the
  alignment tolerance) a long detour of B, against the fraction expected if B's detours were placed at
  random (B's long detours, each widened by A's mean long detour and the tolerance, cover that share of the
  recording). ``excess = (overlap - expected) / (1 - expected)``: 1 when every detour has a partner, 0 by
  chance alone, negative when they avoid each other. Averaged over both directions.
- **correlation**: Pearson r of the per-window noise fraction (share of each ``window`` lost to detours),
  with a 95% interval from Fisher's z (windows treated as independent: an optimistic interval when noise
  is bursty; the overlap does not rely on it).
- **phase**: at the strongest periodic frequency common to the CPUs (hpcvar.noise.analysis), the phase of
  each CPU's detour train on the common base; a pair's phase difference in [0, 0.5] cycles.

A pair of nodes is *aligned* when the mean excess over its CPU pairs (those with ``MIN_LONG`` long detours
on both sides) is >= ``ALIGNED_EXCESS`` (0.5), *not
aligned* when it is < ``UNALIGNED_EXCESS`` (0.2), else *partly aligned*; *inconclusive* with fewer than
``MIN_LONG`` long detours on either side. The recording is aligned or not aligned when at least two thirds
of the node pairs are, otherwise mixed.

**Steal.** A virtual machine's hypervisor takes its vCPUs one at a time (steal time, in /proc/stat); the
collector sees each such stretch as a detour of that CPU alone, a partner for nothing on another node, and the
excess falls (synthetic: aligned bursts of 20% of each CPU plus 5% steal in 1 ms stretches, excess 1.0 -> 0.32;
a CI run on a VM with 4-7% steal measured 0.32-0.44). Each node's snapshots of /proc/stat before and after the
recording give the steal of each CPU: where it reaches ``STEAL_SHARE`` (10%) of that CPU's long-detour time
(and more than ``STEAL_MIN_TICKS`` ticks), the verdict carries a warning (``steal_warning``) that names the
node and CPU: the alignment found is a lower bound.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from hpcvar.noise import SYNC, UNSYNC
from hpcvar.noise.trace import CpuTrace, JitterTrace, recorded_starts

ALIGNED_EXCESS = 0.5
UNALIGNED_EXCESS = 0.2
MIN_LONG = 10
DEFAULT_MIN_DETOUR_S = 100e-6
DEFAULT_WINDOW_S = 10e-3
STEAL_SHARE = 0.10  # of a CPU's long-detour time: steal this large lowers the excess by a third or more
STEAL_MIN_TICKS = 2  # /proc/stat counts in ticks of 10 ms (USER_HZ 100): one tick alone is rounding


@dataclass
class NodeTrace:
    """One node's trace and its clock against rank 0's: local = common + offset_ns + drift * (common - t_ref)."""

    host: str
    trace: JitterTrace
    offset_ns: float = 0.0  # this node's clock minus rank 0's, at t_ref_ns (rank 0's clock)
    drift: float = 0.0  # d(offset)/dt (dimensionless; ppm * 1e-6)
    t_ref_ns: float = 0.0
    t0_common_ns: float = 0.0  # the agreed start, rank 0's clock
    precision_ns: float = 0.0  # half the best round trip
    boot_id: str = ""

    def to_common_s(self, c: CpuTrace, t_cycles: np.ndarray) -> np.ndarray:
        """Trace times (cycles since this trace's start) -> seconds since the agreed start, rank 0's clock."""
        local_start = float(self.trace.meta.get("t0_mono_raw_ns", self.t0_common_ns + self.offset_ns))
        local = local_start + np.asarray(t_cycles, dtype=np.float64) / self.trace.freq_hz * 1e9
        # invert local = common + offset + drift * (common - t_ref)
        common = (local - self.offset_ns + self.drift * self.t_ref_ns) / (1.0 + self.drift)
        return (common - self.t0_common_ns) / 1e9

    def detours(self, c: CpuTrace) -> tuple[np.ndarray, np.ndarray]:
        """(start_s, end_s) of every detour of CPU ``c`` on the common base."""
        s = recorded_starts(c)
        return self.to_common_s(c, s), self.to_common_s(c, s + c.duration)


def _overlap_fraction(a0, a1, b0, b1, tol: float) -> float:
    """Share of intervals [a0, a1] that overlap some [b0 - tol, b1 + tol] (b sorted by start)."""
    if a0.size == 0:
        return float("nan")
    if b0.size == 0:
        return 0.0
    order = np.argsort(b0)
    b0, b1 = b0[order] - tol, b1[order] + tol
    # running maximum of ends: the furthest any interval starting before x reaches
    reach = np.maximum.accumulate(b1)
    k = np.searchsorted(b0, a1, side="right") - 1  # last b starting at or before a's end
    hit = (k >= 0) & (reach[np.clip(k, 0, None)] >= a0)
    return float(hit.mean())


def _covered_share(b0, b1, widen: float, length: float) -> float:
    """Share of [0, length] covered by the union of [b0 - widen/2, b1 + widen/2]."""
    if b0.size == 0 or length <= 0:
        return 0.0
    order = np.argsort(b0)
    s, e = np.clip(b0[order] - widen / 2, 0, length), np.clip(b1[order] + widen / 2, 0, length)
    total, cur_s, cur_e = 0.0, s[0], e[0]
    for x, y in zip(s[1:], e[1:], strict=True):
        if x > cur_e:
            total += cur_e - cur_s
            cur_s, cur_e = x, y
        else:
            cur_e = max(cur_e, y)
    total += cur_e - cur_s
    return min(1.0, total / length)


def window_fraction(start: np.ndarray, end: np.ndarray, length: float, window: float) -> np.ndarray:
    """Per window of ``window`` seconds over [0, length]: the share lost to detours (intervals split exactly)."""
    n = max(1, int(length // window))
    out = np.zeros(n)
    for a, b in zip(np.clip(start, 0, n * window), np.clip(end, 0, n * window), strict=True):
        i, j = int(a // window), int(b // window)
        if i == j:
            if i < n:
                out[i] += b - a
            continue
        out[i] += (i + 1) * window - a
        if j < n:
            out[j] += b - j * window
        if j > i + 1:
            out[i + 1:min(j, n)] += window
    return np.clip(out / window, 0, 1)


def pearson_ci(x: np.ndarray, y: np.ndarray) -> tuple[float, float, float]:
    """Pearson r and its 95% interval (Fisher z); NaN when either series is constant or too short."""
    n = min(x.size, y.size)
    x, y = x[:n], y[:n]
    if n < 4 or np.std(x) == 0 or np.std(y) == 0:
        return float("nan"), float("nan"), float("nan")
    r = float(np.corrcoef(x, y)[0, 1])
    z, se = math.atanh(max(min(r, 0.999999), -0.999999)), 1.0 / math.sqrt(n - 3)
    return r, math.tanh(z - 1.96 * se), math.tanh(z + 1.96 * se)


def phase_cycles(start_s: np.ndarray, weight: np.ndarray, hz: float) -> float:
    """Phase in cycles [0, 1) of a weighted impulse train at ``hz`` (NaN without events)."""
    if start_s.size == 0 or hz <= 0:
        return float("nan")
    z = np.sum(weight * np.exp(-2j * np.pi * hz * start_s))
    return float((np.angle(z) / (2 * np.pi)) % 1.0) if abs(z) > 0 else float("nan")


def common_frequency(reports: list[dict]) -> float | None:
    """The strongest periodic frequency found on most CPUs (within 1%), from hpcvar.noise.analysis reports."""
    cands = [c["periods"][0]["hz"] for rep in reports for c in rep["cpus"] if c.get("periods")]
    if not cands:
        return None
    best, votes = None, 0
    for f in cands:
        v = sum(abs(g - f) <= 0.01 * f for g in cands)
        if v > votes:
            best, votes = f, v
    return best


def analyze(nodes: list[NodeTrace], min_detour_s: float = DEFAULT_MIN_DETOUR_S, window_s: float = DEFAULT_WINDOW_S,
            hz: float | None = None) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    """(pairs table, windows table, verdict) of the cross-node alignment."""
    per = []  # (node index, cpu id, start, end, long mask, length_s)
    length = min(min(c.length for c in n.trace.cpus) / n.trace.freq_hz for n in nodes) if nodes else 0.0
    for i, n in enumerate(nodes):
        for c in n.trace.cpus:
            s, e = n.detours(c)
            per.append((i, c.cpu, s, e, (e - s) >= min_detour_s))
    tol = max([2 * n.precision_ns / 1e9 for n in nodes] + [0.0])
    for n in nodes:  # a timer-method detour starts up to one interval late
        tol = max(tol, float(n.trace.meta.get("interval_ns", 0)) / 1e9)
    windows = {}
    wrows: list[dict] = []
    for i, cpu, s, e, _ in per:
        w = window_fraction(s, e, length, window_s)
        windows[(i, cpu)] = w
        wrows.extend({"host": nodes[i].host, "cpu": cpu, "window": k, "t_start_s": k * window_s,
                      "noise_fraction": float(v)} for k, v in enumerate(w))
    rows = []
    for a in range(len(nodes)):
        for b in range(a + 1, len(nodes)):
            same_machine = bool(nodes[a].boot_id) and nodes[a].boot_id == nodes[b].boot_id
            for _ia, ca, sa, ea, la in (p for p in per if p[0] == a):
                for _ib, cb, sb, eb, lb in (p for p in per if p[0] == b):
                    if same_machine and ca == cb:
                        continue  # one physical CPU: its noise is the same by construction
                    na, nb = int(la.sum()), int(lb.sum())
                    mean_a = float(np.mean(ea[la] - sa[la])) if na else 0.0
                    mean_b = float(np.mean(eb[lb] - sb[lb])) if nb else 0.0
                    o_ab = _overlap_fraction(sa[la], ea[la], sb[lb], eb[lb], tol)
                    o_ba = _overlap_fraction(sb[lb], eb[lb], sa[la], ea[la], tol)
                    x_ab = _covered_share(sb[lb], eb[lb], mean_a + 2 * tol, length)
                    x_ba = _covered_share(sa[la], ea[la], mean_b + 2 * tol, length)
                    ex = [(o - x) / (1 - x) for o, x in ((o_ab, x_ab), (o_ba, x_ba)) if not math.isnan(o) and x < 1]
                    r, lo, hi = pearson_ci(windows[(a, ca)], windows[(b, cb)])
                    pa = pb = dphi = float("nan")
                    if hz:
                        pa = phase_cycles(sa[la], ea[la] - sa[la], hz)
                        pb = phase_cycles(sb[lb], eb[lb] - sb[lb], hz)
                        d = abs(pa - pb) % 1.0
                        dphi = min(d, 1.0 - d)
                    rows.append({"host_a": nodes[a].host, "cpu_a": ca, "host_b": nodes[b].host, "cpu_b": cb,
                                 "same_machine": same_machine, "long_a": na, "long_b": nb,
                                 "overlap": float(np.nanmean([o_ab, o_ba])) if ex else float("nan"),
                                 "overlap_expected": float(np.mean([x_ab, x_ba])),
                                 "excess": float(np.mean(ex)) if ex else float("nan"),
                                 "corr": r, "corr_ci_lo": lo, "corr_ci_hi": hi,
                                 "phase_hz": float(hz or float("nan")), "phase_diff_cycles": dphi})
    pairs = pd.DataFrame(rows, columns=["host_a", "cpu_a", "host_b", "cpu_b", "same_machine", "long_a", "long_b",
                                        "overlap", "overlap_expected", "excess", "corr", "corr_ci_lo", "corr_ci_hi",
                                        "phase_hz", "phase_diff_cycles"])
    v = verdict(pairs, min_detour_s, window_s, tol)
    v["steal"], v["steal_warning"] = steal_check(nodes, per)
    return pairs, pd.DataFrame(wrows, columns=["host", "cpu", "window", "t_start_s", "noise_fraction"]), v


def steal_check(nodes: list[NodeTrace], per: list[tuple]) -> tuple[list[dict], str | None]:
    """Per node and CPU, the hypervisor's steal during the recording beside the CPU's long-detour time (from
    the trace's /proc/stat snapshots; none without them), and a warning where steal reaches STEAL_SHARE of it."""
    from hpcvar.noise.analysis import USER_HZ, parse_stat

    stats: dict[int, tuple[dict, dict] | None] = {}  # per node: its CPUs before and after, parsed once
    for i, n in enumerate(nodes):
        before, after = n.trace.meta.get("proc_before") or {}, n.trace.meta.get("proc_after") or {}
        ok = before.get("stat") and after.get("stat")
        stats[i] = (parse_stat(before["stat"])["cpus"], parse_stat(after["stat"])["cpus"]) if ok else None
    rows, worst = [], []
    for i, cpu, s, e, long in per:
        b, a = stats[i] or ({}, {})
        if cpu not in b or cpu not in a:
            continue
        ticks = a[cpu]["steal"] - b[cpu]["steal"]
        long_s = float(np.sum((e - s)[long]))
        rows.append({"host": nodes[i].host, "cpu": cpu, "steal_s": ticks / USER_HZ, "long_detour_s": long_s})
        if ticks >= STEAL_MIN_TICKS and ticks / USER_HZ >= STEAL_SHARE * long_s:
            worst.append(rows[-1])
    if not worst:
        return rows, None
    names = ", ".join(f"{r['host']} CPU {r['cpu']} {r['steal_s'] * 1e3:.0f} ms ({r['long_detour_s'] * 1e3:.0f} ms)"
                      for r in worst[:6]) + (f" and {len(worst) - 6} more" if len(worst) > 6 else "")
    return rows, (f"the hypervisor took CPU time (steal) during the recording, {STEAL_SHARE:.0%} or more of the "
                  f"long detours' time on {len(worst)} CPU(s): {names}; each stretch is a detour of one CPU with "
                  f"no partner on other nodes, so the excess overlap and the verdict understate the alignment; "
                  f"record again when the host is quiet, or on nodes that are not virtual machines")


def qualifying(g: pd.DataFrame) -> pd.DataFrame:
    """The CPU pairs with enough long detours on both sides to be judged."""
    return g[g[["long_a", "long_b"]].min(axis=1) >= MIN_LONG] if len(g) else g


def pair_verdict(g: pd.DataFrame) -> str:
    g = qualifying(g)
    if g.empty:
        return "inconclusive"
    ex = float(g["excess"].mean())
    if math.isnan(ex):
        return "inconclusive"
    return "aligned" if ex >= ALIGNED_EXCESS else "not aligned" if ex < UNALIGNED_EXCESS else "partly aligned"


def verdict(pairs: pd.DataFrame, min_detour_s: float, window_s: float, tol_s: float) -> dict:
    """Per node pair and overall, by the rule in the module docstring."""
    nodes = []
    for (ha, hb), g in pairs.groupby(["host_a", "host_b"], sort=False):
        q = qualifying(g)
        nodes.append({"host_a": ha, "host_b": hb, "verdict": pair_verdict(g),
                      "excess": float(q["excess"].mean()) if len(q) else float("nan"),
                      "corr": float(q["corr"].mean()) if len(q) else float("nan"),
                      "cpu_pairs": int(len(q)),
                      "same_machine": bool(g["same_machine"].any()) if len(g) else False})
    counts = {v: sum(n["verdict"] == v for n in nodes) for v in ("aligned", "not aligned", "partly aligned",
                                                                   "inconclusive")}
    decided = len(nodes)
    overall = "inconclusive"
    if decided:
        if counts["aligned"] >= 2 * decided / 3:
            overall = "aligned"
        elif counts["not aligned"] >= 2 * decided / 3:
            overall = "not aligned"
        elif counts["inconclusive"] < decided:
            overall = "mixed"
    mode = {"aligned": SYNC, "not aligned": UNSYNC}.get(overall)
    return {"verdict": overall, "pairs": nodes, "counts": counts, "min_detour_s": min_detour_s, "window_s": window_s,
            "tolerance_s": tol_s, "jitsim_mode": mode,
            "rule": f"pair aligned when the mean excess overlap of its CPU pairs >= {ALIGNED_EXCESS}, not aligned "
                    f"when < {UNALIGNED_EXCESS}; overall when 2/3 of the node pairs agree"}
