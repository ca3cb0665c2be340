"""ReFrame references from stored runs: ``reference = {'*': {name: (value, lower, upper, unit)}}`` with the bounds
taken from what was measured, not set by hand.

A figure (hpcvar.export.figures) becomes one performance variable, named by its family and labels
(``noise_lost_pct_cpu0``, ``latency_us_vm_vm_8_q0_5``); ``drop`` leaves labels out of the names (``node``: the
same references for every node of a ``--distribute``d test). Values are in ReFrame-friendly units (us, %, MB/s).

Bounds, relative to the value as ReFrame takes them: from one run, the figure's 95% CI (when it has one); from
several runs of one group, the range of their values and CIs, which also holds the run-to-run variation (k runs'
range holds a new run's value with probability (k-1)/(k+1) when the runs are alike). Only the bad side is bounded:
less noise or latency, more bandwidth, never fails a test (``None`` on the good side). A figure whose dispersion
nothing measured (the longest detour of a single run) has no bound at all: reported, never judged.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Iterable

from hpcvar.errors import UsageError
from hpcvar.export.figures import Figure, run_figures
from hpcvar.results.groups import group_key
from hpcvar.results.store import Run

# family suffix -> (ReFrame unit, factor, higher is worse)
UNITS = {
    "_seconds": ("us", 1e6, True),
    "_ratio": ("%", 100.0, True),
    "_bytes_per_second": ("MB/s", 1e-6, False),
    "_ops_per_second": ("Mop/s", 1e-6, False),
    "_per_second": ("1/s", 1.0, True),
}
SKIP = {"run_start_time_seconds", "run_duration_seconds", "run_complete", "verdict", "verdict_state", "node_outlier"}


def _unit(family: str) -> tuple[str, str, float, bool]:
    for suffix, (unit, factor, worse) in UNITS.items():
        if family.endswith(suffix):
            short = {"%": "pct", "us": "us", "MB/s": "MBps", "Mop/s": "Mops", "1/s": "per_s"}[unit]
            return family[: -len(suffix)] + "_" + short, unit, factor, worse
    return family, "", 1.0, True


def var_name(f: Figure, drop: Iterable[str] = ()) -> str:
    """``noise_lost_pct_n1_cpu0``, ``latency_us_n1_to_n2_8B_p50``, ``link_bandwidth_MBps_n1_to_n2``."""
    base, _, _, _ = _unit(f.name)
    lab = {k: v for k, v in f.labels.items() if k not in set(drop)}
    parts = []
    if "node" in lab:
        parts.append(lab["node"])
    if "src" in lab or "dst" in lab:
        parts.append(f"{lab.get('src', '')}_to_{lab.get('dst', '')}")
    if "cpu" in lab:
        parts.append(f"cpu{lab['cpu']}")
    if "size_bytes" in lab:
        parts.append(f"{lab['size_bytes']}B")
    if "quantile" in lab:
        parts.append("p" + f"{float(lab['quantile']) * 100:g}".replace(".", "_"))
    parts += [v for k, v in sorted(lab.items()) if k not in ("node", "src", "dst", "cpu", "size_bytes", "quantile",
                                                               "command")]
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", "_".join([base, *parts])).strip("_")


def references(runs: list[Run], drop: Iterable[str] = ()) -> dict:
    """The references of ``runs`` (one run, or several of one group: same command on the same hosts)."""
    if len({group_key(r) for r in runs}) > 1:
        raise UsageError("the runs are not of one command on one set of hosts", "RUN",
                         "Give runs of one group (hpcvar history lists them), e.g. the last nights' screens")
    per: dict[str, list[tuple[Figure, str, float, bool]]] = {}
    for run in runs:
        for f in run_figures(run):
            if f.name in SKIP:
                continue
            _, unit, factor, worse = _unit(f.name)
            per.setdefault(var_name(f, drop), []).append((f, unit, factor, worse))
    out: dict[str, list] = {}
    for name, figs in per.items():
        unit, factor, worse = figs[0][1], figs[0][2], figs[0][3]
        vals = [f.value * factor for f, *_ in figs]
        his = [x * factor for f, *_ in figs for x in (f.value, f.ci_hi, f.ci_lo) if math.isfinite(x)]
        if len(his) < 2:  # one value and no CI (the longest detour of one run): nothing measured its dispersion
            out[name] = [float(vals[0]), None, None, unit]  # reported, not judged
            continue
        ref = float(statistics.median(vals))
        if ref == 0 or not math.isfinite(ref):
            continue  # ReFrame's bounds are relative to the value: a zero reference has none
        if worse:
            upper = max(his) / ref - 1.0
            out[name] = [ref, None, round(max(upper, 0.0), 6), unit]
        else:
            lower = min(his) / ref - 1.0
            out[name] = [ref, round(min(lower, 0.0), 6), None, unit]
    return out


def refs_json(runs: list[Run], drop: Iterable[str] = ()) -> dict:
    refs = references(runs, drop)
    note = ("bounds from one run: its 95% CIs, which do not see the run-to-run variation; give several runs"
            if len(runs) == 1 else f"bounds from the range of {len(runs)} runs and their 95% CIs")
    return {"runs": [r.id for r in runs], "command": runs[0].info.get("command"),
            "hosts": group_key(runs[0])[0], "note": note, "reference": {"*": refs}}
