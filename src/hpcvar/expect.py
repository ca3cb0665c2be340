"""Site expectations: what a site expects of its nodes and links, in a TOML file it keeps, and the judgement of
stored runs against it (``--expect FILE`` on screen, characterize, report and compare; ``hpcvar expect --from
RUN`` writes one from a good run). Format (docs/screen.md, "Expectations")::

    version = 1

    [[expect]]
    name = "compute nodes"            # shown in verdicts
    hosts = ["cn[001-128]", "gpu*"]   # Slurm ranges or shell patterns; default: every host
    partition = "batch"               # optional: only runs made in this Slurm partition
    link_bandwidth = { min = "11GB/s" }
    link_latency = { max = "2.5us" }
    noise_fraction = { max = "1%" }
    longest_detour = { max = "500us" }
    compute_rate = { value = "2.4e9 op/s", tolerance = "5%" }

A metric takes ``min`` and/or ``max``, or ``value`` with ``tolerance`` (a share, ``"10%"``, or a quantity with the
metric's unit) applied on the metric's bad side only (a faster link is no failure); ``how`` is a free comment
(``expect --from`` says there how it derived the bound). Units are required: rates as tc rates (``180mbit``) or
bytes per second (``22MB/s``), times with their unit, shares with ``%``, the kernel's speed in ``op/s``.

For each host (a node metric) or pair of hosts (a link metric: both ends must match), the first group in the
file that matches and names the metric judges it. A value fails its bound only when its whole 95% CI is beyond
it: a value beyond the bound whose CI reaches back is "within its CI" (a pass, noted).
"""

from __future__ import annotations

import fnmatch
import math
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from hpcvar import units
from hpcvar.errors import InputFileError, UsageError, read_user_text

FORMAT_VERSION = 1
METRIC_UNITS = {  # metric -> (unit of the stored values, higher is worse, how it is written)
    "link_bandwidth": ("B/s", False, "rate"), "link_latency": ("ns", True, "time"),
    "noise_fraction": ("%", True, "share"), "longest_detour": ("ns", True, "time"),
    "compute_rate": ("op/s", False, "ops"), "timer_cost": ("ns", True, "time"),
    "shm_latency": ("ns", True, "time"), "cpu_throttled": ("%", True, "share"),
}
LINK_METRICS = ("link_bandwidth", "link_latency")
GROUP_KEYS = {"name", "hosts", "partition"}
SPEC_KEYS = {"min", "max", "value", "tolerance", "how"}


@dataclass
class Bound:
    metric: str
    lo: float | None  # in the stored unit
    hi: float | None
    how: str
    line: int | None


@dataclass
class Group:
    name: str
    hosts: list[str]
    partition: str | None
    bounds: dict[str, Bound]
    line: int | None

    def matches(self, hosts: tuple[str, ...], partition: str | None) -> bool:
        if self.partition is not None and self.partition != partition:
            return False
        return not self.hosts or all(any(host_matches(h, p) for p in self.hosts) for h in hosts)


@dataclass
class Expectations:
    path: str
    groups: list[Group] = field(default_factory=list)

    def bound_for(self, metric: str, hosts: tuple[str, ...], partition: str | None) -> tuple[Group, Bound] | None:
        for g in self.groups:
            if metric in g.bounds and g.matches(hosts, partition):
                return g, g.bounds[metric]
        return None


@dataclass
class Observation:
    """One measured value to judge: a node's (one host) or a link's (two hosts)."""

    metric: str
    hosts: tuple[str, ...]
    value: float
    lo: float = float("nan")
    hi: float = float("nan")
    valid: bool = True
    why: str = ""
    run: str = ""

    @property
    def where(self) -> str:
        return self.hosts[0] if len(self.hosts) == 1 else f"{self.hosts[0]}->{self.hosts[1]}"


# ---- host patterns -----------------------------------------------------------------------------------------
_RANGE = re.compile(r"\[([0-9]+(?:-[0-9]+)?(?:,[0-9]+(?:-[0-9]+)?)*)\]")


def expand_hostlist(pattern: str) -> list[str]:
    """Slurm host ranges: 'cn[001-003,010]' -> cn001, cn002, cn003, cn010 (every bracket expanded)."""
    m = _RANGE.search(pattern)
    if not m:
        return [pattern]
    out = []
    for part in m.group(1).split(","):
        a, _, b = part.partition("-")
        width = len(a)
        for k in range(int(a), int(b or a) + 1):
            out += expand_hostlist(pattern[:m.start()] + f"{k:0{width}d}" + pattern[m.end():])
    return out


def host_matches(host: str, pattern: str) -> bool:
    if _RANGE.search(pattern):
        return host in expand_hostlist(pattern)
    return fnmatch.fnmatchcase(host, pattern)


# ---- reading -----------------------------------------------------------------------------------------------
def _line_of(text: str, index: int, key: str | None) -> int | None:
    """The line of the ``index``-th [[expect]] header, or of ``key`` inside that group."""
    lines = text.splitlines()
    seen, start = -1, None
    for i, line in enumerate(lines):
        if re.match(r"\s*\[\[\s*expect\s*\]\]", line):
            seen += 1
            if seen == index:
                start = i
            elif start is not None:
                break
        elif start is not None and key and re.match(rf"\s*{re.escape(key)}\s*[=.]", line):
            return i + 1
    return start + 1 if start is not None else None


def _quantity(metric: str, v, where: str, line: int | None) -> float:
    """A bound's value in the metric's stored unit."""
    _, _, kind = METRIC_UNITS[metric]
    text = str(v).strip()
    try:
        if kind == "rate":
            return units.parse_byte_rate(text, where)
        if kind == "time":
            return units.parse_time(text, where) * 1e9
        if kind == "share":
            m = re.fullmatch(r"([0-9]*\.?[0-9]+(?:[eE][-+]?\d+)?)\s*%", text)
            if not m:
                raise UsageError(f"'{text}' is not a share", where, "Write it with %, e.g. \"2%\"")
            return float(m.group(1))
        m = re.fullmatch(r"([0-9]*\.?[0-9]+(?:[eE][-+]?\d+)?)\s*(k|M|G)?op/s", text)
        if not m:
            raise UsageError(f"'{text}' is not a speed", where, "Write it in op/s, e.g. \"2.4e9 op/s\" or \"2.4Gop/s\"")
        return float(m.group(1)) * {None: 1, "k": 1e3, "M": 1e6, "G": 1e9}[m.group(2)]
    except UsageError as e:
        raise InputFileError(f"{metric}: {e.what}", where.split(":")[0], line, todo=e.todo) from None


def _bound(metric: str, spec, path: str, line: int | None) -> Bound:
    if not isinstance(spec, dict):
        raise InputFileError(f"{metric} must be a table such as {{ max = \"...\" }}", path, line,
                             todo="Give min, max, or value and tolerance")
    unknown = sorted(set(spec) - SPEC_KEYS)
    if unknown:
        raise InputFileError(f"{metric}: unknown key '{unknown[0]}'", path, line,
                             todo=f"Use {', '.join(sorted(SPEC_KEYS))}")
    q = {k: _quantity(metric, spec[k], path, line) for k in ("min", "max", "value") if k in spec}
    lo, hi = q.get("min"), q.get("max")
    if "value" in q:
        if "tolerance" not in spec:
            raise InputFileError(f"{metric}: a value needs a tolerance", path, line, todo='Add tolerance = "10%"')
        tol = str(spec["tolerance"]).strip()
        margin = float(tol[:-1]) / 100 * q["value"] if tol.endswith("%") else _quantity(metric, tol, path, line)
        if METRIC_UNITS[metric][1]:
            hi = q["value"] + margin
        else:
            lo = q["value"] - margin
    if lo is None and hi is None:
        raise InputFileError(f"{metric} sets no bound", path, line, todo="Give min, max, or value and tolerance")
    return Bound(metric, lo, hi, str(spec.get("how", "")), line)


def _group(i: int, g, path: str, text: str) -> Group:
    line = _line_of(text, i, None)
    if not isinstance(g, dict):
        raise InputFileError("an [[expect]] entry is not a table", path, line)
    unknown = [k for k in g if k not in GROUP_KEYS and k not in METRIC_UNITS]
    if unknown:
        raise InputFileError(f"unknown key '{unknown[0]}' in [[expect]] number {i + 1}", path,
                             _line_of(text, i, unknown[0]), todo=f"Metrics are {', '.join(METRIC_UNITS)}")
    hosts = g.get("hosts", [])
    if isinstance(hosts, str):
        hosts = [hosts]
    if not isinstance(hosts, list) or not all(isinstance(h, str) for h in hosts):
        raise InputFileError("hosts must be a list of patterns", path, _line_of(text, i, "hosts"),
                             todo='Write hosts = ["cn[001-064]", "gpu*"]')
    bounds = {m: _bound(m, g[m], path, _line_of(text, i, m)) for m in METRIC_UNITS if m in g}
    return Group(str(g.get("name", f"group {i + 1}")), hosts, g.get("partition"), bounds, line)


def load(path: str | Path) -> Expectations:
    """Read and check an expectations file; errors name file:line and the key."""
    p = str(path)
    return parse(read_user_text(p, todo="Give an expectations file (TOML)"), p)


def parse(text: str, path: str = "expectations") -> Expectations:
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        m = re.search(r"line (\d+), column (\d+)", str(e))
        raise InputFileError(f"not valid TOML: {str(e).split(' (at ')[0]}", path,
                             int(m.group(1)) if m else None, int(m.group(2)) if m else None,
                             todo="Fix the syntax (https://toml.io)") from None
    if doc.get("version", FORMAT_VERSION) != FORMAT_VERSION:
        raise InputFileError(f"unknown expectations version {doc.get('version')!r} (this hpcvar reads "
                             f"{FORMAT_VERSION})", path, _top_line(text, "version"))
    unknown = [k for k in doc if k not in ("version", "expect")]
    if unknown:
        raise InputFileError(f"unknown top-level key '{unknown[0]}'", path, _top_line(text, unknown[0]),
                             todo="Put expectations in [[expect]] groups")
    groups = doc.get("expect", [])
    if not isinstance(groups, list) or not groups:
        raise InputFileError("no [[expect]] group", path, todo="Add one (docs/screen.md shows the format)")
    return Expectations(path, [_group(i, g, path, text) for i, g in enumerate(groups)])


def _top_line(text: str, key: str) -> int | None:
    for i, line in enumerate(text.splitlines()):
        if re.match(rf"\s*\[?{re.escape(key)}\b", line):
            return i + 1
    return None


# ---- judging -----------------------------------------------------------------------------------------------
def fmt(metric: str, v: float | None) -> str:
    if v is None or not math.isfinite(v):
        return "-"
    u = METRIC_UNITS[metric][0]
    if u == "B/s":
        return f"{v * 8 / 1e6:.4g} Mbit/s"
    if u == "ns":
        return units.format_time_ns(v)
    if u == "%":
        return f"{v:.3g}%"
    for unit, mult in (("Gop/s", 1e9), ("Mop/s", 1e6), ("kop/s", 1e3)):
        if abs(v) >= mult:
            return f"{v / mult:.4g} {unit}"
    return f"{v:.4g} op/s"


def judge(exp: Expectations, observations: list[Observation], partition: str | None = None) -> list[dict]:
    """One check per observation that an expectation covers: status failed / passed / within its CI."""
    out = []
    for o in observations:
        hit = exp.bound_for(o.metric, o.hosts, partition)
        if hit is None:
            continue
        g, b = hit
        lo = o.lo if math.isfinite(o.lo) else o.value
        hi = o.hi if math.isfinite(o.hi) else o.value
        beyond = (b.lo is not None and o.value < b.lo) or (b.hi is not None and o.value > b.hi)
        whole = (b.lo is not None and hi < b.lo) or (b.hi is not None and lo > b.hi)
        status = "failed" if whole else "within its CI" if beyond else "passed"
        bound = " and ".join(t for t in ((f">= {fmt(o.metric, b.lo)}" if b.lo is not None else ""),
                                         (f"<= {fmt(o.metric, b.hi)}" if b.hi is not None else "")) if t)
        out.append({"metric": o.metric, "where": o.where, "hosts": ",".join(o.hosts), "value": o.value,
                    "ci_lo": o.lo, "ci_hi": o.hi, "lo": b.lo, "hi": b.hi, "bound": bound, "status": status,
                    "group": g.name, "source": f"{exp.path}:{b.line}" if b.line else exp.path,
                    "valid": o.valid, "why": o.why, "run": o.run})
    return out


def failure_text(c: dict) -> str:
    return (f"{c['where']}'s {c['metric'].replace('_', ' ')} {fmt(c['metric'], c['value'])} is outside the expected "
            f"{c['bound']} ({c['group']}, {c['source']})")


# ---- deriving ----------------------------------------------------------------------------------------------
def outliers_of(run) -> set[tuple[str, tuple[str, ...]]]:
    """(metric, hosts) of the items a screen found to stand out (a node's link finding: all its links), which
    expectations are not derived from."""
    out: set[tuple[str, tuple[str, ...]]] = set()
    if run.info.get("command") == "characterize":
        for child in run.children():
            out |= outliers_of(child)
        return out
    findings = (run.info.get("result") or {}).get("findings") or [] if run.info.get("command") == "screen" else []
    links = run.read_table("screen.link_metrics") if findings and run.has_table("screen.link_metrics") else None
    for f in findings:
        hosts = tuple(f["hosts"].split(","))
        if f["metric"] in LINK_METRICS and f["scope"] == "node" and links is not None:
            g = links[(links["metric"] == f["metric"]) & ((links["src"] == hosts[0]) | (links["dst"] == hosts[0]))]
            out |= {(f["metric"], (r.src, r.dst)) for r in g.itertuples(index=False)}
        else:
            out.add((f["metric"], hosts))
    return out


def derive(observations: list[Observation], floors: dict[str, tuple[float, float]], hosts: list[str],
           source: str, partition: str | None = None, outliers: set | None = None) -> str:
    """An expectations file from a good run: per metric, median -/+ max(5.19 MAD', 2 x the median CI half-width),
    MAD' = max(MAD, floor x median, abs floor) (the outlier rule's own threshold; hpcvar.stats.outliers); the
    items of ``outliers`` ((metric, hosts)) and disturbed ones are left out."""
    outliers = outliers or set()
    lines = [f"# hpcvar expectations derived from {source}", "# (hpcvar expect --from; docs/screen.md)",
             f"version = {FORMAT_VERSION}", "", "[[expect]]", f'name = "derived from {Path(source).name}"',
             "hosts = [" + ", ".join(f'"{h}"' for h in hosts) + "]"]
    if partition:
        lines.append(f'partition = "{partition}"')
    for metric in METRIC_UNITS:
        every = [o for o in observations if o.metric == metric]
        obs = [o for o in every if o.valid and math.isfinite(o.value) and (metric, o.hosts) not in outliers]
        if not obs:
            continue
        lines.append(_derived_line(metric, obs, *floors.get(metric, (0.0, 0.0)), left_out=len(every) - len(obs)))
    return "\n".join(lines) + "\n"


def _derived_line(metric: str, obs: list[Observation], floor: float, abs_floor: float, left_out: int = 0) -> str:
    v = np.array([o.value for o in obs])
    half = np.array([(o.hi - o.lo) / 2 for o in obs if math.isfinite(o.hi) and math.isfinite(o.lo)])
    med = float(np.median(v))
    mad = float(np.median(np.abs(v - med)))
    spread = max(mad, floor * abs(med), abs_floor)
    k = 3.5 / 0.6745
    ci = 2 * float(np.median(half)) if half.size else 0.0
    margin = max(k * spread, ci)
    worse_high = METRIC_UNITS[metric][1]
    bound = med + margin if worse_high else max(med - margin, 0.0)
    which = "max" if worse_high else "min"
    how = (f"median of {v.size} {'links' if metric in LINK_METRICS else 'nodes'}"
           f"{f' ({left_out} outliers or disturbed left out)' if left_out else ''} {fmt(metric, med)} "
           f"{'+' if worse_high else '-'} max(5.19 x MAD' = {fmt(metric, k * spread)} (MAD {fmt(metric, mad)}, "
           f"floor {100 * floor:g}% of the median or {fmt(metric, abs_floor) if abs_floor else '0'}), "
           f"2 x median CI half-width = {fmt(metric, ci)})")
    return f'{metric} = {{ {which} = "{_written(metric, bound)}", how = "{how}" }}'


def _written(metric: str, v: float) -> str:
    kind = METRIC_UNITS[metric][2]
    if kind == "rate":
        return f"{v * 8 / 1e6:.6g}mbit"
    if kind == "time":
        return f"{v:.4g}ns" if v < 1e3 else f"{v / 1e3:.6g}us" if v < 1e6 else f"{v / 1e6:.6g}ms"
    if kind == "share":
        return f"{v:.4g}%"
    return f"{v / 1e9:.6g}Gop/s" if v >= 1e9 else f"{v / 1e6:.6g}Mop/s"


# ---- what runs measured ------------------------------------------------------------------------------------
def observations_of(run) -> list[Observation]:
    """The judged quantities of a stored run: a screen's nodes and links, a latency run's link (two hosts), a
    noise recording's nodes; a characterization's steps together."""
    cmd = run.info.get("command")
    if cmd == "characterize":
        return [o for child in run.children() for o in observations_of(child)]
    if cmd == "screen":
        return _screen_obs(run)
    if cmd == "bench latency" and run.has_table("latency.summary"):
        return _latency_obs(run)
    if cmd == "noise record" and run.has_table("noise.summary"):
        return _noise_obs(run)
    return []


def _screen_obs(run) -> list[Observation]:
    nm = run.read_table("screen.node_metrics") if run.has_table("screen.node_metrics") else None
    lm = run.read_table("screen.link_metrics") if run.has_table("screen.link_metrics") else None
    return screen_observations(nm, lm, run.id)


def screen_observations(nm, lm, run_id: str = "") -> list[Observation]:
    """A screen's node and link figures (screen.node_metrics, screen.link_metrics) as observations."""
    out = []
    for r in nm.itertuples(index=False) if nm is not None else []:
        out.append(Observation(r.metric, (r.host,), r.value, r.ci_lo, r.ci_hi, *_absolute_validity(r), run_id))
    for r in lm.itertuples(index=False) if lm is not None else []:
        out.append(Observation(r.metric, (r.src, r.dst), r.value, r.ci_lo, r.ci_hi, *_absolute_validity(r), run_id))
    return out


ABSOLUTE_LOAD_PCT = 10.0  # a bound is absolute: any load above this share of the CPUs moves the value


def _absolute_validity(r) -> tuple[bool, str]:
    """An absolute bound needs a measurement without load (a screen's ``load_pct``, when it has one)."""
    load = getattr(r, "load_pct", None)
    if load is not None and load == load and load > ABSOLUTE_LOAD_PCT:
        return False, f"other processes and the hypervisor took {load:.0f}% of the CPUs meanwhile (over " \
                      f"{ABSOLUTE_LOAD_PCT:g}%)"
    return bool(r.valid), str(r.why)


def _latency_obs(run) -> list[Observation]:
    native = (run.info.get("metadata") or {}).get("native") or {}
    hosts = [h for h in str(native.get("hosts") or "").split(",") if h]
    if len(hosts) < 2 or hosts[0] == hosts[1]:
        return []  # one node: shared memory, no link
    s = run.read_table("latency.summary")
    pair = (hosts[0], hosts[1])
    small = s.iloc[(s["size_bytes"] - 8).abs().argmin()]
    out = [Observation("link_latency", pair, float(small.median_ns), float(small.median_ci_lo_ns),
                       float(small.median_ci_hi_ns), run=run.id)]
    big = s[s["size_bytes"] >= 1 << 20]
    if len(big):
        b = big.iloc[big["size_bytes"].argmax()]
        size = float(b.size_bytes)
        out.append(Observation("link_bandwidth", pair, float(b.bw_bytes_per_s), size / (b.median_ci_hi_ns * 1e-9),
                               size / (b.median_ci_lo_ns * 1e-9), run=run.id))
    return out


def _noise_obs(run) -> list[Observation]:
    import socket

    s = run.read_table("noise.summary")
    host_default = (run.info.get("metadata") or {}).get("host") or socket.gethostname()
    out = []
    for host, g in s.groupby(s["host"] if "host" in s.columns else [host_default] * len(s)):
        out.append(Observation("noise_fraction", (str(host),), float(g["noise_fraction"].mean() * 100), run=run.id))
        out.append(Observation("longest_detour", (str(host),), float(g["max_ns"].max()), run=run.id))
    return out
