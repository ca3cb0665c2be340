"""Closed forms of jitSim for synthetic periodic noise, beside the simulation.

A periodic trace repeats one event (d, g): a detour of d cycles every P = d + g
cycles. A task that starts at a uniform integer phase phi in [0, P) (phi = 0 is
the start of a detour) and computes W = n*g + r cycles (n >= 0, 0 < r <= g)
absorbs the delay D(phi) = t' - t - W (derivation in docs/jitter-sim.md):

    phi in [0, d):            D = n*d + (d - phi)     (the rest of the detour, then n full ones)
    phi in [d, P), h = P-phi: D = (n+1)*d if h < r else n*d

so P(D = n*d + j) = 1/P for j = 1..d-1, P(D = (n+1)*d) = r/P, P(D = n*d) = (g-r+1)/P.

With --barrier none every phase lasts W + max_i D_i. For unsynchronized offsets the
positions of the tasks in the period are independent and uniform, so the expected
first phase is W + E[max of N iid D] (exact, computed from the distribution above);
as N grows it tends to W + (n+1)*d: for W <= g the delay per phase tends to the detour
length d. For synchronized or co-scheduled jitter every task sees the same noise, so
the run is one task computing N*W without pause: T = N*W + D(phi0) with D for the work
N*W; its slowdown tends to d/g = (d/P) / (1 - d/P), the share of the CPU lost over the
share left (about d/P when detours are short).
"""

from __future__ import annotations

import numpy as np


def periodic_event(trace_cpus) -> tuple[int, int] | None:
    """(d, g) if every CPU trace repeats one identical event, else None."""
    pair = None
    for c in trace_cpus:
        if c.events == 0:
            return None
        d0, g0 = int(c.duration[0]), int(c.gap[0])
        if not ((c.duration == d0).all() and (c.gap == g0).all()):
            return None
        if pair is None:
            pair = (d0, g0)
        elif pair != (d0, g0):
            return None
    return pair


def _split(work: int, g: int) -> tuple[int, int]:
    """W = n*g + r with 0 < r <= g."""
    n = (work - 1) // g
    return n, work - n * g


def delay_pmf(d: int, g: int, work: int) -> tuple[np.ndarray, np.ndarray]:
    """Support (delays in cycles, ascending) and probabilities of D for a uniform start phase."""
    if work <= 0:
        return np.array([0]), np.array([1.0])
    p = d + g
    n, r = _split(work, g)
    values = [n * d] + [n * d + j for j in range(1, d)] + [(n + 1) * d]
    probs = [(g - r + 1) / p] + [1.0 / p] * max(d - 1, 0) + [r / p]
    if d == 0:
        return np.array([0]), np.array([1.0])
    v = np.array(values, dtype=np.int64)
    pr = np.array(probs, dtype=float)
    return v, pr


def delay_at(d: int, g: int, work: int, phi: int) -> int:
    """D(phi) for one start phase (phi = 0: the start of a detour)."""
    if work <= 0:
        return 0
    n, r = _split(work, g)
    if phi < d:
        return n * d + (d - phi)
    return (n + 1) * d if (d + g - phi) < r else n * d


def expected_max_delay(d: int, g: int, work: int, ntasks: int) -> float:
    """E[max of ntasks iid D]: the expected jitter delay of one phase of ntasks unsynchronized tasks."""
    v, pr = delay_pmf(d, g, work)
    cdf = np.cumsum(pr)
    cdf[-1] = 1.0
    # E[max] = sum over support of v_j * (F(v_j)^N - F(v_{j-1})^N)
    fn = cdf ** ntasks
    prev = np.concatenate([[0.0], fn[:-1]])
    return float(np.sum(v * (fn - prev)))


def unsync_none(d: int, g: int, work: int, ntasks: int) -> dict:
    """Barrier none, unsynchronized offsets: expected first-phase duration and its limit."""
    n, _ = _split(work, g) if work > 0 else (0, 0)
    e = expected_max_delay(d, g, work, ntasks)
    return {"model": "unsync, barrier none: E[phase] = W + E[max_i D_i]",
            "expected_phase_cycles": work + e, "expected_delay_cycles": e,
            "limit_delay_cycles": (n + 1) * d if work > 0 else 0,
            "expected_slowdown": e / work if work else 0.0}


def synced_none(d: int, g: int, work: int, phases: int, phi0: int | None = None) -> dict:
    """Barrier none, every task at the same phase: T = N*W + D(phi0) for the work N*W.
    phi0 None: the expectation over a uniform phi0 (sync); an integer: that phase (cosched)."""
    total_work = work * phases
    if phi0 is None:
        v, pr = delay_pmf(d, g, total_work)
        delay = float(np.sum(v * pr))
    else:
        delay = float(delay_at(d, g, total_work, phi0))
    return {"model": "sync/cosched, barrier none: T = N*W + D(N*W)",
            "expected_total_cycles": total_work + delay, "expected_delay_cycles": delay,
            "expected_slowdown": delay / total_work if total_work else 0.0,
            "limit_slowdown": d / g}
