"""OS jitter on the replay's compute (``--jitter``): jitSim's semantics, for both replay engines.

A compute of w ns that starts at t on task i ends when w ns of jitter-free time have passed on task i's
trace (CPU i mod K of the jitter trace), from the task's position ``offsets(...)`` (docs/jitter-sim.md).
``ReplayJitter`` is callable as the Python engine wants it (``(task, start_s, dur_s) -> stretched dur_s``,
through ``RefTrace.advance``) and carries the same traces and positions as flat arrays for the C core,
which runs the same integer arithmetic (tests/unit/test_replay_native.py compares them).
"""

from __future__ import annotations

import numpy as np

from hpcvar.errors import UsageError
from hpcvar.sim.jitter_ref import RefTrace, offsets


class ReplayJitter:
    """The jitter of one replica: traces (ns) and one start position per task."""

    def __init__(self, refs: list[RefTrace], offs: list[int]):
        self.refs, self.offs = refs, offs

    def __call__(self, task: int, start_s: float, dur_s: float) -> float:
        tr = self.refs[task % len(self.refs)]
        t = int(start_s * 1e9)
        return (tr.advance(self.offs[task], t, int(round(dur_s * 1e9))) - t) * 1e-9

    def arrays(self) -> dict:
        """Flat int64 arrays for the C core: off (events of trace j), d, g, S (off[j] + j ..), pos."""
        off = np.cumsum([0] + [len(r.d) for r in self.refs]).astype(np.int64)
        return {"off": off, "d": np.concatenate([np.asarray(r.d, np.int64) for r in self.refs]),
                "g": np.concatenate([np.asarray(r.g, np.int64) for r in self.refs]),
                "S": np.concatenate([np.asarray(r.S, np.int64) for r in self.refs]),
                "pos": np.asarray(self.offs, np.int64)}


def jitter_factory(path, freq, align, window=None, origin=None):
    """make(ntasks, seed, replica) -> ReplayJitter from a two-column jitter trace, or None without one.
    Usage errors name the flag (--jitter-freq, --window, --window-origin)."""
    if path is None:
        return None
    if not freq:
        raise UsageError("--jitter needs the trace's cycle frequency", "--jitter-freq", "Give e.g. --jitter-freq 2.4e9")
    from hpcvar.noise.trace import read_two_column

    jt = read_two_column(path, freq)
    jt.validate(path)
    refs = [RefTrace((c.duration * 1e9 / freq).astype(np.int64), (c.gap * 1e9 / freq).astype(np.int64))
            for c in jt.cpus]
    win = int(round(window * 1e9)) if window is not None else 0
    org = int(round(origin * 1e9)) if origin is not None else 0
    if align == "cosched" and win < 1:
        raise UsageError("the co-scheduler window is shorter than 1 ns", "--window", "Give e.g. --window 10ms")
    if align == "cosched" and org >= min(r.L for r in refs):
        raise UsageError("the co-scheduler window origin lies beyond the end of the jitter trace", "--window-origin",
                         "Give an origin inside the trace")

    def make(ntasks, seed, replica):
        return ReplayJitter(refs, offsets(refs, ntasks, align, seed, replica, win, org))

    return make


__all__ = ["ReplayJitter", "jitter_factory"]
