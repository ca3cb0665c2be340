"""Numbers for people: one presentation of stored values in the HTML/Markdown report, ``runs show`` and ``info``.

Stored tables keep their units in their column names (``median_ns``, ``bw_bytes_per_s``, ``slowdown_pct``,
hpcvar.results.schema). A person reads a header with its unit and scaled values: ``median (us)`` and 1.82, never
``median_ns`` and 1820.4, nor ``11970000000``, ``1.2e+10``, ``None``, ``True`` or a Python dict. The unit of a
column is chosen from its values (the same rule as the terminal's tables, hpcvar.report.terminal.column_unit), so
a column has one unit; a variance (``_ns2``, or a ``variance`` stored in ``_ns``) is in a squared unit.
"""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np

from hpcvar.units import format_rate_bytes, format_size, format_time_ns

# suffix of a stored name -> (family, size of the stored unit in the family's base unit); longest first
SUFFIXES: tuple[tuple[str, str, float], ...] = (
    ("_bytes_per_s", "rate", 1.0), ("_per_s", "/s", 1.0), ("_ns_per_byte", "ns/B", 1.0), ("_s_per_byte", "s/B", 1.0),
    ("_ns2", "time2", 1.0), ("_bytes", "size", 1.0), ("_ns", "time", 1.0), ("_us", "time", 1e3),
    ("_ms", "time", 1e6), ("_s", "time", 1e9), ("_pct", "%", 1.0), ("_hz", "freq", 1.0), ("_ppm", "ppm", 1.0),
    ("_cycles", "cycles", 1.0),
)
# the units each family is written in, with their size in its base unit (ns, ns^2, bytes, bytes/s, Hz)
UNITS: dict[str, tuple[tuple[str, float], ...]] = {
    "time": (("ns", 1.0), ("us", 1e3), ("ms", 1e6), ("s", 1e9)),
    "time2": (("ns²", 1.0), ("us²", 1e6), ("ms²", 1e12), ("s²", 1e18)),
    "size": (("B", 1.0), ("KiB", 1024.0), ("MiB", 1024.0**2), ("GiB", 1024.0**3)),
    "rate": (("B/s", 1.0), ("kB/s", 1e3), ("MB/s", 1e6), ("GB/s", 1e9)),
    "freq": (("Hz", 1.0), ("kHz", 1e3), ("MHz", 1e6), ("GHz", 1e9)),
}
# words of stored names written out for people
WORDS = {"bw": "bandwidth", "ci": "CI", "lo": "low", "hi": "high", "p99_9": "p99.9", "pred": "predicted",
         "meas": "measured", "t": "T", "cv": "CV", "n": "n", "mad": "MAD", "rtt": "RTT", "cpu": "CPU",
         "ea": "EA", "tsc": "TSC", "mpi": "MPI"}


def split_name(name: str) -> tuple[str, str | None, float]:
    """A stored name -> (its words, its family or None, the stored unit's size in the family's base unit). A
    variance stored in ``_ns`` (``comm_variance_ns``: ns^2) is a squared time."""
    for suffix, family, size in SUFFIXES:
        if name.endswith(suffix) and len(name) > len(suffix):
            stem = name[: -len(suffix)]
            if family == "time" and re.search(r"(^|_)var(iance)?($|_)", stem):
                return stem, "time2", size * size
            return stem, family, size
    return name, None, 1.0


def label(stem: str) -> str:
    """``median_ci_lo`` -> 'median CI low', ``p99_9`` -> 'p99.9'; a name already written for people (with a
    space: 'gige E_rel %') is kept."""
    if " " in stem:
        return stem
    stem = stem.replace("p99_9", "p99.9")
    return " ".join(WORDS.get(w, w) for w in stem.split("_") if w) or stem


# the smallest value a column's unit may write: below it, the column takes the next smaller unit
SMALLEST = 0.01


def choose_unit(family: str, values: list[float]) -> tuple[str, float]:
    """The one unit of a column of ``values`` (in the family's base unit): a size in the largest unit every value
    is a whole number of; otherwise the largest unit at least half of the values are 1 or more of, and its
    smallest value ``SMALLEST`` or more of."""
    units = UNITS[family]
    nonzero = sorted(abs(v) for v in values if math.isfinite(v) and v != 0)
    if not nonzero:
        return units[0]
    if family == "size":
        return next((u for u in reversed(units) if all(v % u[1] == 0 for v in nonzero)), units[0])
    low_median = nonzero[(len(nonzero) - 1) // 2]
    # ... and in which the smallest value keeps 3 significant digits within 5 decimals (not 0.00371 ms: 3.71 us)
    return next((u for u in reversed(units) if low_median >= u[1] and nonzero[0] >= SMALLEST * u[1]), units[0])


def number(v: Any, digits: int = 4) -> str:
    """A value as a person reads it: ``digits`` significant digits, never an exponent; whole numbers whole;
    yes/no for a truth value, '' for none; a mapping as 'k=v, ...', a list as 'a, b'."""
    if v is None:
        return ""
    if isinstance(v, bool | np.bool_):
        return "yes" if v else "no"
    if isinstance(v, int | np.integer):
        return str(int(v))
    if isinstance(v, float | np.floating):
        f = float(v)
        if not math.isfinite(f):
            return "" if math.isnan(f) else ("inf" if f > 0 else "-inf")
        if abs(f) >= 10 ** digits or f.is_integer():
            return f"{f:.0f}"
        return np.format_float_positional(f, precision=digits, unique=True, fractional=False, trim="-")
    if isinstance(v, dict):
        return _mapping(v)
    if isinstance(v, list | tuple):
        return ", ".join(number(x) for x in v) or "none"
    return str(v)


def _mapping(v: dict) -> str:
    """A stored mapping for people: a span ({cycles, seconds, source}) as '601 ns (from RUN)', another as
    'label value, ...' with its entries' units, its unset entries left out."""
    if {"seconds", "cycles"} <= set(v) and set(v) <= {"seconds", "cycles", "source"}:
        what = (format_time_ns(float(v["seconds"]) * 1e9) if _is_number(v.get("seconds"))
                else f"{number(v['cycles'])} cycles" if v.get("cycles") is not None else "not set")
        src = v.get("source")
        return what + (f" (from {str(src).rstrip('/').rsplit('/', 1)[-1]})" if src else "")
    return ", ".join(" ".join(value(str(k), x)) for k, x in v.items() if x is not None) or "none"


def column(name: str, values: list[Any], unit: tuple[str, float] | None = None) -> tuple[str, list[str]]:
    """A stored column -> (its header for people, with unit, and its cells in that one unit: ``unit``, or the
    one chosen from its values)."""
    stem, family, size = split_name(name)
    nums = [float(v) * size for v in values if _is_number(v)]
    if family in UNITS and (nums or unit):
        u, scale = unit or choose_unit(family, nums)
        return f"{label(stem)} ({u})", [number(float(v) * size / scale) if _is_number(v) else number(v)
                                        for v in values]
    if family in UNITS:  # no value: the unit the name stores
        u = next((u for u, s in UNITS[family] if s == size), UNITS[family][0][0])
        return f"{label(stem)} ({u})", [number(v) for v in values]
    if family is not None:
        return f"{label(stem)} ({family})", [number(v) for v in values]
    return label(stem), [number(v) for v in values]


def _group(name: str) -> tuple[str, str | None]:
    """The columns written in one unit: a value and the ends of its interval (``median_ns``,
    ``median_ci_lo_ns``, ``median_ci_hi_ns``)."""
    stem, family, _ = split_name(name)
    return re.sub(r"_(ci_)?(lo|hi|low|high)$", "", stem), family


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float | np.integer | np.floating) and not isinstance(v, bool | np.bool_) \
        and math.isfinite(float(v))


def frame(df):
    """A stored table as people read it: human headers with units, scaled values as text (a new frame)."""
    import pandas as pd

    groups: dict[tuple[str, str | None], list[float]] = {}
    for name in df.columns:
        stem, family, size = split_name(str(name))
        groups.setdefault(_group(str(name)), []).extend(float(v) * size for v in df[name] if _is_number(v))
    out = {}
    for name in df.columns:
        key = _group(str(name))
        unit = choose_unit(str(key[1]), groups[key]) if key[1] in UNITS and groups[key] else None
        header, cells = column(str(name), df[name].tolist(), unit)
        while header in out:  # two stored names that read the same stay two columns
            header += " "
        out[header] = cells
    return pd.DataFrame(out, columns=list(out))


def value(key: str, v: Any, missing: str = "not set") -> tuple[str, str]:
    """One parameter or metadata entry -> (its label, its value with unit): ``quantum_ns`` 1e6 -> ('quantum',
    '1 ms'); None -> ``missing``; True -> 'yes'; a dict -> 'k=v, ...'."""
    stem, family, size = split_name(key)
    if v is None:
        return label(stem), missing
    if family is None:
        return label(stem), number(v)
    if not _is_number(v):
        return f"{label(stem)} ({family})" if family not in UNITS else label(stem), number(v)
    f = float(v) * size
    if family not in UNITS:
        return label(stem), f"{number(f)}{'' if family == '%' else ' '}{family}"
    text = {"time": format_time_ns, "size": format_size, "rate": format_rate_bytes}.get(family)
    if text is not None and not (family == "size" and not f.is_integer()):
        return label(stem), text(f)
    unit, scale = choose_unit(family, [f])
    return label(stem), f"{number(f / scale)} {unit}"
