"""Which pairs of nodes a screen measures, in rounds of disjoint pairs.

mpiGraph's schedule: in one round every node is in at most one pair, so that the pairs of a round can be
measured at once without sharing a node's link. hv_screen further splits a round into sub-rounds whose pairs
share no CPU (nodes that are one machine, as on the testbed), which this module cannot know.

- ``all``: every pair, by the circle method of round-robin tournaments (Berger tables): node 0 stays, the others
  rotate; n - 1 rounds of n / 2 pairs for even n, n rounds of (n - 1) / 2 pairs for odd n (one node rests).
- ``ring``: node i with node i + 1 (mod n): n pairs (1 for n = 2), in 2 rounds (3 when n is odd).
- ``random:K``: K random perfect matchings (a seeded shuffle paired off), each a round; with n odd the node left
  out of a matching is paired in an extra round with a random other node, so every node is in at least K pairs
  (a pair drawn twice is measured once, and its matching drawn again, up to 100 times).

The default is ``all`` up to 64 nodes (2,016 pairs) and ``random:4`` above.
"""

from __future__ import annotations

import re

import numpy as np

from hpcvar.errors import UsageError

ALL_UP_TO = 64
DEFAULT_RANDOM_K = 4
MAX_REDRAWS = 100


def parse_pairs(text: str, flag: str = "--pairs") -> tuple[str, int]:
    """'all' | 'ring' | 'random:K' | 'auto' -> (mode, k)."""
    t = text.strip().lower()
    if t in ("all", "ring", "auto"):
        return t, 0
    m = re.fullmatch(r"random:(\d+)", t)
    if m and int(m.group(1)) >= 1:
        return "random", int(m.group(1))
    raise UsageError(f"'{text}' is not a pair plan", flag, "Give all, ring or random:K (K >= 1), e.g. random:3")


def circle_rounds(n: int) -> list[list[tuple[int, int]]]:
    """Every pair of n nodes in rounds of disjoint pairs (the circle method)."""
    ids = list(range(n)) + ([-1] if n % 2 else [])  # -1: the rest of odd n
    m = len(ids)
    rounds = []
    for _ in range(m - 1):
        pairs = [(ids[i], ids[m - 1 - i]) for i in range(m // 2)]
        rounds.append([(min(a, b), max(a, b)) for a, b in pairs if a >= 0 and b >= 0])
        ids = [ids[0], ids[-1], *ids[1:-1]]
    return rounds


def ring_rounds(n: int) -> list[list[tuple[int, int]]]:
    if n < 2:
        return []
    if n == 2:
        return [[(0, 1)]]
    pairs = [(i, (i + 1) % n) for i in range(n)]
    rounds = [[p for i, p in enumerate(pairs) if i % 2 == 0 and not (n % 2 and i == n - 1)],
              [p for i, p in enumerate(pairs) if i % 2 == 1]]
    if n % 2:
        rounds.append([pairs[-1]])
    return [[(min(a, b), max(a, b)) for a, b in r] for r in rounds if r]


def random_rounds(n: int, k: int, seed: int) -> list[list[tuple[int, int]]]:
    rng = np.random.default_rng(seed)
    seen: set[tuple[int, int]] = set()
    rounds: list[list[tuple[int, int]]] = []
    for _ in range(k):
        for _ in range(MAX_REDRAWS):
            perm = [int(x) for x in rng.permutation(n)]
            pairs = [(min(perm[i], perm[i + 1]), max(perm[i], perm[i + 1])) for i in range(0, n - 1, 2)]
            if not any(p in seen for p in pairs):
                break
        pairs = [p for p in pairs if p not in seen]
        seen.update(pairs)
        rounds.append(pairs)
        if n % 2:
            left = perm[-1]
            others = [x for x in range(n) if x != left and (min(x, left), max(x, left)) not in seen]
            if others:
                mate = int(rng.choice(others))
                extra = (min(left, mate), max(left, mate))
                seen.add(extra)
                rounds.append([extra])
    return [r for r in rounds if r]


def plan_rounds(n: int, mode: str, k: int = 0, seed: int = 1) -> list[list[tuple[int, int]]]:
    """The rounds of pairs (a < b) for n nodes; ``auto``: all up to ALL_UP_TO nodes, else random:4."""
    if n < 2:
        return []
    if mode == "auto":
        mode, k = ("all", 0) if n <= ALL_UP_TO else ("random", DEFAULT_RANDOM_K)
    if mode == "all":
        return circle_rounds(n)
    if mode == "ring":
        return ring_rounds(n)
    if mode == "random":
        if n < 3:
            return circle_rounds(n)
        return random_rounds(n, k, seed)
    raise UsageError(f"unknown pair plan '{mode}'", "--pairs", "Give all, ring or random:K")


def coverage(rounds: list[list[tuple[int, int]]], n: int) -> list[int]:
    """Pairs each node is in."""
    out = [0] * n
    for r in rounds:
        for a, b in r:
            out[a] += 1
            out[b] += 1
    return out
