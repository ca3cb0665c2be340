"""Collectives decomposed into point-to-point messages by a named algorithm.

``steps(op, n, me, root, nbytes, algo)`` returns this member's steps; a step
is ``(sends, recvs)``, lists of ``(peer, bytes)`` in comm-relative ranks,
posted together and completed together (isend/irecv + waitall) before the
next step. All members call it with the same arguments except ``me``, so the
messages match. ``nbytes`` is what the tracer records (docs/formats.md):
bcast/reduce/allreduce: the buffer; gather/scatter/allgather: one member's
block; alltoall: everything this member sends; v-variants: this member's
total (the root's: the sum).

Algorithms (``--collectives``):

=============  ====================================  ==================================  ======================
op             binomial                              recdoub                             ring
=============  ====================================  ==================================  ======================
barrier        binomial reduce + bcast (0 B)         dissemination (ceil log2 n rounds)  token around the ring, twice
bcast          binomial tree (MPICH order)           binomial tree                       chain root -> root+1 -> ...
reduce         binomial tree towards the root        binomial tree                       chain towards the root
allreduce      binomial reduce + binomial bcast      recursive doubling (+ fold for      reduce-scatter + allgather
                                                     non-powers of two)                  ring, 2(n-1) steps of n/n
gather         binomial tree, subtree blocks         binomial tree                       linear (all to the root)
scatter        binomial tree, subtree blocks         binomial tree                       linear (root to all)
allgather      binomial gather + bcast of n blocks   recursive doubling (pow2) else ring ring, n-1 steps
alltoall       pairwise exchange, n-1 steps          pairwise exchange                   pairwise exchange
*v variants    linear, per-peer size = average       linear                              linear
=============  ====================================  ==================================  ======================
"""

from __future__ import annotations

ALGORITHMS = ("binomial", "recdoub", "ring")

Step = tuple[list[tuple[int, int]], list[tuple[int, int]]]


def _bcast_binomial(n, vr, b):
    out: list[Step] = []
    mask = 1
    while mask < n:
        if vr & mask:
            out.append(([], [(vr - mask, b)]))
            break
        mask <<= 1
    mask >>= 1
    while mask > 0:
        if vr + mask < n:
            out.append(([(vr + mask, b)], []))
        mask >>= 1
    return out


def _reduce_binomial(n, vr, b):
    out: list[Step] = []
    mask = 1
    while mask < n:
        if vr & mask:
            out.append(([(vr - mask, b)], []))
            break
        if vr + mask < n:
            out.append(([], [(vr + mask, b)]))
        mask <<= 1
    return out


def _subtree(n, vr):
    """Size of the binomial subtree rooted at relative rank vr."""
    if vr == 0:
        return n
    low = vr & -vr
    return min(low, n - vr)


def _gather_binomial(n, vr, b):
    out: list[Step] = []
    mask = 1
    while mask < n:
        if vr & mask:
            out.append(([(vr - mask, b * _subtree(n, vr))], []))
            break
        if vr + mask < n:
            out.append(([], [(vr + mask, b * _subtree(n, vr + mask))]))
        mask <<= 1
    return out


def _scatter_binomial(n, vr, b):
    return [(list(r), list(s)) for s, r in reversed(_gather_binomial(n, vr, b))]


def _chain(n, vr, b, towards_root):
    out: list[Step] = []
    if not towards_root:
        if vr > 0:
            out.append(([], [(vr - 1, b)]))
        if vr < n - 1:
            out.append(([(vr + 1, b)], []))
    else:
        if vr < n - 1:
            out.append(([], [(vr + 1, b)]))
        if vr > 0:
            out.append(([(vr - 1, b)], []))
    return out


def _ring_steps(n, me, b, count):
    return [([((me + 1) % n, b)], [((me - 1) % n, b)]) for _ in range(count)]


def _recdoub_allreduce(n, me, b):
    out: list[Step] = []
    p2 = 1
    while p2 * 2 <= n:
        p2 *= 2
    rem = n - p2
    if me < 2 * rem:
        if me % 2 == 0:  # folded out: give the data to me+1, get the result back at the end
            return [([(me + 1, b)], []), ([], [(me + 1, b)])]
        out.append(([], [(me - 1, b)]))
        newrank = me // 2
    else:
        newrank = me - rem

    def real(nr):
        return nr * 2 + 1 if nr < rem else nr + rem

    mask = 1
    while mask < p2:
        peer = real(newrank ^ mask)
        out.append(([(peer, b)], [(peer, b)]))
        mask <<= 1
    if me < 2 * rem:
        out.append(([(me - 1, b)], []))
    return out


def _relative(steps: list[Step], root: int, n: int) -> list[Step]:
    return [([((p + root) % n, b) for p, b in s], [((p + root) % n, b) for p, b in r]) for s, r in steps]


def steps(op: str, n: int, me: int, root: int, nbytes: int, algo: str) -> list[Step]:
    """This member's steps of one collective (comm-relative ranks)."""
    if n <= 1:
        return []
    root = max(root, 0)
    vr = (me - root) % n
    b = int(nbytes)
    if op == "barrier":
        return _barrier(n, me, algo)
    if op == "bcast":
        return _relative(_chain(n, vr, b, False) if algo == "ring" else _bcast_binomial(n, vr, b), root, n)
    if op == "reduce":
        return _relative(_chain(n, vr, b, True) if algo == "ring" else _reduce_binomial(n, vr, b), root, n)
    if op == "allreduce":
        return _allreduce(n, me, b, algo)
    if op in ("gather", "scatter"):
        if algo == "ring":
            return _linear(op, n, me, root, b)
        fn = _gather_binomial if op == "gather" else _scatter_binomial
        return _relative(fn(n, vr, b), root, n)
    if op in ("gatherv", "scatterv"):
        per = b if me != root else -(-b // max(n - 1, 1))
        return _linear(op[:-1], n, me, root, per)
    if op in ("allgather", "allgatherv"):
        return _allgather(n, me, b if op == "allgather" else -(-b // n), algo)
    if op in ("alltoall", "alltoallv"):
        per = -(-b // n)
        return [([((me + k) % n, per)], [((me - k) % n, per)]) for k in range(1, n)]
    raise ValueError(f"not a collective: {op}")


def _barrier(n: int, me: int, algo: str) -> list[Step]:
    if algo == "recdoub":
        out, k = [], 1
        while k < n:
            out.append(([((me + k) % n, 0)], [((me - k) % n, 0)]))
            k *= 2
        return out
    if algo == "ring":
        one: Step = ([((me + 1) % n, 0)], [])
        if me == 0:
            return [one, ([], [(n - 1, 0)]), one, ([], [(n - 1, 0)])]
        return [([], [(me - 1, 0)]), ([((me + 1) % n, 0)], [])] * 2
    return _reduce_binomial(n, me, 0) + _bcast_binomial(n, me, 0)


def _allreduce(n: int, me: int, b: int, algo: str) -> list[Step]:
    if algo == "recdoub":
        return _recdoub_allreduce(n, me, b)
    if algo == "ring":
        return _ring_steps(n, me, -(-b // n), 2 * (n - 1))
    return _reduce_binomial(n, me, b) + _bcast_binomial(n, me, b)


def _allgather(n: int, me: int, blk: int, algo: str) -> list[Step]:
    if algo == "binomial":
        return _gather_binomial(n, me, blk) + _bcast_binomial(n, me, blk * n)
    if algo == "recdoub" and n & (n - 1) == 0:
        out, mask = [], 1
        while mask < n:
            out.append(([(me ^ mask, blk * mask)], [(me ^ mask, blk * mask)]))
            mask <<= 1
        return out
    return _ring_steps(n, me, blk, n - 1)


def _linear(op, n, me, root, b):
    if op == "gather":
        return [([], [(p, b) for p in range(n) if p != root])] if me == root else [([(root, b)], [])]
    return [([(p, b) for p in range(n) if p != root], [])] if me == root else [([], [(root, b)])]


__all__ = ["ALGORITHMS", "steps"]
