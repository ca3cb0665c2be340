"""What `hpcvar compare` compares for each kind of run: raw samples, never summaries.

Each builder returns Metric(name, samples, higher_is_worse, unit); names are
stable across runs of the same parameters so that two runs pair up metric by
metric. Builders for latency live with its section (sec_latency.py).
"""

from __future__ import annotations

import numpy as np

from hpcvar.compare import Metric

NOISE_WINDOW_S = 0.1  # noise fraction per 100 ms window: a sample per window


def noise_metrics(run) -> list[Metric]:
    """Per CPU: the fraction of CPU lost in every 100 ms window, and every detour's duration. A multi-node
    recording gives them per node ("noise <host> cpu0 ...")."""
    from hpcvar.noise.formats import load_trace

    single = run.path / "trace.jtr"
    if single.is_file():
        return _trace_metrics(load_trace(single), "noise")
    out = []
    for f in sorted((run.path / "traces").glob("*.jtr")):
        out += _trace_metrics(load_trace(f), f"noise {f.stem}")
    return out


def _trace_metrics(trace, label: str) -> list[Metric]:
    out = []
    for c in trace.cpus:
        starts = c.starts()
        window = int(NOISE_WINDOW_S * trace.freq_hz)
        if c.length >= 2 * window and c.events:
            idx = starts // window
            lost = np.bincount(idx, weights=c.duration, minlength=int(c.length // window))[: c.length // window]
            out.append(Metric(f"{label} cpu{c.cpu} fraction lost per {NOISE_WINDOW_S * 1e3:.0f} ms", lost / window,
                              True, ""))
        out.append(Metric(f"{label} cpu{c.cpu} detour", c.duration / trace.freq_hz * 1e9, True, "ns"))
    return out
