"""Synthetic jitter traces for jitSim: periodic sources and Poisson detours, merged.

A spec is a comma list of sources:
    250Hz:2us            a detour of 2 us every 4 ms (periodic, random phase from the seed)
    poisson:0.1Hz:1ms    detours of 1 ms at Poisson times of mean rate 0.1 Hz
Detours that overlap are merged into one. The trace starts at the first detour
(it wraps, so nothing is lost) and lasts exactly the requested length.
"""

from __future__ import annotations

import numpy as np

from hpcvar import units
from hpcvar.errors import UsageError
from hpcvar.noise.trace import CpuTrace, JitterTrace
from hpcvar.units import parse_freq


def parse_spec(spec: str, flag: str = "--synthetic") -> list[tuple[str, float, float]]:
    """[(kind, rate_hz, detour_s)] from '250Hz:2us,poisson:0.1Hz:1ms'."""
    out = []
    for part in spec.split(","):
        items = [x.strip() for x in part.strip().split(":")]
        kind = "periodic"
        if items and items[0] in ("poisson", "periodic"):
            kind = items.pop(0)
        if len(items) != 2:
            raise UsageError(f"'{part}' is not RATE:DETOUR", flag,
                             "Write sources as 250Hz:2us or poisson:0.1Hz:1ms, separated by commas")
        rate = parse_freq(items[0], flag)
        detour = units.parse_time(items[1], flag)
        if detour <= 0 or detour * rate >= 1:
            raise UsageError(f"source '{part}' has a detour that is not shorter than its period", flag,
                             "Use a detour shorter than 1/rate")
        out.append((kind, rate, detour))
    return out


def synthesize(spec: str, freq_hz: float, length_s: float, seed: int = 0, flag: str = "--synthetic") -> JitterTrace:
    """One CPU trace of ``length_s`` seconds at ``freq_hz`` from the sources of ``spec``."""
    sources = parse_spec(spec, flag)
    length = int(round(length_s * freq_hz))
    if length < 1:
        raise UsageError("the synthetic trace is shorter than one cycle", "--duration", "Give e.g. 1h")
    rng = np.random.default_rng(seed)
    starts, durs = [], []
    for kind, rate, detour in sources:
        d = max(1, int(round(detour * freq_hz)))
        if kind == "periodic":
            period = freq_hz / rate
            phase = rng.uniform(0, period)
            s = phase + period * np.arange(int(np.ceil((length - phase) / period)))
        else:
            count = rng.poisson(rate * length_s)
            s = np.sort(rng.uniform(0, length, size=count))
        s = np.floor(s).astype(np.int64)
        s = s[s < length]
        starts.append(s)
        durs.append(np.full(s.size, d, dtype=np.int64))
    s = np.concatenate(starts)
    e = s + np.concatenate(durs)
    if s.size == 0:
        raise UsageError("the synthetic trace has no detour in its length", "--duration",
                         "Give a longer --duration or higher rates")
    order = np.argsort(s, kind="stable")
    s, e = s[order], e[order]
    # merge overlapping detours: a new interval starts where s exceeds every earlier end
    run_end = np.maximum.accumulate(e)
    new = np.ones(s.size, dtype=bool)
    new[1:] = s[1:] > run_end[:-1]
    idx = np.flatnonzero(new)
    ms = s[idx]
    me = np.maximum.reduceat(e, idx)
    # rotate to start at the first detour; the last gap wraps to it
    end_of_trace = ms[0] + length
    me = np.minimum(me, end_of_trace)
    d = me - ms
    nxt = np.concatenate([ms[1:], [end_of_trace]])
    g = nxt - me
    meta = {"source": f"synthetic:{spec}", "seed": seed, "length_s": length_s}
    return JitterTrace(freq_hz, [CpuTrace(0, d, g)], meta)
