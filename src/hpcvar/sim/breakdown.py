"""Where a replay's error comes from: measured and predicted communication time per task, split by MPI call
kind and by phase (``hpcvar sim app --breakdown [--phases N]``, table ``replay.breakdown``, docs/replay.md).

* **Kinds** are the trace's op names, with the two rows of a Sendrecv (``sendrecv``, ``sendrecv_recv``) one
  kind, ``sendrecv``; ``init`` and ``finalize`` are not MPI time (as in S_m).
* **Phases** are N equal slices of each task's measured span (first row's start to last row's end); a row
  belongs, whole, to the slice in which its measured call starts, and its predicted time goes to the same
  phase, so both sides of a phase are the same calls.
* **Measured** time of a row: the part of its [t_start, t_end] not already covered by the task's earlier rows
  (rows in time order), so a Waitall's rows (one per request, each with the call's times) and a Sendrecv's two
  rows count the call once, plus its polls (``poll_ns``: the calls that found nothing before it, such as the
  MPI_Iprobe loop before a probe that finds its message); polls before an ``init`` or ``finalize`` row are kind
  ``poll``. The kinds of a task add up to S_m (the union of its MPI rows' intervals plus its polls) in integer
  nanoseconds, exactly.
* **Predicted** time of a row: its simulated end minus its start (0 for a row without a wait, such as an
  Isend, whose post takes no simulated time); the rows of a task add up to S_p (up to floating-point
  rounding: the engine sums them in row order, the breakdown per cell).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from hpcvar.traces.parquet import OPS

if TYPE_CHECKING:
    import pandas as pd

MAX_PHASES = 64  # (t_start - first) * N stays exact in int64 for spans up to 1e17 ns (hpcvar.traces.parquet.MAX_NS)
KINDS = [op for op in OPS if op not in ("init", "finalize", "sendrecv_recv")] + ["poll"]
_KIND_OF_OP = np.array([KINDS.index("sendrecv") if op == "sendrecv_recv" else KINDS.index(op) if op in KINDS
                        else -1 for op in OPS], np.int64)
_POLL = KINDS.index("poll")  # the polls before a row that is not MPI time (init, finalize)


@dataclass
class Grid:
    """The trace's rows (in (task, seq) order) assigned to cells (task, phase, kind); what the breakdown
    needs of the trace, kept after its rows are freed."""

    ntasks: int
    nphases: int
    row_off: np.ndarray       # int64, ntasks + 1: rows of task t in (task, seq) order
    cell: np.ndarray          # int64 per row: (task * nphases + phase) * len(KINDS) + kind, -1 = not MPI time
    calls: np.ndarray         # per cell: rows whose measured call starts a call (not a repeat of the same call)
    measured_ns: np.ndarray   # per cell: measured time (ns, integer-valued)
    phase_bounds_s: np.ndarray  # ntasks x (nphases + 1): phase edges, seconds from the task's first row
    timed: bool

    @property
    def ncells(self) -> int:
        return self.ntasks * self.nphases * len(KINDS)


def _sorted_columns(ev: pd.DataFrame) -> dict[str, np.ndarray]:
    task, seq = ev["task"].to_numpy(), ev["seq"].to_numpy()
    ordered = len(task) < 2 or bool(np.all((task[1:] > task[:-1]) | ((task[1:] == task[:-1]) & (seq[1:] > seq[:-1]))))
    order = None if ordered else np.lexsort((seq, task))
    from hpcvar.sim.replay_native import op_codes

    cols = {"task": task.astype(np.int64), "start": ev["t_start_ns"].to_numpy().astype(np.int64),
            "end": ev["t_end_ns"].to_numpy().astype(np.int64), "op": op_codes(ev["op"]).astype(np.int64),
            "poll": ev["poll_ns"].to_numpy().astype(np.int64) if "poll_ns" in ev.columns else np.zeros(len(task),
                                                                                                      np.int64)}
    return cols if order is None else {k: v[order] for k, v in cols.items()}


def covered_ns(task: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Per row, the ns of its [start, end] not covered by the same task's rows before it in time order
    ((start, end) ascending, ties in row order): the rows' shares of the union of their intervals."""
    from hpcvar.sim.replay import _cummax_by

    out = np.zeros(len(task))
    if not len(task):
        return out
    order = np.lexsort((end, start, task))
    t, s, e = task[order], start[order], end[order]
    first = np.concatenate(([True], t[1:] != t[:-1]))
    reach = _cummax_by(t, e, first)
    prev = np.concatenate(([-np.inf], reach[:-1].astype(np.float64)))
    prev[first] = -np.inf
    out[order] = np.clip(e.astype(np.float64) - np.maximum(s.astype(np.float64), prev), 0.0, None)
    return out


def _phases(c: dict[str, np.ndarray], row_off: np.ndarray, ntasks: int, nphases: int):
    """Per row its phase (slice of its task's span where its measured call starts) and the phase edges."""
    n = np.diff(row_off)
    has = n > 0
    first = np.zeros(ntasks, np.int64)
    last = np.zeros(ntasks, np.int64)
    if len(c["task"]):
        first[has] = np.minimum.reduceat(c["start"], row_off[:-1][has])
        last[has] = np.maximum.reduceat(c["end"], row_off[:-1][has])
    span = last - first
    f, sp = first[c["task"]], span[c["task"]]
    phase = np.where(sp > 0, (c["start"] - f) * nphases // np.maximum(sp, 1), 0)
    bounds = span[:, None] * np.arange(nphases + 1)[None, :] / nphases * 1e-9
    return np.clip(phase, 0, nphases - 1), bounds


def grid(trace, nphases: int = 1) -> Grid:
    """The cells of ``trace``'s rows and their measured side (call counts, measured time)."""
    c = _sorted_columns(trace.events)
    ntasks = trace.ntasks
    row_off = np.searchsorted(c["task"], np.arange(ntasks + 1), side="left").astype(np.int64)
    phase, bounds = _phases(c, row_off, ntasks, nphases)
    kind = _KIND_OF_OP[c["op"]]
    cell = np.where(kind >= 0, (c["task"] * nphases + phase) * len(KINDS) + kind, -1)
    mpi = cell >= 0
    cov = np.zeros(len(cell))
    cov[mpi] = covered_ns(c["task"][mpi], c["start"][mpi], c["end"][mpi])
    ncells = ntasks * nphases * len(KINDS)
    repeat = _repeats(c, mpi)
    calls = np.bincount(cell[mpi & ~repeat], minlength=ncells).astype(np.int64)
    measured = np.bincount(cell[mpi], weights=cov[mpi], minlength=ncells)
    polled = c["poll"] > 0
    if polled.any():  # a row's polls are its kind's; those before init/finalize rows are kind 'poll'
        pcell = np.where(mpi, cell, (c["task"] * nphases + phase) * len(KINDS) + _POLL)
        measured += np.bincount(pcell[polled], weights=c["poll"][polled].astype(np.float64), minlength=ncells)
    return Grid(ntasks, nphases, row_off, cell, calls, measured, bounds, bool(trace.timed))


def _repeats(c: dict[str, np.ndarray], mpi: np.ndarray) -> np.ndarray:
    """Rows that repeat the call of the row before them: a Sendrecv's second half, a Waitall's requests after
    its first (same task, same kind, same start and end)."""
    same = np.zeros(len(mpi), bool)
    if len(mpi) > 1:
        kind = _KIND_OF_OP[c["op"]]
        same[1:] = ((c["task"][1:] == c["task"][:-1]) & (kind[1:] == kind[:-1]) & (c["start"][1:] == c["start"][:-1])
                    & (c["end"][1:] == c["end"][:-1]) & mpi[:-1])
    return same & mpi


def predicted_row_s(g: Grid, res) -> np.ndarray:
    """Per row (in (task, seq) order), its simulated duration in ``res`` (a replay run with its row times):
    end - start, 0 for a row that never waited (the engines' own accounting of S_p)."""
    from hpcvar.sim.replay_native import RowTimes

    nrows = int(g.row_off[-1])
    rs, re_ = res.row_start, res.row_end
    if isinstance(rs, RowTimes) and isinstance(re_, RowTimes) and rs.dense() and len(rs.times()) == nrows:
        start, end = rs.times(), re_.times()
        return np.where(start >= 0, np.where(end >= 0, end, start) - start, 0.0)
    out = np.zeros(nrows)
    for (t, s), t0 in rs.items():
        out[g.row_off[t] + s] = re_.get((t, s), t0) - t0
    return out


def predicted_s(g: Grid, res) -> np.ndarray:
    """Per cell, the predicted time of its rows in ``res``."""
    d = predicted_row_s(g, res)
    mpi = g.cell >= 0
    return np.bincount(g.cell[mpi], weights=d[mpi], minlength=g.ncells)


COLUMNS = ["mapping", "model", "replica", "task", "phase", "phase_start_s", "phase_end_s", "kind", "calls",
           "measured_s", "predicted_s"]


def rows(g: Grid, res, mapping: str, model: str, replica: int) -> pd.DataFrame:
    """The table rows of one replay: one per task x phase x kind with a call in it (or predicted time)."""
    pred = predicted_s(g, res)
    nk = len(KINDS)
    keep = np.flatnonzero((g.calls > 0) | (g.measured_ns > 0) | (pred != 0))
    task, rest = np.divmod(keep, g.nphases * nk)
    phase, kind = np.divmod(rest, nk)
    measured = g.measured_ns[keep] * 1e-9 if g.timed else np.full(len(keep), np.nan)
    import pandas as pd

    return pd.DataFrame({
        "mapping": mapping, "model": model, "replica": replica, "task": task.astype(np.int64),
        "phase": phase.astype(np.int64), "phase_start_s": g.phase_bounds_s[task, phase],
        "phase_end_s": g.phase_bounds_s[task, phase + 1], "kind": np.array(KINDS, object)[kind],
        "calls": g.calls[keep], "measured_s": measured, "predicted_s": pred[keep]}, columns=COLUMNS)


__all__ = ["COLUMNS", "Grid", "KINDS", "MAX_PHASES", "covered_ns", "grid", "predicted_row_s", "predicted_s", "rows"]
