"""The in-memory jitter trace shared by the collector, the analysis and jitSim.

A trace holds, per CPU, events k = 0..E-1 in the paper's form: a jitter of
``duration[k]`` cycles followed by ``gap[k]`` compute-available cycles before
the next jitter (jitSim: S_0 = 0, S_{k+1} = S_k + d_k + g_k; the trace length
is L = S_E). All values are integer cycles at ``freq_hz``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from hpcvar.errors import InputFileError, UsageError


@dataclass
class CpuTrace:
    cpu: int
    duration: np.ndarray  # int64 cycles (d_k)
    gap: np.ndarray  # int64 cycles (g_k)
    meta: dict = field(default_factory=dict)

    def __post_init__(self):
        self.duration = np.ascontiguousarray(self.duration, dtype=np.int64)
        self.gap = np.ascontiguousarray(self.gap, dtype=np.int64)
        if self.duration.shape != self.gap.shape or self.duration.ndim != 1:
            raise ValueError("duration and gap must be 1-D arrays of equal length")

    @property
    def events(self) -> int:
        return int(self.duration.size)

    @property
    def length(self) -> int:
        """L = sum(d_k + g_k) in cycles."""
        return int(self.duration.sum() + self.gap.sum())

    def starts(self) -> np.ndarray:
        """S_k: start cycle of each event (S_0 = 0)."""
        s = np.zeros(self.events, dtype=np.int64)
        if self.events > 1:
            np.cumsum((self.duration + self.gap)[:-1], out=s[1:])
        return s


@dataclass
class JitterTrace:
    freq_hz: float
    cpus: list[CpuTrace]
    meta: dict = field(default_factory=dict)

    def cpu(self, index: int) -> CpuTrace:
        return self.cpus[index]

    def validate(self, where: str = "trace") -> None:
        if not self.freq_hz or self.freq_hz <= 0:
            raise UsageError("the trace has no positive frequency", where, "Give --freq HZ")
        if not self.cpus:
            raise UsageError("the trace has no CPU", where, "Record or synthesize a trace first")
        for c in self.cpus:
            if c.events == 0:
                raise UsageError(f"CPU {c.cpu} of the trace has no event", where,
                                 "Record longer, or use a synthetic trace")
            if (c.duration < 0).any() or (c.gap < 0).any():
                raise UsageError(f"CPU {c.cpu} has negative durations or gaps", where, "Fix the trace")
            if c.gap.sum() == 0:
                raise UsageError(f"CPU {c.cpu} has no compute-available time (all gaps are 0)", where,
                                 "A trace must leave time for work")


def read_two_column(path, freq_hz: float, cpu: int = 0) -> JitterTrace:
    """The paper's text form: one ``jitter_duration cycles_to_next_jitter`` pair of
    non-negative integers per line; ``#`` starts a comment. Errors name file:line."""
    path = Path(path)
    d, g = [], []
    try:
        lines = path.read_text().splitlines()
    except OSError as e:
        raise InputFileError(f"cannot read the trace: {e.strerror}", str(path)) from None
    for i, line in enumerate(lines, 1):
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        parts = text.split()
        if len(parts) != 2 or not all(p.isdigit() for p in parts):
            raise InputFileError(f"'{line.strip()}' is not two non-negative integers", str(path), i,
                                 todo="Each line is 'jitter_duration cycles_to_next_jitter' in cycles")
        d.append(int(parts[0]))
        g.append(int(parts[1]))
    if not d:
        raise InputFileError("the trace has no event", str(path), todo="Give at least one 'd g' line")
    return JitterTrace(freq_hz, [CpuTrace(cpu, np.array(d), np.array(g))], {"source": str(path)})


def write_two_column(trace: JitterTrace, path, cpu_index: int = 0) -> None:
    from hpcvar.results import atomic_write_text

    c = trace.cpus[cpu_index]
    body = "".join(f"{a} {b}\n" for a, b in zip(c.duration.tolist(), c.gap.tolist(), strict=True))
    atomic_write_text(Path(path), f"# hpcvar jitter trace, cpu {c.cpu}, freq_hz {trace.freq_hz}\n" + body)


def cpu_trace_from_events(cpu: int, starts, durations, length: int, meta: dict | None = None) -> CpuTrace:
    """The paper's (d, g) form from recorded events, preserving the trace length exactly.

    ``starts`` (cycles from the start of the recording, increasing, non-overlapping),
    ``durations`` (cycles) and the recorded ``length`` T give
    ``g_k = s_{k+1} - s_k - d_k`` and, for the last event, ``g_{E-1} = T - s_{E-1} - d_{E-1} + s_0``:
    the lead-in before the first event wraps onto the last gap, so that ``sum(d + g) = T`` and the
    recorded starts are ``s_0 + S_k``. ``s_0`` is kept as ``meta["lead_in_cycles"]``.
    """
    s = np.asarray(starts, dtype=np.int64)
    d = np.asarray(durations, dtype=np.int64)
    if s.size == 0:
        raise ValueError("no event")
    end = s + d
    if (np.diff(s) < 0).any() or (s[1:] < end[:-1]).any() or s[0] < 0 or end[-1] > length:
        raise ValueError("events must be sorted, non-overlapping and inside [0, length]")
    g = np.empty_like(d)
    g[:-1] = s[1:] - end[:-1]
    g[-1] = int(length) - int(end[-1]) + int(s[0])
    m = dict(meta or {})
    m["lead_in_cycles"] = int(s[0])
    return CpuTrace(cpu, d, g, m)


def recorded_starts(c: CpuTrace) -> np.ndarray:
    """Event start cycles from the start of the recording: ``lead_in + S_k`` (0 lead-in if unknown)."""
    return c.starts() + int(c.meta.get("lead_in_cycles", 0))
