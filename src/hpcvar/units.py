"""Parsing and formatting of quantities with units.

Every flag that takes a size, a time, a rate or a list goes through here, so
that ``1MiB``, ``2us``, ``200mbit`` and ``1..1M`` mean the same everywhere.

Sizes (bytes): plain integers, ``KiB MiB GiB TiB`` (powers of 1024), ``kB MB GB``
(powers of 1000), and the short forms ``K M G`` (``k`` too), which are powers of
1024 as in the usual MPI benchmarks (``-m 4M``). ``B`` is optional.
Times: ``ns us ms s m h d w`` (``µs`` too; ``d`` days and ``w`` weeks, for ages such as ``--since 7d``).
A time takes its unit: a bare number other than 0 is refused
(``75.9`` could be seconds or microseconds), with the remedy ``give a unit: 75.9us``. The one rule of every flag
and key=value spec: a bare number only where the unit cannot be ambiguous (counts, sizes in bytes, and 0).
Rates (bits per second, tc style): ``bit kbit mbit gbit`` (powers of 1000) and
``bps`` / ``Bps`` families are not accepted, to avoid the bits/bytes trap.
Lists: comma separated items; an item ``a..b`` is a doubling range from a to b
(inclusive when hit), ``a..b:xk`` a geometric range of factor k, ``a..b:s`` an
arithmetic range of step s.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable

from hpcvar.errors import UsageError

_SIZE_UNITS = {
    "": 1, "b": 1,
    "k": 1024, "kib": 1024, "kb": 1000,
    "m": 1024**2, "mib": 1024**2, "mb": 1000**2,
    "g": 1024**3, "gib": 1024**3, "gb": 1000**3,
    "t": 1024**4, "tib": 1024**4, "tb": 1000**4,
}
_TIME_UNITS_S = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0,
                 "d": 86400.0, "w": 604800.0}
_RATE_UNITS = {"bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9, "tbit": 1e12}
_NUM = r"([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)"
# The largest quantities any flag accepts: beyond them a value is a typo (1e400 is inf, 1e30 bytes is no
# machine's memory), never something to measure or simulate.
MAX_SIZE = 2**50  # bytes: 1 PiB
MAX_TIME_S = 1e8  # seconds: about 3 years
MAX_RATE_BPS = 1e15  # bits per second: 1 Pbit/s
# No TSC, clock or noise source runs faster than 1 THz: a larger value is a typo, not a machine.
MAX_FREQ_HZ = 1e12


def _bounded(value: float, hi: float, text: str, flag: str, what: str, unit: str) -> float:
    if not math.isfinite(value) or value > hi:
        raise UsageError(f"'{text}' is beyond any {what} hpcvar takes (at most {hi:g} {unit})", flag,
                         "Check the value and its unit")
    return value


def parse_size(text: str, flag: str = "size") -> int:
    """Bytes from '4MiB', '1k', '512'. Raises UsageError naming ``flag``."""
    m = re.fullmatch(_NUM + r"\s*([A-Za-z]*)", text.strip())
    unit = m.group(2).lower() if m else None
    if not m or unit not in _SIZE_UNITS:
        raise UsageError(f"'{text}' is not a size", flag,
                         "Use bytes or a unit: 8, 1KiB, 4MiB, 1GiB (K/M/G are powers of 1024, kB/MB/GB of 1000)")
    value = _bounded(float(m.group(1)) * _SIZE_UNITS[unit], MAX_SIZE, text, flag, "size", "bytes (1 PiB)")
    if value != int(value):
        raise UsageError(f"'{text}' is not a whole number of bytes", flag, "Give an integer number of bytes")
    return int(value)


def no_unit(text: str, flag: str, example_unit: str = "us") -> UsageError:
    """The error of a time or rate given without its unit."""
    t = text.strip()
    alt = {"us": "s", "mbit": "gbit", "B/s": "gbit", "us/B": "ns/B"}.get(example_unit, "")
    return UsageError(f"'{t}' has no unit", flag,
                      f"Give the unit it is in, e.g. {t}{example_unit}" + (f" or {t}{alt}" if alt else "")
                      + " (a bare number is taken only for counts and 0)")


def parse_time(text: str, flag: str = "time", default_unit: str | None = None) -> float:
    """Seconds from '2us', '10s', '1h', '50ms'. A bare number is refused (its unit would be a guess) unless it
    is 0 or the caller names ``default_unit`` for a quantity whose unit is fixed by its syntax."""
    m = re.fullmatch(_NUM + r"\s*([a-zµ]*)", text.strip())
    if m and not m.group(2) and default_unit is None:
        if float(m.group(1)) == 0:
            return 0.0
        raise no_unit(text, flag)
    unit = (m.group(2) or default_unit) if m else None
    if not m or unit not in _TIME_UNITS_S:
        raise UsageError(f"'{text}' is not a time", flag, "Use a number with a unit: 500ns, 2us, 1ms, 10s, 1h, 7d")
    return _bounded(float(m.group(1)) * _TIME_UNITS_S[unit], MAX_TIME_S, text, flag, "time", "s")


def parse_rate(text: str, flag: str = "rate") -> float:
    """Bits per second from '200mbit', '1gbit' (tc units, powers of 1000)."""
    m = re.fullmatch(_NUM + r"\s*([a-z]*)", text.strip().lower())
    if m and not m.group(2):
        if float(m.group(1)) == 0:
            return 0.0
        raise no_unit(text, flag, "mbit")
    if not m or m.group(2) not in _RATE_UNITS:
        raise UsageError(f"'{text}' is not a rate", flag, "Use tc units: 100mbit, 1gbit, 500kbit")
    return _bounded(float(m.group(1)) * _RATE_UNITS[m.group(2)], MAX_RATE_BPS, text, flag, "rate", "bit/s")


def parse_list(text: str, item: Callable[[str], float], flag: str) -> list[float]:
    """A comma list of items with ranges (see the module doc); order kept, duplicates removed."""
    out: list[float] = []
    for raw in text.split(","):
        part = raw.strip()
        if not part:
            raise UsageError(f"empty item in '{text}'", flag, "Write a comma list such as 8,1KiB,1MiB")
        if ".." in part:
            out.extend(_parse_range(part, item, flag))
        else:
            out.append(item(part))
    seen, uniq = set(), []
    for v in out:
        if v not in seen:
            seen.add(v)
            uniq.append(v)
    return uniq


def _parse_range(part: str, item: Callable[[str], float], flag: str) -> list[float]:
    span, _, step = part.partition(":")
    lo_s, _, hi_s = span.partition("..")
    lo, hi = item(lo_s), item(hi_s)
    if hi < lo:
        raise UsageError(f"range '{part}' goes down", flag, "Write ranges as low..high")
    values = []
    if not step or step.startswith("x"):
        factor = float(step[1:]) if step else 2.0
        if factor <= 1:
            raise UsageError(f"range factor in '{part}' must be above 1", flag, "Use a..b:x2")
        if lo <= 0:
            values.append(lo)
            if hi <= 0:  # 0..0: nothing to multiply (the loop below would never end)
                return values
            lo = 1 if hi >= 1 else hi
        # counted before the loop: a factor just above 1 would otherwise fill the memory
        if lo > 0 and hi > lo and math.log(hi / lo) / math.log(factor) > 100000:
            raise UsageError(f"range '{part}' has too many values", flag, "Use a coarser step")
        v = lo
        while v <= hi * (1 + 1e-12):
            values.append(type(lo)(round(v)) if isinstance(lo, int) else v)
            v *= factor
        if len(values) > 100000:
            raise UsageError(f"range '{part}' has too many values", flag, "Use a coarser step")
    else:
        s = item(step)
        if s <= 0:
            raise UsageError(f"range step in '{part}' must be positive", flag, "Use a..b:step")
        n = int(math.floor((hi - lo) / s + 1e-9)) + 1
        if n > 100000:
            raise UsageError(f"range '{part}' has too many values", flag, "Use a larger step")
        values = [lo + i * s for i in range(n)]
    return values


def parse_int(text: str, flag: str, lo: int | None = None, hi: int | None = None) -> int:
    """An integer (with size suffixes allowed: 1K = 1024, 1M = 1048576 tasks)."""
    try:
        value = parse_size(text, flag)
    except UsageError:
        raise UsageError(f"'{text}' is not an integer", flag, "Give a whole number") from None
    check_range(value, flag, lo, hi)
    return value


def check_range(value: float, flag: str, lo: float | None = None, hi: float | None = None, unit: str = "") -> None:
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        bounds = f"[{lo if lo is not None else '-inf'}, {hi if hi is not None else 'inf'}]{unit}"
        raise UsageError(f"{value}{unit} is outside {bounds}", flag, f"Give a value in {bounds}")


# bytes per second: a capital B (a lower-case b is bits: tc rates, 1gbit)
_BYTE_RATES = {"B/s": 1.0, "kB/s": 1e3, "KB/s": 1e3, "MB/s": 1e6, "GB/s": 1e9}


def parse_byte_rate(text: str, flag: str = "bandwidth") -> float:
    """Bytes/s from a tc rate ('1gbit' = 1.25e8 bytes/s) or bytes per second with their unit ('125MB/s'); a bare
    number is refused (bits or bytes per second would be a guess)."""
    t = text.strip()
    if re.search(r"bit$", t.lower()):
        v = parse_rate(t, flag) / 8.0
    else:
        m = re.fullmatch(r"([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([kKMG]?B/s)?", t)
        if not m:
            raise UsageError(f"'{text}' is not a bandwidth", flag, "Give a tc rate (1gbit) or bytes per second "
                                                                  "with a capital B (125MB/s)")
        if not m.group(2):
            raise no_unit(text, flag, "B/s")
        v = float(m.group(1)) * _BYTE_RATES[m.group(2)]
    if not 0 < v <= 1.25e14:
        raise UsageError(f"bandwidth must be positive (and at most 1 Pbit/s), got {text}", flag,
                         "Give e.g. 1gbit or 125MB/s")
    return v


_FREQ_RE = re.compile(r"([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([kKmMgG]?)(hz|Hz|HZ)?")
_FREQ_MULT = {"": 1.0, "k": 1e3, "K": 1e3, "m": 1e6, "M": 1e6, "g": 1e9, "G": 1e9}


def parse_freq(text: str, flag: str) -> float:
    """Hertz from '2.4GHz', '250Hz', '2400000000'."""
    m = _FREQ_RE.fullmatch(text.strip())
    if not m or (m.group(2) and not m.group(3)):
        raise UsageError(f"'{text}' is not a frequency", flag, "Use Hz with an optional k/M/G: 250Hz, 2.4GHz")
    v = float(m.group(1)) * _FREQ_MULT[m.group(2)]
    if v <= 0:
        raise UsageError(f"frequency '{text}' must be positive", flag, "Use e.g. 2.4GHz")
    if not v <= MAX_FREQ_HZ:  # also refuses inf (1e999)
        raise UsageError(f"frequency '{text}' is beyond {MAX_FREQ_HZ:g} Hz", flag,
                         "Give a clock or noise rate a machine can have, e.g. 2.4GHz or 250Hz")
    return v


def _g3(v: float) -> str:
    """3 significant digits, never an exponent: 0.0123, 1.5, 512, 1500 (a value of 1000 or more is whole)."""
    if abs(v) >= 1000:
        return f"{v:.0f}"
    text = f"{v:.3g}"
    return f"{v:.6f}".rstrip("0").rstrip(".") if "e" in text else text


def format_size(n: float) -> str:
    """1048576 -> '1MiB', 1000 -> '1000B', 1536 -> '1.5KiB'."""
    for unit, mult in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if n >= mult:
            v = n / mult
            return f"{v:.0f}{unit}" if v == int(v) else f"{_g3(v)}{unit}"
    return f"{int(n)}B"


def format_time_ns(ns: float) -> str:
    """A time in ns with a readable unit: 512 -> '512 ns', 2.5e6 -> '2.50 ms'."""
    if not math.isfinite(ns):
        return str(ns)
    a = abs(ns)
    if a < 1e3:
        return f"{ns:.0f} ns" if a >= 100 else f"{_g3(ns)} ns"
    if a < 1e6:
        return f"{ns / 1e3:.3g} us"
    if a < 1e9:
        return f"{ns / 1e6:.3g} ms"
    return f"{_g3(ns / 1e9)} s"


def format_rate_bytes(bps: float) -> str:
    """Bytes per second: 1.2e9 -> '1.20 GB/s' (decimal, as bandwidths are quoted)."""
    for unit, mult in (("GB/s", 1e9), ("MB/s", 1e6), ("kB/s", 1e3)):
        if bps >= mult:
            return f"{_g3(bps / mult)} {unit}"
    return f"{_g3(bps)} B/s"


def format_interval(lo: float | None, hi: float | None, n: int | None, fmt: Callable[[float], str],
                    sep: str = ", ") -> str:
    """A 95% confidence interval as ``fmt(lo){sep}fmt(hi)``; one sample or replica has none and reads
    ``n = 1`` (an "interval" of one value is not an interval), a missing bound reads ``-``. Every view that
    prints an interval goes through here, so that n = 1 reads the same everywhere."""
    if n is not None and n < 2:
        return f"n = {n}"
    if lo is None or hi is None or not (math.isfinite(lo) and math.isfinite(hi)):
        return "-"
    return f"{fmt(lo)}{sep}{fmt(hi)}"
