"""Bandwidth-sharing models: a penalty (slowdown >= 1) per concurrent communication.

Models (docs/models.md has the equations and our readings of the paper,
Vienne et al., "Predictive models for bandwidth sharing in high performance
clusters", Cluster 2008, section V):

* ``gige``: the Gigabit Ethernet degree model with the sets of strongly slowed
  communications; parameters ``beta``, ``gamma_in``, ``gamma_out``.
* ``myrinet``: the Stop&Go state model (maximal sets of sending communications),
  computed per connected component of the conflict graph; exact enumeration
  up to ``max_states`` states per component, or the bounded ``sample`` method.
* ``maxmin``: max-min fair sharing of each node's outgoing and incoming link
  (progressive filling); penalty = 1 / share.

The stable entry point (also used by the application replay simulator)::

    penalties(comms: list[tuple[str, str]], model: str, params: dict | None = None) -> list[float]
"""

from __future__ import annotations

import json
import random
from collections import defaultdict
from pathlib import Path

from hpcvar.errors import InputFileError, UsageError

MODELS = ("gige", "myrinet", "maxmin")

# The paper's Gigabit Ethernet values (section V-A: beta from Figure 2, gammas from Figure 4).
GIGE_DEFAULTS = {"beta": 0.75, "gamma_in": 0.036, "gamma_out": 0.115}
# Exact Stop&Go enumeration stops beyond this many states in one component (a few seconds of work).
MYRINET_MAX_STATES = 200_000
MYRINET_DEFAULTS = {"method": "exact", "max_states": MYRINET_MAX_STATES, "samples": 20_000, "seed": 1}
PARAMS_FORMAT = 1  # version of the parameter files written by 'hpcvar model fit'


class ModelLimitError(UsageError):
    """A model cannot be computed exactly within its bounds (e.g. too many Stop&Go states)."""


def penalties(comms: list[tuple[str, str]], model: str, params: dict | None = None) -> list[float]:
    """One penalty (>= 1) per communication ``(src_node, dst_node)``, in input order."""
    return [d["penalty"] for d in explain(comms, model, params)]


def explain(comms: list[tuple[str, str]], model: str, params: dict | None = None) -> list[dict]:
    """Penalties with the quantities behind them (degrees, states, shares), one dict per communication."""
    pairs = _check_comms(comms)
    if model == "gige":
        return _gige(pairs, check_params("gige", params))
    if model == "myrinet":
        return _myrinet(pairs, check_params("myrinet", params))
    if model == "maxmin":
        check_params("maxmin", params)
        return _maxmin(pairs)
    raise UsageError(f"unknown model '{model}'", "--model", f"Use one of {', '.join(MODELS)}")


def check_params(model: str, params: dict | None) -> dict:
    """The model's parameters with defaults filled in; UsageError naming a bad key."""
    by_model: dict[str, dict] = {"gige": GIGE_DEFAULTS, "myrinet": MYRINET_DEFAULTS, "maxmin": {}}
    defaults = by_model.get(model)
    if defaults is None:
        raise UsageError(f"unknown model '{model}'", "--model", f"Use one of {', '.join(MODELS)}")
    out: dict = dict(defaults)
    for k, v in (params or {}).items():
        if k not in out:
            known = ", ".join(out) or "none"
            raise UsageError(f"model '{model}' has no parameter '{k}'", f"--{k.replace('_', '-')}",
                             f"Its parameters: {known}")
        out[k] = v
    if model == "gige":
        _check_gige(out)
    elif model == "myrinet":
        _check_myrinet(out)
    return out


def _check_gige(out: dict) -> None:
    for k in GIGE_DEFAULTS:
        try:
            out[k] = float(out[k])
        except (TypeError, ValueError):
            raise UsageError(f"parameter {k}={out[k]!r} is not a number", f"--{k.replace('_', '-')}",
                             "Give a number such as 0.75") from None
    if not out["beta"] > 0:
        raise UsageError(f"beta must be positive, got {out['beta']}", "--beta", "The paper's value is 0.75")


def _check_myrinet(out: dict) -> None:
    if out["method"] not in ("exact", "sample"):
        raise UsageError(f"unknown Stop&Go method '{out['method']}'", "--myrinet-method", "Use exact or sample")
    for k in ("max_states", "samples"):
        if not isinstance(out[k], int) or out[k] < 1:
            raise UsageError(f"{k} must be a positive integer", f"--{k.replace('_', '-')}", "Use e.g. 10000")


def _check_comms(comms) -> list[tuple[str, str]]:
    pairs = []
    if not comms:
        raise UsageError("no communication to model", "SCHEME", "Give at least one communication such as 0 -> 1")
    for k, c in enumerate(comms):
        try:
            s, d = c
        except (TypeError, ValueError):
            raise UsageError(f"communication #{k} is not a (src, dst) pair: {c!r}", "SCHEME",
                             "Pass (src_node, dst_node) pairs") from None
        s, d = str(s), str(d)
        if s == d:
            raise UsageError(f"communication #{k} goes from node '{s}' to itself", "SCHEME",
                             "Keep only transfers between two different nodes")
        pairs.append((s, d))
    return pairs


# ----------------------------------------------------------------------------------------- gige

def _gige(pairs: list[tuple[str, str]], p: dict) -> list[dict]:
    beta, g_in, g_out = p["beta"], p["gamma_in"], p["gamma_out"]
    by_src, by_dst = defaultdict(list), defaultdict(list)
    for k, (s, d) in enumerate(pairs):
        by_src[s].append(k)
        by_dst[d].append(k)
    deg_out = [len(by_src[s]) for s, _ in pairs]
    deg_in = [len(by_dst[d]) for _, d in pairs]
    rows = []
    for k, (s, d) in enumerate(pairs):
        # C_o^m: the communications of the same source whose destination has the largest in-degree
        c_o = by_src[s]
        top_in = max(deg_in[j] for j in c_o)
        com = [j for j in c_o if deg_in[j] == top_in]
        c_i = by_dst[d]
        top_out = max(deg_out[j] for j in c_i)
        cim = [j for j in c_i if deg_out[j] == top_out]
        p_o = _side(deg_out[k], k in com, len(com), beta, g_out)
        p_i = _side(deg_in[k], k in cim, len(cim), beta, g_in)
        rows.append({"penalty": max(1.0, p_o, p_i), "p_out": p_o, "p_in": p_i, "deg_out": deg_out[k],
                     "deg_in": deg_in[k], "strong_out": k in com, "strong_in": k in cim,
                     "card_strong_out": len(com), "card_strong_in": len(cim)})
    return rows


def _side(deg: int, strong: bool, card: int, beta: float, gamma: float) -> float:
    """One side of the gige model (our reading of the lost case labels, docs/models.md)."""
    if deg == 1:
        return 1.0
    if strong:
        return deg * beta * (1.0 + gamma * (deg - card))
    return deg * beta * (1.0 - gamma / card)


# -------------------------------------------------------------------------------------- myrinet

def conflict_components(pairs: list[tuple[str, str]]) -> list[list[int]]:
    """Connected components of the conflict graph (same source or same destination), sorted."""
    parent = list(range(len(pairs)))

    def find(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    first: dict[tuple[str, str], int] = {}
    for k, (s, d) in enumerate(pairs):
        for key in (("s", s), ("d", d)):
            if key in first:
                parent[find(k)] = find(first[key])
            else:
                first[key] = k
    comps = defaultdict(list)
    for k in range(len(pairs)):
        comps[find(k)].append(k)
    return sorted(comps.values())


def _conflict_masks(pairs, comp: list[int]) -> list[int]:
    """Bit masks (over positions in comp) of each communication's conflicting neighbours."""
    masks = []
    for a in comp:
        m = 0
        for j, b in enumerate(comp):
            if a != b and (pairs[a][0] == pairs[b][0] or pairs[a][1] == pairs[b][1]):
                m |= 1 << j
        masks.append(m)
    return masks


def stopgo_states(pairs: list[tuple[str, str]], comp: list[int], max_states: int) -> tuple[int, list[int]]:
    """Exact Stop&Go states of one component: (number of states, emission coefficient per comm).

    A state is a maximal set of communications with no two sharing a source or a destination:
    a maximal independent set of the conflict graph, enumerated as the maximal cliques of its
    complement (Bron-Kerbosch with Tomita pivoting). Raises ModelLimitError beyond max_states.
    """
    n = len(comp)
    conflict = _conflict_masks(pairs, comp)
    full = (1 << n) - 1
    compat = [full & ~conflict[i] & ~(1 << i) for i in range(n)]  # complement graph
    coef = [0] * n
    count = 0
    budget = [50 * max_states + 10_000]  # recursion steps: bounds the work even between states

    def expand(r: int, p: int, x: int) -> None:
        nonlocal count
        budget[0] -= 1
        if budget[0] < 0:
            raise _TooMany()
        if not p and not x:
            count += 1
            if count > max_states:
                raise _TooMany()
            m = r
            while m:
                low = m & -m
                coef[low.bit_length() - 1] += 1
                m ^= low
            return
        # pivot: the vertex of p|x with most neighbours in p
        px = p | x
        best, pivot = -1, 0
        m = px
        while m:
            low = m & -m
            u = low.bit_length() - 1
            c = bin(compat[u] & p).count("1")
            if c > best:
                best, pivot = c, u
            m ^= low
        cand = p & ~compat[pivot]
        while cand:
            low = cand & -cand
            v = low.bit_length() - 1
            expand(r | low, p & compat[v], x & compat[v])
            p &= ~low
            x |= low
            cand ^= low

    try:
        expand(0, full, 0)
    except _TooMany:
        raise ModelLimitError(
            f"a conflict component of {n} communications has more than {max_states} Stop&Go states", "--max-states",
            "Use the bounded sampling method (--myrinet-method sample, params method=sample) or raise --max-states"
        ) from None
    return count, coef


class _TooMany(Exception):
    pass


def stopgo_sample(pairs: list[tuple[str, str]], comp: list[int], samples: int, seed: int) -> list[float]:
    """Bounded method: the fraction of sampled states in which each communication sends.

    States are drawn by random-order greedy filling (each a maximal set), ``samples`` of them, seeded.
    This weights states by how often greedy filling reaches them, not uniformly: an approximation
    (docs/models.md), exact when every state is equally reachable (e.g. a star).
    """
    rng = random.Random(seed)
    n = len(comp)
    conflict = _conflict_masks(pairs, comp)
    hits = [0] * n
    order = list(range(n))
    for _ in range(samples):
        rng.shuffle(order)
        blocked = 0
        for v in order:
            if not blocked >> v & 1:
                hits[v] += 1
                blocked |= conflict[v] | (1 << v)
    return [h / samples for h in hits]


UNSAMPLED_TODO = ("Raise the samples well above the component's size (--samples, or samples in the --params file), "
                  "or use the exact method")


def unsampled_message(size: int, samples: int) -> str:
    """The error of a sampled component in which a communication never sends (both replay engines say it)."""
    return (f"the sampled Stop&Go method drew no state in which one of the {size} communications of a conflict "
            f"component sends ({samples} samples): its penalty is unknown")


def _myrinet(pairs: list[tuple[str, str]], p: dict) -> list[dict]:
    rows: list[dict] = [{} for _ in pairs]
    for cid, comp in enumerate(conflict_components(pairs)):
        if p["method"] == "exact":
            states, coef = stopgo_states(pairs, comp, p["max_states"])
            frac = [c / states for c in coef]
        else:
            states, coef = None, None
            frac = stopgo_sample(pairs, comp, p["samples"], p["seed"])
            if min(frac) == 0:
                raise ModelLimitError(unsampled_message(len(comp), p["samples"]), "--samples", UNSAMPLED_TODO)
        # each communication takes the minimum coefficient among those leaving its source node
        by_src = defaultdict(list)
        for j, k in enumerate(comp):
            by_src[pairs[k][0]].append(j)
        for j, k in enumerate(comp):
            mins = min(frac[i] for i in by_src[pairs[k][0]])
            row = {"penalty": 1.0 / mins, "component": cid,
                   "component_size": len(comp), "method": p["method"], "send_fraction": frac[j]}
            if coef is not None:
                row.update(states=states, coefficient=coef[j],
                           min_coefficient=min(coef[i] for i in by_src[pairs[k][0]]))
                row["penalty"] = states / row["min_coefficient"]
            rows[k] = row
    return rows


# --------------------------------------------------------------------------------------- maxmin

def maxmin_shares(pairs: list[tuple[str, str]]) -> list[float]:
    """Max-min fair rates with every node's outgoing and incoming link of capacity 1 (progressive filling).

    Filled per conflict component (``conflict_components``): the allocation is the same as one filling of all,
    and each component's rounding is its own, so a simulator recomputes only the components a change touches
    (the replay core does) and gets these doubles.
    """
    rate = [0.0] * len(pairs)
    for comp in conflict_components(pairs):
        for k, r in zip(comp, _filling([pairs[k] for k in comp]), strict=True):
            rate[k] = r
    return rate


def _filling(pairs: list[tuple[str, str]]) -> list[float]:
    res_of = [(("out", s), ("in", d)) for s, d in pairs]
    cap: dict = defaultdict(lambda: 1.0)
    rate = [0.0] * len(pairs)
    active = set(range(len(pairs)))
    while active:
        users = defaultdict(list)
        for k in active:
            for r in res_of[k]:
                users[r].append(k)
        inc, _ = min(((cap[r] / len(u), r) for r, u in users.items()), key=lambda t: t[0])
        for k in active:
            rate[k] += inc
        for r, u in users.items():
            cap[r] -= inc * len(u)
        saturated = {r for r in users if cap[r] <= 1e-12}
        active = {k for k in active if not (set(res_of[k]) & saturated)}
    return rate


def _maxmin(pairs: list[tuple[str, str]]) -> list[dict]:
    return [{"penalty": 1.0 / s, "share": s} for s in maxmin_shares(pairs)]


# ------------------------------------------------------------------------------- parameter files

def write_params(path: Path, model: str, params: dict, extra: dict | None = None) -> None:
    from hpcvar.results.store import atomic_write_text

    doc = {"hpcvar_params": PARAMS_FORMAT, "model": model, "params": params}
    doc.update(extra or {})
    atomic_write_text(Path(path), json.dumps(doc, indent=2, sort_keys=True) + "\n")


def load_params(path: str | Path) -> tuple[str, dict]:
    """(model, params) from a parameter file written by 'hpcvar model fit'."""
    p = Path(path)
    try:
        doc = json.loads(p.read_bytes())
    except OSError as e:
        raise UsageError(f"cannot read parameter file '{p}': {e.strerror}", "--params",
                         "Give the file written by 'hpcvar model fit'") from None
    except json.JSONDecodeError as e:
        raise InputFileError(f"not JSON: {e.msg}", str(p), e.lineno, e.colno,
                             "Give the file written by 'hpcvar model fit'") from None
    except (UnicodeDecodeError, RecursionError) as e:
        raise InputFileError(f"not JSON text: {type(e).__name__}", str(p),
                             todo="Give the file written by 'hpcvar model fit'") from None
    if not isinstance(doc, dict) or doc.get("hpcvar_params") != PARAMS_FORMAT:
        raise InputFileError(f"not an hpcvar parameter file of format {PARAMS_FORMAT}", str(p), None, None,
                             "Give the file written by 'hpcvar model fit'")
    model, params = doc.get("model"), doc.get("params")
    if model not in MODELS or not isinstance(params, dict):
        raise InputFileError("the file lacks a known 'model' or its 'params'", str(p), None, None,
                             "Give the file written by 'hpcvar model fit'")
    check_params(model, params)
    return model, params


def fitted_runs(path: str | Path) -> list[str]:
    """The runs a parameter file (already read by load_params) was fitted on ('runs', written by
    'hpcvar model fit'); [] for a file written by hand."""
    doc = json.loads(Path(path).read_bytes())
    runs = doc.get("runs")
    return [str(r) for r in runs] if isinstance(runs, list) else []


__all__ = ["GIGE_DEFAULTS", "MODELS", "ModelLimitError", "check_params", "conflict_components", "explain",
           "fitted_runs", "load_params", "maxmin_shares", "penalties", "stopgo_sample", "stopgo_states",
           "unsampled_message", "write_params"]
