"""The ACE cost model (paper section 4): per-pattern T_comm, equation (6) and equation (4).

Per-message cost (paper eq. 2): T_msg = alpha + beta * n. A cycle of pattern ``p`` costs
``m(p, mode, ranks)`` message costs on a process's critical path (paper eq. 3 sums them):

    T_comm  = m * (alpha + beta * n)                    per cycle
    T_comp  = T_comm * 100 / L - T_comm                  per cycle (eq. 6), L in percent
    T_cycle = T_comp + T_comm = T_comm * 100 / L         (eq. 5)
    T_run   = sum over c cycles of (T_comp + T_comm)     (eq. 4) = c * T_comm * 100 / L

m per pattern (docs/ace.md explains each):
    neighbour patterns (pairs, ring, cart2d, cart3d): D = the number of neighbour directions of an
        interior process (pairs and ring: 1; a cartesian side counts 2 when periodic or of length >= 3,
        else 1); blocking = 2 D (each direction is a send then a receive, in turn), nonblocking = D
        (the receive overlaps the send).
    alltoall: P - 1 (one message to every other rank), either mode.
    allreduce, bcast: ceil(log2 P) (recursive doubling / binomial tree steps), either mode.

With alpha = 75.9 us, beta = 0.01057 us/B and n = 1 MiB the blocking pairwise exchange gives
2 (alpha + beta n) = 22.319 ms: the paper's 22.3 ms for run 3 (23.166 ms, i.e. 23.2, for run 4).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

PATTERNS = ("pairs", "ring", "cart2d", "cart3d", "alltoall", "allreduce", "bcast")
MODES = ("blocking", "nonblocking")
CART_NDIMS = {"cart2d": 2, "cart3d": 3}


def neighbour_directions(pattern: str, dims: list[int] | None = None, periodic: bool = False) -> int:
    """D: directions in which an interior process exchanges a message each cycle."""
    if pattern in ("pairs", "ring"):
        return 1
    if pattern in CART_NDIMS:
        if not dims:
            raise ValueError(f"{pattern} needs dims")
        return sum(2 if (periodic or side >= 3) else 1 for side in dims)
    raise ValueError(f"{pattern} is not a neighbour pattern")


def messages_per_cycle(pattern: str, mode: str, ranks: int, dims: list[int] | None = None,
                       periodic: bool = False) -> float:
    """m: message costs per cycle on a process's critical path (see the module doc)."""
    if pattern not in PATTERNS:
        raise ValueError(f"unknown pattern {pattern!r}")
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}")
    if pattern in ("pairs", "ring") or pattern in CART_NDIMS:
        d = neighbour_directions(pattern, dims, periodic)
        return float(2 * d if mode == "blocking" else d)
    if ranks < 2:
        raise ValueError("collectives need at least 2 ranks")
    if pattern == "alltoall":
        return float(ranks - 1)
    return float(math.ceil(math.log2(ranks)))  # allreduce, bcast


def t_comm(alpha_s: float, beta_s_per_byte: float, size_bytes: int, messages: float) -> float:
    """Communication time of one cycle (eq. 3 with m messages of n bytes)."""
    return messages * (alpha_s + beta_s_per_byte * size_bytes)


def t_comp(t_comm_s: float, load_pct: float) -> float:
    """Busy-wait compute time of one cycle, equation (6)."""
    if not 1 <= load_pct <= 100:
        raise ValueError(f"load {load_pct} is outside [1, 100]")
    return t_comm_s * 100.0 / load_pct - t_comm_s


def t_run(t_comp_s: float, t_comm_s: float, cycles: int) -> float:
    """Predicted run time, equation (4)."""
    return cycles * (t_comp_s + t_comm_s)


@dataclass
class Prediction:
    messages: float
    t_comm_s: float
    t_comp_s: float
    t_cycle_s: float
    t_run_s: float


def predict(alpha_s: float, beta_s_per_byte: float, size_bytes: int, load_pct: float, cycles: int,
            messages: float) -> Prediction:
    tc = max(t_comm(alpha_s, beta_s_per_byte, size_bytes, messages), 0.0)
    tp = t_comp(tc, load_pct)
    return Prediction(messages, tc, tp, tc + tp, t_run(tp, tc, cycles))


def fit_alpha_beta(sizes, times) -> tuple[float, float]:
    """Least-squares line times = alpha + beta * sizes (the per-process phase-1 fit)."""
    import numpy as np

    x = np.asarray(sizes, dtype=float)
    y = np.asarray(times, dtype=float)
    mx, my = x.mean(), y.mean()
    sxx = float(((x - mx) ** 2).sum())
    if sxx <= 0:
        raise ValueError("the fit needs at least two different sizes")
    beta = float(((x - mx) * (y - my)).sum() / sxx)
    return my - beta * mx, beta


def balanced_dims(ranks: int, ndims: int) -> list[int] | None:
    """The most balanced factorisation of ranks into ndims sides, each >= 2 (largest first), or None.

    The same aim as MPI_Dims_create, with every side at least 2 so that a 2-D / 3-D halo is one.
    """
    best: list[int] | None = None

    def rec(n: int, k: int, lo: int, acc: list[int]):
        nonlocal best
        if k == 1:
            if n >= lo:
                cand = sorted(acc + [n], reverse=True)
                if best is None or cand[0] - cand[-1] < best[0] - best[-1]:
                    best = cand
            return
        f = lo
        while f ** k <= n:
            if n % f == 0:
                rec(n // f, k - 1, f, acc + [f])
            f += 1

    rec(ranks, ndims, 2, [])
    return best
