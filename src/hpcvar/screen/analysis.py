"""From the screen's tables to figures per node and per link, outliers, their attribution and what they cost.

Per node (``node_metrics``): OS noise (the CPU time the collector lost, in 100 ms windows over every CPU and
round: the mean and its bootstrap CI), the longest detour, the compute kernel's speed (iterations per second of
the mean call, which counts the calls a throttled CPU stretched), the cost of a clock read and the 8-byte
latency inside the node (medians with their CIs). Per link (``link_metrics``): the bandwidth of each direction
and the 8-byte one-way latency of each pair (medians with their CIs).

Validity, apart from the values: while a node or a pair was measured, what other processes used of its CPUs
(``/proc/stat`` user+nice+system minus the screen's own CPU time) and the hypervisor's steal, together its
*load* (``load_pct`` in the tables). The outlier rule compares items, so a load that every item had cannot
make one of them stand out; what can is a load some items had more than the others:

- an item measured under more than ``HEAVY_PCT`` of load is *disturbed* (it ran on less than three quarters of
  its CPUs): a finding on it is *suspect*, never *degraded*;
- a node finding is suspect when the node's extra load (over the median of the other nodes) explains at least
  half of its excess (``load_explains``); a link finding when its pairs' extra load over the reference links'
  is ``LOAD_PCT`` points or more;
- a link latency finding is suspect unless each of its pairs' ping-pongs (before and after the bandwidth test,
  and the recheck after every pair) is an outlier on its own (``_Judge.transient``); a node finding unless the
  node stands out in every round (``round_transient``) or its cause was measured (``throttle_cause``);
- a run whose median load is over ``LOAD_PCT`` cannot be OK (a fault smaller than the load could hide in it):
  its answer is UNRELIABLE unless something valid was found (DEGRADED, with the load named), and
  expectations (absolute bounds) are judged only on items under ``LOAD_PCT``.

Outliers by hpcvar.stats.outliers (threshold 3.5, each metric's floor below). Links are attributed
(``link_findings``): a node's links, per direction for bandwidth, are summarised by their median; a node whose
summary is an outlier, and all of whose links are outliers against the links of the other nodes, is the fault
("hv-h2's link"); otherwise the links that are outliers are reported as pairs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from hpcvar.noise.analysis import THROTTLED_SHARE
from hpcvar.stats import mean_ci, median_ci
from hpcvar.stats.outliers import MIN_ITEMS, flag, modified_z, rest_interval
from hpcvar.stats.summary import MODIFIED_Z_THRESHOLD

LOAD_PCT = 10.0  # other processes' and the hypervisor's share of the CPUs: the run-level and relative threshold
STEAL_PCT = 10.0  # the hypervisor's steal: the same threshold as every bench run's warning (metadata)
HEAVY_PCT = 25.0  # above it an item was measured on less than three quarters of its CPUs: disturbed


@dataclass(frozen=True)
class Metric:
    """One screened quantity: its unit, its bad side and the smallest spread assumed (stats.outliers)."""

    name: str
    label: str
    unit: str  # "%", "ns", "B/s", "op/s"
    higher_is_worse: bool
    floor: float = 0.0  # relative MAD floor
    abs_floor: float = 0.0  # absolute MAD floor, in ``unit``
    outliers: bool = True  # judged by the outlier rule (else by expectations only, or by its bound)
    scope: str = "node"
    # a bound of its own, in ``unit``: a value at or beyond it on the bad side is a finding whatever the other
    # nodes' (a quantity measured directly, not inferred from timings compared across nodes)
    bound: float = float("nan")

    def beyond(self, value: float) -> bool:
        """At or beyond the metric's own bound on its bad side (never without a bound, or for NaN)."""
        if not (np.isfinite(self.bound) and np.isfinite(value)):
            return False
        return bool(value >= self.bound) if self.higher_is_worse else bool(value <= self.bound)


# a node whose processes' cgroup was throttled this share of its CPUs or more: the quota is named as the cause of
# its CPU findings, and is a finding of its own (cpu_throttled); the same threshold as a noise recording's
# (hpcvar.noise.analysis.THROTTLED_SHARE), in percent
THROTTLED_PCT = 100.0 * THROTTLED_SHARE


METRICS: dict[str, Metric] = {m.name: m for m in [
    # 0.5 percentage point: an outlier is at least 2.6 points above the median
    Metric("noise_fraction", "OS noise (CPU time lost)", "%", True, abs_floor=0.5),
    # judged by expectations only; a maximum is volatile: expect --from allows 5.19 x 50% of the median above it
    Metric("longest_detour", "longest detour", "ns", True, floor=0.5, outliers=False),
    # 1%: a node 5.2% slower stands out
    Metric("compute_rate", "compute kernel speed", "op/s", False, floor=0.01),
    Metric("timer_cost", "cost of a clock read", "ns", True, floor=0.05, abs_floor=0.5),
    # 10%: inside one node the latency depends on where the two ranks land (cores, caches): on the testbed's
    # clean screens one node's median was 24% above the others' (z 3.3); 52% above the median stands out
    Metric("shm_latency", "8-byte latency inside the node", "ns", True, floor=0.10),
    # 2%: a link 10.4% slower than the median stands out
    Metric("link_bandwidth", "link bandwidth", "B/s", False, floor=0.02, scope="link"),
    # 5%: latency varies more; 26% above the median stands out
    Metric("link_latency", "8-byte one-way latency", "ns", True, floor=0.05, scope="link"),
    # cpu.stat's throttled time of the ranks' cgroup over the node's CPU time: exactly 0 without a quota, and a
    # quota that holds a node's processes back is a fault however noisy the timings that would otherwise show it
    # (on a VM losing 8-15% of its CPUs to exits, a 10% quota's noise was at z 3 to 7.6). The abs floor makes
    # 'expect --from' derive that bound from a good run (median 0 + 5.19 x floor)
    Metric("cpu_throttled", "CPU time throttled by its cgroup's CPU quota", "%", True,
           abs_floor=THROTTLED_PCT * 0.6745 / MODIFIED_Z_THRESHOLD, outliers=False, bound=THROTTLED_PCT),
]}

NODE_COLS = ["host", "metric", "value", "ci_lo", "ci_hi", "n", "unit", "z", "candidate", "outlier", "rest_median",
             "load_pct", "valid", "why", "throttled_pct", "rest_lo", "rest_hi"]
LINK_COLS = ["src", "dst", "metric", "value", "ci_lo", "ci_hi", "n", "unit", "load_pct", "valid", "why", "first",
             "second", "later", "src_throttled_pct", "dst_throttled_pct"]
FINDING_COLS = ["scope", "where", "hosts", "metric", "side", "value", "reference", "ratio", "z", "threshold",
                "links", "status", "why", "cost", "cost_text", "cause"]


# ---- validity ------------------------------------------------------------------------------------------------
def _others_pct(rows: pd.DataFrame, boot: dict[str, str]) -> tuple[float, float]:
    """(other processes' %, steal %) of the CPUs of the machines in ``rows`` (load rows of one or more items):
    per item and machine, the busiest reading minus the screen's own CPU time of every rank there."""
    busy = own = cap = steal = 0.0
    rows = rows if "phase" in rows.columns else rows.assign(phase="all")
    keys = ["item", "a", "b", "round", "phase"]
    for _, g in rows.assign(machine=rows["host"].map(boot)).groupby([*keys, "machine"]):
        busy += float(g["busy_ns"].max())
        own += float(g["own_ns"].sum())
        cap += float(g["cap_ns"].max())
        steal += float(g["steal_ns"].max())
    if cap <= 0:
        return float("nan"), float("nan")
    return max(0.0, 100.0 * (busy - own) / cap), 100.0 * steal / cap


def load_of(others: float, steal: float) -> float:
    """Other processes' and the hypervisor's share of the CPUs (%)."""
    return (others if np.isfinite(others) else 0.0) + (steal if np.isfinite(steal) else 0.0)


def _why(others: float, steal: float, limit: float = HEAVY_PCT) -> str:
    """Why an item is disturbed ('' when its load is under ``limit``)."""
    if not load_of(others, steal) > limit:
        return ""
    parts = []
    if np.isfinite(others) and others > 0.5:
        parts.append(f"other processes used {others:.0f}% of the CPUs meanwhile")
    if np.isfinite(steal) and steal >= 2:
        parts.append(f"the hypervisor stole {steal:.0f}% of the CPUs")
    return " and ".join(parts) + f" (over {limit:g}%)"


def merge_whys(whys) -> str:
    """Several items' reasons as one: 'other processes used 48-60% of the CPUs meanwhile (over 10%)'."""
    import re

    whys = [w for w in whys if w]
    if not whys:
        return ""
    parts = []
    limit = re.findall(r"\(over (\d+)%\)", " ".join(whys))
    for what, tail in (("other processes used", "of the CPUs meanwhile"), ("the hypervisor stole", "of the CPUs")):
        vals = [float(m) for w in whys for m in re.findall(rf"{what} (\d+)% ", w)]
        if vals:
            lo, hi = min(vals), max(vals)
            span = f"{lo:.0f}%" if lo == hi else f"{lo:.0f}-{hi:.0f}%"
            parts.append(f"{what} {span} {tail}")
    if parts:
        parts = [" and ".join(parts) + (f" (over {limit[0]}%)" if limit else "")]
    other = sorted({w for w in whys if not re.search(r"(other processes used|the hypervisor stole) \d+%", w)})
    return "; ".join(parts + other)


PHASE_OF = {"noise_fraction": "noise", "longest_detour": "noise", "compute_rate": "kernel", "shm_latency": "shm"}


def _node_parts(tables: dict[str, pd.DataFrame], metric: str = "") -> dict[str, pd.DataFrame]:
    """host -> the load rows of the node's measurement items, or of the part of them that measured ``metric``
    (PHASE_OF) where the run kept it."""
    load, nodes = tables["screen.load"], tables["screen.nodes"]
    cpus = dict(zip(nodes["host"], nodes["cpus"], strict=True)) if "cpus" in nodes.columns else {}
    phase = PHASE_OF.get(metric, "all")
    if "phase" not in load.columns or not (load["phase"] == phase).any():
        phase = "all"
    whole = load[load["phase"] == "all"] if "phase" in load.columns else load
    part = load[load["phase"] == phase] if "phase" in load.columns else load
    out = {}
    for host in nodes["host"]:
        rows = part[(part["item"] == "node") & (part["host"] == host)]
        if phase != "all" and _wall_s(rows, cpus.get(host)) < MIN_LOAD_WINDOW_S:
            # /proc/stat counts in 10 ms ticks: a part this short (the 8-byte ping-pong inside the node: 100
            # round trips take 0.1-0.5 ms) reads 0% or several 100% of load by rounding; its node item judges it
            rows = whole[(whole["item"] == "node") & (whole["host"] == host)]
        out[host] = rows
    return out


def node_validity(tables: dict[str, pd.DataFrame], metric: str = "") -> dict[str, tuple[float, float, str]]:
    """host -> (others %, steal %, why it is disturbed or '') over the node's measurement items, or over the part
    of them that measured ``metric`` (PHASE_OF) where the run kept it."""
    nodes = tables["screen.nodes"]
    boot = dict(zip(nodes["host"], nodes["boot_id"], strict=True))
    out = {}
    for host, rows in _node_parts(tables, metric).items():
        o, s = _others_pct(rows, boot) if len(rows) else (float("nan"), float("nan"))
        out[host] = (o, s, _why(o, s))
    return out


def _throttled(rows: pd.DataFrame) -> tuple[float, int]:
    """(the share (%) of the CPUs of one node's items during which its processes' cgroup (or an ancestor) was
    throttled by a CPU quota, the items read): per item, the largest reading of its ranks (one group's counter,
    summed over CPUs) over the item's capacity. NaN where no rank could read cpu.stat."""
    per = _throttled_per_item(rows)
    if not len(per):
        return float("nan"), 0
    cap = float(per["cap"].sum())
    return (100.0 * float(per["thr"].sum()) / cap if cap > 0 else float("nan")), len(per)


def _throttled_per_item(rows: pd.DataFrame) -> pd.DataFrame:
    """Per item of one node (that could read cpu.stat): its throttled ns (the largest reading of its ranks) and
    its capacity (wall x CPUs, ns)."""
    if "throttled_ns" not in rows.columns or not rows["throttled_ns"].notna().any():
        return pd.DataFrame({"thr": [], "cap": []})
    keys = [k for k in ("item", "a", "b", "round", "phase") if k in rows.columns]
    per = rows.groupby(keys).agg(thr=("throttled_ns", "max"), cap=("cap_ns", "max"))
    return per[per["thr"].notna()]


def throttled_items(tables: dict[str, pd.DataFrame]) -> dict[str, np.ndarray]:
    """host -> the throttled share (%) of each of its node items (empty where its ranks could not read cpu.stat):
    the samples of the cpu_throttled metric that 'hpcvar history' follows night after night."""
    out = {}
    for host, rows in _node_parts(tables).items():
        per = _throttled_per_item(rows)
        per = per[per["cap"] > 0]
        out[host] = 100.0 * per["thr"].to_numpy(dtype=float) / per["cap"].to_numpy(dtype=float)
    return out


def node_throttled(tables: dict[str, pd.DataFrame], metric: str = "") -> dict[str, tuple[float, int]]:
    """host -> (the share (%) of its CPUs its processes' cgroup was throttled while ``metric`` was measured, NaN
    when not visible to the ranks; the measurement items read)."""
    return {host: _throttled(rows) for host, rows in _node_parts(tables, metric).items()}


MIN_LOAD_WINDOW_S = 0.2  # 20 ticks of /proc/stat: shorter parts are judged by the load of their whole node item


def _wall_s(rows: pd.DataFrame, cpus) -> float:
    """The wall time the load rows of one host's part span (cap_ns = wall x CPUs, one row per rank and mark)."""
    if not len(rows) or not cpus:
        return float("inf")
    keys = [k for k in ("item", "a", "b", "round", "phase") if k in rows.columns]
    return float(rows.groupby(keys)["cap_ns"].max().sum()) / 1e9 / float(cpus)


def check_load(tables: dict[str, pd.DataFrame]) -> list[dict]:
    """The load check before measuring: per node, other processes' and the hypervisor's share of its CPUs."""
    load, nodes = tables["screen.load"], tables["screen.nodes"]
    boot = dict(zip(nodes["host"], nodes["boot_id"], strict=True))
    out = []
    for host in nodes["host"]:
        rows = load[(load["item"] == "check") & (load["host"] == host)]
        if len(rows):
            o, s = _others_pct(rows, boot)
            out.append({"host": host, "others_pct": o, "steal_pct": s, "why": _why(o, s, LOAD_PCT)})
    return out


# ---- per node ------------------------------------------------------------------------------------------------
def _row(host, metric, value, lo, hi, n, validity) -> dict:
    m = METRICS[metric]
    o, s, why = validity
    return {"host": host, "metric": metric, "value": float(value), "ci_lo": float(lo), "ci_hi": float(hi),
            "n": int(n), "unit": m.unit, "z": float("nan"), "candidate": False, "outlier": False,
            "rest_median": float("nan"), "load_pct": load_of(o, s), "valid": not why, "why": why}


def _noise_rows(host, t, validity) -> list[dict]:
    w = t["screen.noise_windows"]
    w = w[w["host"] == host]["lost_fraction"].to_numpy() * 100.0
    per = t["screen.noise"][t["screen.noise"]["host"] == host]
    if not len(per):
        return []
    x = w if w.size else per["noise_fraction"].to_numpy() * 100.0
    lo, hi = mean_ci(x)
    v = validity
    if per["overflow"].any():
        v = (v[0], v[1], "; ".join(p for p in (v[2], "the collector's event buffer filled") if p))
    return [_row(host, "noise_fraction", float(np.mean(x)), lo, hi, x.size, v),
            _row(host, "longest_detour", float(per["max_detour_ns"].max()), float("nan"), float("nan"), len(per), v)]


def _kernel_row(host, t, validity) -> list[dict]:
    """Iterations per second of the mean call (time per iteration: launches may calibrate differently)."""
    k = t["screen.kernel"]
    x = k[k["host"] == host]["ns_per_iter"].dropna().to_numpy()
    if not x.size:
        return []
    lo, hi = mean_ci(x)
    return [_row(host, "compute_rate", 1e9 / np.mean(x), 1e9 / hi, 1e9 / lo, x.size, validity)]


def _median_row(host, metric, x, validity) -> list[dict]:
    if not len(x):
        return []
    lo, hi = median_ci(x)
    return [_row(host, metric, float(np.median(x)), lo, hi, len(x), validity)]


def _throttled_row(host, pct: float, items: int, validity) -> list[dict]:
    """The node's throttled share over all its items (none where its ranks could not read cpu.stat). Read from
    the kernel's counter, it is not disturbed by other processes' load: never marked disturbed."""
    if not np.isfinite(pct):
        return []
    return [_row(host, "cpu_throttled", pct, float("nan"), float("nan"), items, (validity[0], validity[1], ""))]


def node_metrics(t: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """One row per node and metric, judged by the outlier rule among the nodes."""
    valid = {m: node_validity(t, m) for m in ("", "noise_fraction", "compute_rate", "shm_latency")}
    throttled = {m: node_throttled(t, m) for m in valid}
    rows = []
    for host in t["screen.nodes"]["host"]:
        rows += _noise_rows(host, t, valid["noise_fraction"][host])
        rows += _kernel_row(host, t, valid["compute_rate"][host])
        rows += _median_row(host, "timer_cost", t["screen.timer"][t["screen.timer"]["host"] == host]["read_ns"],
                            valid[""][host])
        rows += _median_row(host, "shm_latency", t["screen.shm"][t["screen.shm"]["host"] == host]["oneway_ns"],
                            valid["shm_latency"][host])
        rows += _throttled_row(host, *throttled[""].get(host, (float("nan"), 0)), valid[""][host])
    df = pd.DataFrame(rows, columns=NODE_COLS)
    # the part whose load rows judge a metric
    part = {"longest_detour": "noise_fraction", "timer_cost": "", "cpu_throttled": ""}
    df["throttled_pct"] = [throttled[part.get(m, m)].get(h, (float("nan"), 0))[0]
                           for h, m in zip(df["host"], df["metric"], strict=True)]
    for name, idx in df.groupby("metric").groups.items():
        m = METRICS[str(name)]
        if not m.outliers:
            continue
        g = df.loc[idx]
        flags = flag(g["value"], g["ci_lo"], g["ci_hi"], m.higher_is_worse, m.floor, m.abs_floor)
        df.loc[idx, "z"] = [f.z for f in flags]
        df.loc[idx, "candidate"] = [f.candidate for f in flags]
        df.loc[idx, "outlier"] = [f.outlier for f in flags]
        df.loc[idx, "rest_median"] = [f.rest_median for f in flags]
        df.loc[idx, "rest_lo"] = [f.rest_lo for f in flags]
        df.loc[idx, "rest_hi"] = [f.rest_hi for f in flags]
    return df


# ---- per link ------------------------------------------------------------------------------------------------
def pair_validity(t: dict[str, pd.DataFrame]) -> dict[frozenset, tuple[float, float, str]]:
    load, nodes = t["screen.load"], t["screen.nodes"]
    boot = dict(zip(nodes["host"], nodes["boot_id"], strict=True))
    host = dict(zip(nodes["node"], nodes["host"], strict=True))
    out = {}
    pairs = load[load["item"] == "pair"]
    for (a, b), g in pairs.groupby(["a", "b"]):
        o, s = _others_pct(g, boot)
        out[frozenset((host[a], host[b]))] = (o, s, _why(o, s))
    return out


def pair_throttled(t: dict[str, pd.DataFrame]) -> dict[frozenset, dict[str, float]]:
    """pair -> {end: the share of its CPUs its processes' cgroup was throttled by a CPU quota while the pair was
    measured, %} (NaN for an end that could not read cpu.stat)."""
    load, nodes = t["screen.load"], t["screen.nodes"]
    host = dict(zip(nodes["node"], nodes["host"], strict=True))
    out = {}
    for (a, b), g in load[load["item"] == "pair"].groupby(["a", "b"]):
        out[frozenset((host[a], host[b]))] = {h: _throttled(g[g["host"] == h])[0] for h in (host[a], host[b])}
    return out


def link_metrics(t: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """One row per direction (bandwidth) and per pair (latency, src < dst in node order)."""
    valid = pair_validity(t)
    throttled = pair_throttled(t)
    none = (float("nan"), float("nan"), "")
    rows = []
    for (src, dst), g in t["screen.bw"].groupby(["src", "dst"], sort=False):
        x = g["bw_bytes_per_s"].dropna().to_numpy()
        if x.size:
            lo, hi = median_ci(x)
            o, st, why = valid.get(frozenset((src, dst)), none)
            th = throttled.get(frozenset((src, dst)), {})
            rows.append({"src": src, "dst": dst, "metric": "link_bandwidth", "value": float(np.median(x)),
                         "ci_lo": lo, "ci_hi": hi, "n": int(x.size), "unit": "B/s", "load_pct": load_of(o, st),
                         "valid": not why, "why": why, "first": float("nan"), "second": float("nan"),
                         "later": float("nan"), "src_throttled_pct": th.get(src, float("nan")),
                         "dst_throttled_pct": th.get(dst, float("nan"))})
    for (a, b), g in t["screen.lat"].groupby(["host_a", "host_b"], sort=False):
        x = g["oneway_ns"].to_numpy()
        lo, hi = median_ci(x)
        o, st, why = valid.get(frozenset((a, b)), none)
        th = throttled.get(frozenset((a, b)), {})
        first, second, later = _parts(g)
        rows.append({"src": a, "dst": b, "metric": "link_latency", "value": float(np.median(x)), "ci_lo": lo,
                     "ci_hi": hi, "n": int(x.size), "unit": "ns", "load_pct": load_of(o, st), "valid": not why,
                     "why": why, "first": first, "second": second, "later": later,
                     "src_throttled_pct": th.get(a, float("nan")), "dst_throttled_pct": th.get(b, float("nan"))})
    return pd.DataFrame(rows, columns=LINK_COLS)


def _parts(g: pd.DataFrame) -> tuple[float, float, float]:
    """The medians of a pair's three latency measurements: before its bandwidth test, after it, and the recheck
    after every pair (column ``pass`` 0, 1, 2). Screens stored before the passes were marked measured the halves
    in one go, or rows 0..ceil(n/2)-1 before the bandwidth test and the rest after it, without a recheck: their
    halves are split by iteration."""
    def med(x) -> float:
        return float(np.median(x)) if len(x) else float("nan")

    part = g["pass"] if "pass" in g and len(g) and g["pass"].max() > 0 else None
    if part is None:
        n = int(g["iter"].max()) + 1 if len(g) else 0
        first = g["iter"] < (n + 1) // 2
        return med(g.loc[first, "oneway_ns"]), med(g.loc[~first, "oneway_ns"]), float("nan")
    return med(g.loc[part == 0, "oneway_ns"]), med(g.loc[part == 1, "oneway_ns"]), med(g.loc[part == 2, "oneway_ns"])


@dataclass
class _Judge:
    """The outlier rule of one link metric against a reference set of links."""

    metric: Metric
    med: float
    spread: float
    lo: float
    hi: float

    @classmethod
    def of(cls, m: Metric, ref: pd.DataFrame) -> _Judge:
        v = ref["value"].to_numpy()
        med = float(np.median(v))
        spread = max(float(np.median(np.abs(v - med))), m.floor * abs(med), m.abs_floor)
        lo, hi = rest_interval(v, ref["ci_lo"].to_numpy(), ref["ci_hi"].to_numpy())
        return cls(m, med, spread, lo, hi)

    def z(self, value: float) -> float:
        return 0.6745 * (value - self.med) / self.spread if self.spread > 0 else 0.0

    def stands_out(self, value: float) -> bool:
        """Its point estimate is beyond the threshold on the bad side (no interval checked)."""
        sign = 1.0 if self.metric.higher_is_worse else -1.0
        return sign * self.z(value) > MODIFIED_Z_THRESHOLD

    def bad(self, row) -> bool:
        return self.stands_out(row.value) and not (row.ci_lo <= self.hi and row.ci_hi >= self.lo)

    def transient(self, first: float, second: float, later: float = float("nan")) -> str:
        """Why a finding is not reproduced ('' when it is, or when the metric has no parts): one of its
        measurements (before and after the bandwidth test, and the recheck after every pair) is within the
        others."""
        if not (np.isfinite(first) and np.isfinite(second)):
            return ""
        sign = 1.0 if self.metric.higher_is_worse else -1.0
        names = ["before the bandwidth test", "after it"] + (["after every pair"] if np.isfinite(later) else [])
        zs = [sign * self.z(v) for v in (first, second, later)[:len(names)]]
        return _not_reproduced(zs, f"measurements ({', '.join(names)})", "the others")


def _not_reproduced(zs: list[float], what: str, others: str) -> str:
    """'' when every one of a finding's measurements ``zs`` (z on the bad side) is beyond the threshold; otherwise
    why the finding is a transient."""
    within = sum(z <= MODIFIED_Z_THRESHOLD for z in zs)
    if not within:
        return ""
    return (f"it was not reproduced: of its {len(zs)} {what}, {within} {'is' if within == 1 else 'are'} within "
            f"{others} (z {', '.join(f'{z:+.1f}' for z in zs)}, threshold {MODIFIED_Z_THRESHOLD:g}): a transient")


SIDES = {"link_bandwidth": ("send", "receive"), "link_latency": ("any",)}


def _links_of(df: pd.DataFrame, host: str, side: str) -> pd.DataFrame:
    if side == "send":
        return df[df["src"] == host]
    if side == "receive":
        return df[df["dst"] == host]
    return df[(df["src"] == host) | (df["dst"] == host)]


def _node_summary(df: pd.DataFrame, hosts: list[str], side: str) -> pd.DataFrame:
    rows = []
    for h in hosts:
        g = _links_of(df, h, side)
        if len(g):
            rows.append({"host": h, "value": float(np.median(g["value"])), "ci_lo": float(np.median(g["ci_lo"])),
                         "ci_hi": float(np.median(g["ci_hi"])), "links": len(g),
                         "valid": bool(g["valid"].mean() >= 0.5),
                         "why": merge_whys(g["why"])})
    return pd.DataFrame(rows)


def _finding(scope, where, hosts, m: Metric, side, value, j: _Judge, links, why, cause: str = "") -> dict:
    """A link finding: degraded, or suspect with ``why``."""
    return {"scope": scope, "where": where, "hosts": ",".join(hosts), "metric": m.name, "side": side,
            "value": float(value), "reference": j.med, "ratio": float(value) / j.med if j.med else float("nan"),
            "z": j.z(value), "threshold": MODIFIED_Z_THRESHOLD, "links": int(links),
            "status": "suspect" if why else "degraded", "why": why, "cost": float("nan"), "cost_text": "",
            "cause": cause}


def link_throttle_cause(links: pd.DataFrame, host: str = "") -> str:
    """The cause of a link finding when an end's processes were throttled by its CPU quota 1% or more of its CPU
    time while its links were measured ('' otherwise): for a pair, each end so throttled; for a node's links
    (``host``), that node, by the median of its share over them. A throttled rank answers late whatever the link:
    the node's quota is named, and the link is not cleared either (both can be slow)."""
    if "src_throttled_pct" not in links.columns or not len(links):
        return ""
    src, dst = links["src"].to_numpy(), links["dst"].to_numpy()
    sp, dp = links["src_throttled_pct"].to_numpy(dtype=float), links["dst_throttled_pct"].to_numpy(dtype=float)
    if host:
        share = np.where(src == host, sp, np.where(dst == host, dp, np.nan))
        ends = [(host, float(np.nanmedian(share)) if np.isfinite(share).any() else float("nan"))]
    else:
        ends = [(str(src[0]), float(sp[0])), (str(dst[0]), float(dp[0]))]
    ends = [(h, pct) for h, pct in ends if np.isfinite(pct) and pct >= THROTTLED_PCT]
    if not ends:
        return ""
    meanwhile = "its links were" if len(links) > 1 else "it was"
    if len(ends) == 1:
        (h, pct), = ends
        return (f"{h}'s cgroup's CPU quota throttled its processes for {pct:.1f}% of its CPU time while {meanwhile} "
                "measured (cpu.stat): a throttled rank answers late whatever the link")
    (h1, p1), (h2, p2) = ends
    return (f"{h1}'s and {h2}'s cgroups' CPU quotas throttled their processes for {p1:.1f}% and {p2:.1f}% of their "
            f"CPU time while {meanwhile} measured (cpu.stat): a throttled rank answers late whatever the link")


def _blamed_nodes(df: pd.DataFrame, hosts: list[str], m: Metric) -> dict[tuple[str, str], pd.DataFrame]:
    """(host, side) -> its links, for nodes whose link summary is an outlier among the nodes."""
    out = {}
    for side in SIDES[m.name]:
        s = _node_summary(df, hosts, side)
        if len(s) < MIN_ITEMS:
            continue
        for f, row in zip(flag(s["value"], s["ci_lo"], s["ci_hi"], m.higher_is_worse, m.floor, m.abs_floor),
                          s.itertuples(index=False), strict=True):
            if f.outlier:
                out[(row.host, side)] = _links_of(df, row.host, side)
    return out


def _one_metric_findings(df: pd.DataFrame, hosts: list[str], m: Metric) -> list[dict]:
    if len(df) < MIN_ITEMS:
        return []
    blamed = _blamed_nodes(df, hosts, m)
    suspects = {h for h, _ in blamed}
    ref = df[~df["src"].isin(suspects) & ~df["dst"].isin(suspects)]
    # the links of the other nodes, however few (3 nodes, one slow: the 2 links between the other two; the median
    # of all links would be the slow node's own)
    judge = _Judge.of(m, ref if len(ref) else df)
    found, explained = [], set()
    by_host: dict[str, list[str]] = {}
    for (h, side), links in blamed.items():
        # the node's summary passed the whole rule (z and an interval apart); most of its links must stand out by
        # their medians, not every one, nor by their intervals too: 100 Mbit/s of paced cross traffic into a node
        # of a 200 Mbit/s link takes from a short message anything between its half and nothing (TCP's share of
        # the receiver's queue at that moment: CI saw one of the three links into it at 176-178 Mbit/s in two of
        # its three messages, the others at 87-102), and one message alone stretches a link's interval to the
        # others' (3 messages: the interval of their median is their range)
        out = [judge.stands_out(r.value) for r in links.itertuples(index=False)]
        if 2 * sum(out) > len(out):
            by_host.setdefault(h, []).append(side)
            explained.update(links.index[out])
    ref_load = float(np.median((ref if len(ref) else df)["load_pct"]))
    for h, sides in by_host.items():
        side = "both" if len(sides) == 2 else sides[0]
        links = pd.concat([_links_of(df, h, s) for s in sides]).drop_duplicates()
        why = merge_whys(links["why"]) if links["valid"].mean() < 0.5 else \
            _link_load_explains(float(np.median(links["load_pct"])), ref_load) or \
            judge.transient(*(float(np.median(links[k])) for k in ("first", "second", "later")))
        n_out = int(links.index.isin(list(explained)).sum())  # the links that stand out
        found.append(_finding("node", h, [h], m, side, float(np.median(links["value"])), judge, n_out, why,
                              link_throttle_cause(links, h)))
    for idx, r in df.iterrows():
        # a link beyond the threshold whose interval reaches the reference's is suspect (imprecise)
        if idx in explained or not judge.stands_out(r["value"]):
            continue
        where = f"{r['src']}->{r['dst']}" if m.name == "link_bandwidth" else f"{r['src']}-{r['dst']}"
        why = r["why"] or _link_load_explains(float(r["load_pct"]), ref_load) or \
            judge.transient(float(r["first"]), float(r["second"]), float(r["later"])) or \
            ("" if judge.bad(r) else imprecise(m.name, r["ci_lo"], r["ci_hi"], judge.lo, judge.hi, "links"))
        found.append(_finding("pair", where, [r["src"], r["dst"]], m, "", r["value"], judge, 1, why,
                              link_throttle_cause(df.loc[[idx]])))
    return found


def _link_load_explains(load: float, ref_load: float) -> str:
    """Why a link finding may be load ('' when not): its pairs had LOAD_PCT points more load than the others."""
    extra = load - ref_load
    if extra >= LOAD_PCT:
        return (f"other processes and the hypervisor took {load:.0f}% of the CPUs while it was measured, {extra:.0f} "
                f"points more than while the other links were (over {LOAD_PCT:g})")
    return ""


def link_findings(links: pd.DataFrame, hosts: list[str]) -> list[dict]:
    out = []
    for name in ("link_bandwidth", "link_latency"):
        out += _one_metric_findings(links[links["metric"] == name].reset_index(drop=True), hosts, METRICS[name])
    return out


# a CPU finding is suspect when other processes' extra load on that node explains this share of its excess
LOAD_EXPLAINS = 0.5


def load_explains(r, validity: dict[str, tuple[float, float, str]], throttled: dict[str, float] | None = None) -> str:
    """Why a node's outlier may be other processes' load rather than the node ('' when it is not): their share
    (with the hypervisor's steal) of its CPUs while it was measured exceeds their median share on the other nodes
    by at least LOAD_EXPLAINS of the finding's excess (percentage points of noise, percent of speed). Where nodes
    share one machine (the testbed) a load under HEAVY_PCT still lands on whichever node is measured.

    A node whose processes' cgroup was throttled by a CPU quota (``throttled``: host -> % of its CPUs) left its
    CPUs to whatever else wanted them for that long: load that ran then took nothing from it. Up to that share,
    a node's load is not counted against it (and the quota is named as the finding's cause: ``throttle_cause``)."""
    if not validity or r.host not in validity or not r.rest_median:
        return ""
    thr = throttled or {}

    def taken(h, v) -> float:  # other processes' and the hypervisor's share, less the time the node was throttled
        load = float(v[0]) + (float(v[1]) if np.isfinite(v[1]) else 0.0)
        held = float(thr.get(h, float("nan")))
        return max(0.0, load - held) if np.isfinite(held) and np.isfinite(load) else load

    mine = taken(r.host, validity[r.host])
    rest = [taken(h, v) for h, v in validity.items() if h != r.host and np.isfinite(v[0])]
    if not rest or not np.isfinite(mine):
        return ""
    extra = mine - float(np.median(rest))
    # noise in percentage points; the others in percent of the median of the others, on their bad side
    excess = r.value - r.rest_median if r.metric == "noise_fraction" else 100.0 * abs(r.value / r.rest_median - 1)
    if excess > 0 and extra >= LOAD_EXPLAINS * excess:
        v, held = validity[r.host], float(thr.get(r.host, float("nan")))
        less = f" (less the {held:.1f}% it was throttled)" if np.isfinite(held) and held > 0 else ""
        return (f"other processes and the hypervisor took {load_of(v[0], v[1]):.0f}% of its CPUs meanwhile{less}, "
                f"{extra:.0f} points more than on the other nodes: enough to explain it")
    return ""


THROTTLE_METRICS = ("noise_fraction", "longest_detour", "compute_rate")


def throttle_cause(r) -> str:
    """The cause of a node's CPU finding when its processes' cgroup was throttled ('' otherwise)."""
    thr = float(getattr(r, "throttled_pct", float("nan")))
    if r.metric not in THROTTLE_METRICS or not np.isfinite(thr) or thr < THROTTLED_PCT:
        return ""
    return f"its cgroup's CPU quota throttled its processes for {thr:.1f}% of its CPU time (cpu.stat)"


# A node finding must show in every round (the node's value of that round an outlier among the nodes' values of
# that round): the parts measured in a moment (a 100-round-trip ping-pong inside the node lasts 0.1-0.5 ms; the
# clock reads less), where one burst of load covers every sample of a round, and the noise and the kernel (0.2-1 s
# per round), which a burst of the hypervisor's exits can cover: /proc/stat shows them neither as steal nor as
# load. Per metric: its table, column, and how a round's samples make the round's value.
ROUND_PARTS = {"shm_latency": ("screen.shm", "oneway_ns", "median"),
               "timer_cost": ("screen.timer", "read_ns", "median"),
               "compute_rate": ("screen.kernel", "ns_per_iter", "rate"),  # iterations/s of the round's mean call
               "noise_fraction": ("screen.noise_windows", "lost_fraction", "percent")}  # % of the mean window


def _per_round(tables: dict[str, pd.DataFrame], metric: str) -> pd.Series | None:
    """(round, host) -> the node's value of ``metric`` in that round, as node_metrics computes it over all rounds
    (None when the run kept no rounds of it)."""
    name, col, how = ROUND_PARTS[metric]
    t = tables.get(name)
    if t is None or not len(t) or "round" not in t.columns:
        return None
    g = t.dropna(subset=[col]).groupby(["round", "host"])[col]
    if how == "median":
        return g.median()
    return 1e9 / g.mean() if how == "rate" else 100.0 * g.mean()


def round_transient(r, tables: dict[str, pd.DataFrame]) -> str:
    """Why a node finding is not reproduced ('' when it is, or with fewer than 2 rounds): in some round, that
    node's value is within the other nodes' values of that round (the same rule, ROUND_PARTS)."""
    if r.metric not in ROUND_PARTS:
        return ""
    per = _per_round(tables, r.metric)
    if per is None:
        return ""
    rounds = sorted({k for k, _ in per.index})
    if len(rounds) < 2:
        return ""
    m = METRICS[r.metric]
    sign = 1.0 if m.higher_is_worse else -1.0
    zs = []
    for k in rounds:
        v = per.loc[k]
        if len(v) < MIN_ITEMS or r.host not in v.index:
            return ""
        zs.append(sign * float(modified_z(v.to_numpy(), m.floor, m.abs_floor)[list(v.index).index(r.host)]))
    return _not_reproduced(zs, "rounds", "the other nodes'")


# the flags that add samples to a metric: what "measure longer" names
PRECISION_FLAGS = {"noise_fraction": "--noise, --rounds", "compute_rate": "--kernel, --rounds",
                   "timer_cost": "--timer-samples", "shm_latency": "--shm-iters, --rounds",
                   "link_bandwidth": "--bw-iters", "link_latency": "--lat-iters"}


def imprecise(metric: str, lo: float, hi: float, rest_lo: float, rest_hi: float, others: str) -> str:
    """Why a candidate (beyond the threshold) is no outlier: its interval reaches the other nodes' or links'."""
    from hpcvar.expect import fmt

    return (f"its 95% CI {fmt(metric, lo)} to {fmt(metric, hi)} reaches the other {others}' {fmt(metric, rest_lo)} "
            f"to {fmt(metric, rest_hi)}: at the precision measured it cannot be told from them; measure longer "
            f"({PRECISION_FLAGS[metric]})")


def node_findings(nm: pd.DataFrame, tables: dict[str, pd.DataFrame] | None = None) -> list[dict]:
    """The nodes' outliers; with the tables, each judged against the load of the part that measured it, and
    against its rounds (round_transient). A candidate (beyond the threshold) whose interval reaches the other
    nodes' is a finding too, suspect (``imprecise``), unless its cause was measured: an answer cannot be OK with
    a node standing out at z 6.9 (a CPU quota on a VM whose exits made the noise of every 100 ms window vary)."""
    out = []
    for r in nm[nm["candidate"].astype(bool)].itertuples(index=False):
        ratio = r.value / r.rest_median if r.rest_median else float("nan")
        # the nodes' throttled shares of the part that measured this metric: node_metrics' column
        throttled = dict(zip(nm["host"][nm["metric"] == r.metric], nm["throttled_pct"][nm["metric"] == r.metric],
                             strict=True))
        # a measured cause (a CPU quota) is neither a transient nor a matter of precision
        cause = throttle_cause(r)
        why = r.why or (load_explains(r, node_validity(tables, r.metric), throttled)
                        or (round_transient(r, tables) if not cause else "") if tables is not None else "")
        if not why and not r.outlier and not cause:
            why = imprecise(r.metric, r.ci_lo, r.ci_hi, r.rest_lo, r.rest_hi, "nodes")
        out.append({"scope": "node", "where": r.host, "hosts": r.host, "metric": r.metric, "side": "",
                    "value": r.value, "reference": r.rest_median, "ratio": ratio, "z": r.z,
                    "threshold": MODIFIED_Z_THRESHOLD, "links": 0, "status": "suspect" if why else "degraded",
                    "why": why, "cost": float("nan"), "cost_text": "", "cause": cause})
    return out + bound_findings(nm, {f["where"] for f in out if f["status"] == "degraded" and f["cause"]})


def bound_findings(nm: pd.DataFrame, named: set[str]) -> list[dict]:
    """The nodes at or beyond a metric's own bound (``Metric.bound``: the CPU time a quota throttled), each a
    degraded finding: a counter read from the kernel is neither a transient of the timings nor a matter of their
    precision, nor explained by others' load. Not repeated for a node ``named`` already by a degraded finding with
    its quota as the cause: the same fault, named once."""
    out = []
    for name, g in nm.groupby("metric", sort=False):
        m = METRICS[str(name)]
        if not np.isfinite(m.bound):
            continue
        for r in g.itertuples(index=False):
            if r.host in named or not m.beyond(r.value):
                continue
            rest = g[g["host"] != r.host]["value"].to_numpy(dtype=float)
            ref = float(np.median(rest)) if rest.size else float("nan")
            out.append({"scope": "node", "where": r.host, "hosts": r.host, "metric": m.name, "side": "",
                        "value": float(r.value), "reference": ref, "ratio": r.value / ref if ref else float("nan"),
                        "z": float("nan"), "threshold": m.bound, "links": 0, "status": "degraded", "why": "",
                        "cost": float("nan"), "cost_text": "", "cause": ""})
    return out


def largest_z(nm: pd.DataFrame, links: pd.DataFrame) -> dict:
    """The largest |z| on the bad side of any judged item (how far the cleanest run was from a finding)."""
    best = {"z": 0.0, "metric": "", "where": ""}
    for r in nm.itertuples(index=False):
        m = METRICS[r.metric]
        bad = r.z if m.higher_is_worse else -r.z
        if m.outliers and np.isfinite(bad) and bad > best["z"]:
            best = {"z": float(bad), "metric": r.metric, "where": r.host}
    for name in ("link_bandwidth", "link_latency"):
        g = links[links["metric"] == name]
        if len(g) < MIN_ITEMS:
            continue
        m = METRICS[name]
        z = modified_z(g["value"].to_numpy(), m.floor, m.abs_floor) * (1 if m.higher_is_worse else -1)
        i = int(np.argmax(z))
        if z[i] > best["z"]:
            best = {"z": float(z[i]), "metric": name, "where": f"{g['src'].iloc[i]}->{g['dst'].iloc[i]}"}
    return best


# ---- the answer ----------------------------------------------------------------------------------------------
SIDE_TEXT = {"send": "link (sending)", "receive": "link (receiving)", "both": "link (both ways)", "": "link",
             "any": "links"}


def ordered(findings: pd.DataFrame) -> pd.DataFrame:
    """Findings by how far they stand out (|z|), the farthest first: what the one line names first."""
    if findings.empty:
        return findings
    return findings.iloc[np.argsort(-np.abs(findings["z"].fillna(0).to_numpy()), kind="stable")].reset_index(drop=True)


def finding_text(f: dict) -> str:
    """'hv-h2's link bandwidth (both ways) 95.3 Mbit/s, 0.50x the median of the others 190 Mbit/s (z -12.4,
    threshold 3.5)'."""
    from hpcvar.expect import fmt

    m = METRICS[f["metric"]]
    if f["scope"] == "node" and m.scope == "link":
        what = f"{f['where']}'s {m.label}" + ({"send": " sending", "receive": " receiving", "both": " both ways"}
                                              .get(f["side"], "") if f["metric"] == "link_bandwidth" else "")
    elif f["scope"] == "pair":
        what = f"link {f['where']}'s {m.label}"
    else:
        what = f"{f['where']}'s {m.label}"
    if np.isfinite(m.bound):  # judged by its own bound, not against the others
        return (f"{what} {fmt(f['metric'], f['value'])} ({'at most' if m.higher_is_worse else 'at least'} "
                f"{fmt(f['metric'], m.bound)}; the median of the others {fmt(f['metric'], f['reference'])})")
    return (f"{what} {fmt(f['metric'], f['value'])}, {f['ratio']:.3g}x the median of the others "
            f"{fmt(f['metric'], f['reference'])} (z {f['z']:+.1f}, threshold {f['threshold']:g})"
            + (f": {f['cause']}" if f.get("cause") else ""))


def run_load(nm: pd.DataFrame, links: pd.DataFrame) -> float:
    """The screen's median load (%) over its nodes' and links' measurements."""
    per_node = nm.groupby("host")["load_pct"].first() if len(nm) else pd.Series(dtype=float)
    vals = np.concatenate([per_node.to_numpy(dtype=float), links["load_pct"].to_numpy(dtype=float)])
    vals = vals[np.isfinite(vals)]
    return float(np.median(vals)) if vals.size else 0.0


def answer(nodes: int, pairs: int, nm: pd.DataFrame, links: pd.DataFrame, findings: pd.DataFrame,
           checks: pd.DataFrame | None, expect_path: str | None):
    """OK / DEGRADED / UNRELIABLE (hpcvar.answer) from the findings, the expectations and the validity."""
    from hpcvar.answer import decide
    from hpcvar.expect import failure_text

    found = [finding_text(f) for f in findings.to_dict("records") if f["status"] == "degraded"]
    reasons = [f"{finding_text(f)}, but {f['why']}" for f in findings.to_dict("records") if f["status"] == "suspect"]
    if checks is not None and len(checks):
        failed = checks[checks["status"] == "failed"]
        found += [failure_text(c) for c in failed.to_dict("records") if c["valid"]]
        reasons += [f"{failure_text(c)}, but {c['why']}" for c in failed.to_dict("records") if not c["valid"]]
    if nodes < MIN_ITEMS and not expect_path:
        reasons.append(f"{nodes} node(s): an outlier needs {MIN_ITEMS} or more nodes to compare, and no "
                       "expectations were given (--expect FILE)")
    few = [(METRICS[str(name)].label, int(g["valid"].sum()), len(g), merge_whys(g["why"]))
           for name, g in nm.groupby("metric", sort=False)
           if METRICS[str(name)].outliers and nodes >= MIN_ITEMS and g["valid"].sum() < MIN_ITEMS]
    for (ok, total, why), group in pd.DataFrame(few, columns=["label", "ok", "total", "why"]).groupby(
            ["ok", "total", "why"], sort=False):
        reasons.append(f"{', '.join(group['label'])}: only {ok} of {total} nodes measured undisturbed ({why})")
    load = run_load(nm, links)
    if load > LOAD_PCT:
        reasons.append(f"other processes and the hypervisor took a median {load:.0f}% of the CPUs while the nodes and "
                       f"links were measured (over {LOAD_PCT:g}%): a fault smaller than that load could hide in it")
    best = largest_z(nm, links)
    basis = (f"{nodes} nodes, {pairs} pairs, no outlier (largest z {best['z']:.1f} on the bad side: "
             f"{best['metric'].replace('_', ' ')} of {best['where']}; threshold {MODIFIED_Z_THRESHOLD:g})"
             if best["metric"] else f"{nodes} nodes, {pairs} pairs, no outlier")
    if checks is not None and len(checks):
        basis += f"; {int((checks['status'] != 'failed').sum())} of {len(checks)} expectations met ({expect_path})"
    return decide(found, reasons, basis)
