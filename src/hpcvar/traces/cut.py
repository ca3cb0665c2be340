"""Cut a section out of a trace at collectives on MPI_COMM_WORLD (``hpcvar trace cut``).

MPI requires every rank to call the collectives of a communicator in the same order, so "right after the
K-th collective on MPI_COMM_WORLD" names the same point of the program in every task: a cut there is a
consistent cut unless a message or a request crosses it, which is checked. Each task keeps its rows
strictly between the two cut collectives; an ``init`` row at the end of the first cut collective and a
``finalize`` row at the start of the second keep the compute before the first and after the last kept
call (the replay measures compute as the gap between a task's consecutive rows). Used to replay one
section of a program that runs several (HPL inside the HPC Challenge suite: docs/replay.md).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from hpcvar.errors import InputFileError, UsageError
from hpcvar.traces.parquet import COLLECTIVE_OPS, OPS, Trace, make_events, optional_columns

SENDS = ("send", "isend", "sendrecv")
RECVS = ("recv", "irecv", "sendrecv_recv")


def world_collectives(trace: Trace) -> pd.DataFrame:
    """The collective rows on MPI_COMM_WORLD, numbered per task (column ``k``) in call order."""
    ev = trace.events
    rows = ev[ev["op"].isin(sorted(COLLECTIVE_OPS)).to_numpy() & (ev["comm"].to_numpy() == 0)]
    rows = rows.sort_values(["task", "seq"], kind="stable")
    return rows.assign(k=rows.groupby("task").cumcount().to_numpy())


def _resolve(k: int | None, count: int, flag: str) -> int | None:
    if k is None:
        return None
    j = k + count if k < 0 else k
    if not 0 <= j < count:
        raise UsageError(f"collective {k} does not exist: every task calls {count} collectives on "
                         "MPI_COMM_WORLD", flag, f"Use 0..{count - 1}, or -1..-{count} from the end "
                         "('hpcvar trace show' counts them)")
    return j


def _count(coll: pd.DataFrame, ntasks: int, where: str) -> int:
    per = np.bincount(coll["task"].to_numpy(), minlength=ntasks)
    if len(set(per.tolist())) > 1:
        raise InputFileError(f"tasks call different numbers of collectives on MPI_COMM_WORLD ({per.min()} to "
                             f"{per.max()}): no consistent cut exists", where,
                             todo="Was the trace truncated? Trace the application again")
    return int(per[0]) if len(per) else 0


def cut(trace: Trace, after: int | None = None, before: int | None = None, where: str = "trace") -> Trace:
    """The rows strictly between the ``after``-th and the ``before``-th world collective of every task
    (negative: from the end; None: the trace's start or end), with init/finalize rows at the cuts. ``where``
    names the trace in errors."""
    if after is None and before is None:
        raise UsageError("say where to cut", "--after-collective", "Give --after-collective K and/or "
                         "--before-collective K")
    coll = world_collectives(trace)
    count = _count(coll, trace.ntasks, where)
    a = _resolve(after, count, "--after-collective")
    b = _resolve(before, count, "--before-collective")
    if a is not None and b is not None and b <= a:
        raise UsageError(f"--before-collective {before} is not after --after-collective {after}",
                         "--before-collective", "Give a later collective than the first cut")
    ev = trace.events
    seq = ev["seq"].to_numpy()
    task = ev["task"].to_numpy()
    lo = np.full(trace.ntasks, -1, np.int64)
    hi = np.full(trace.ntasks, np.iinfo(np.int64).max, np.int64)
    marks = []
    if a is not None:
        at = coll[coll["k"] == a]
        lo[at["task"].to_numpy()] = at["seq"].to_numpy()
        marks.append(_marks(at, "init", at["t_end_ns"].to_numpy(), after_call=True))
    if b is not None:
        at = coll[coll["k"] == b]
        hi[at["task"].to_numpy()] = at["seq"].to_numpy()
        marks.append(_marks(at, "finalize", at["t_start_ns"].to_numpy(), after_call=False))
    kept = ev[(seq > lo[task]) & (seq < hi[task])]
    _check_consistent(kept, f"the cut (--after-collective {after}, --before-collective {before})", where)
    out = pd.concat([kept.astype({"op": object}), *marks], ignore_index=True)
    out = out.assign(order=np.where(out["op"] == "init", -1, np.where(out["op"] == "finalize", 1, 0)))
    out = out.sort_values(["task", "order", "seq"], kind="stable").drop(columns="order")
    out["seq"] = _renumber(out)
    events = make_events(out.reset_index(drop=True))
    events["op"] = pd.Categorical(events["op"], categories=OPS)
    meta = dict(trace.meta, cut={"after_collective": after, "before_collective": before})
    meta.pop("polls", None)  # counted over the whole run: the rows' poll_ns say what the section holds
    return Trace(events=events, ntasks=trace.ntasks, comms=dict(trace.comms), timed=trace.timed,
                 source=trace.source, meta=meta)


def _marks(at: pd.DataFrame, op: str, t_ns: np.ndarray, after_call: bool) -> pd.DataFrame:
    """init rows at the end of the cut collectives (nothing before them), finalize rows at their start (the
    computation and polls before the collective are before the finalize row)."""
    rows = pd.DataFrame({"task": at["task"].to_numpy(), "seq": at["seq"].to_numpy(), "op": op,
                         "t_start_ns": t_ns, "t_end_ns": t_ns})
    for c in optional_columns(at):
        rows[c] = 0 if after_call else at[c].to_numpy()
    return rows


def _renumber(out: pd.DataFrame) -> np.ndarray:
    """seq = 0, 1, 2, ... per task in the rows' order, and each kept wait's ``req`` (the seq of the post it
    completes) renumbered the same way (``out`` is sorted by task, then the new order; changed in place)."""
    new = out.groupby("task").cumcount().to_numpy()
    waits = (out["op"].to_numpy() == "wait") & (out["req"].to_numpy() >= 0)
    if waits.any():
        old = pd.Series(new, index=pd.MultiIndex.from_arrays([out["task"].to_numpy(), out["seq"].to_numpy()]))
        key = pd.MultiIndex.from_arrays([out["task"].to_numpy()[waits], out["req"].to_numpy()[waits]])
        req = out["req"].to_numpy().copy()
        req[waits] = old.reindex(key).to_numpy()  # _check_consistent: every kept wait's post is kept
        out["req"] = req
    return new


def _check_consistent(kept: pd.DataFrame, what: str, where: str) -> None:
    """Every kept message has both ends in the kept rows, and every kept wait its request's post."""
    op = kept["op"].astype(object).to_numpy()
    cols = ["comm", "tag"]
    sends = kept[np.isin(op, SENDS)]
    recvs = kept[np.isin(op, RECVS)]
    s = sends.groupby([sends["task"].rename("src"), sends["peer"].rename("dst"), *cols]).size()
    r = recvs.groupby([recvs["peer"].rename("src"), recvs["task"].rename("dst"), *cols]).size()
    s = s[s.index.get_level_values("dst") >= 0]  # to MPI_PROC_NULL: no receiver
    r = r[r.index.get_level_values("src") >= 0]
    diff = s.sub(r, fill_value=0)
    diff = diff[diff != 0]
    if len(diff):
        (src, dst, comm, tag), n = next(iter(diff.items()))
        side = "sends" if n > 0 else "receives"
        raise InputFileError(f"a message crosses {what}: task {dst if n < 0 else src} {side} {abs(int(n))} more "
                             f"message(s) from {src} to {dst} (communicator {comm}, tag {tag}) than the other "
                             "side has in the kept rows", where, todo="Cut at another collective")
    waits = kept[(op == "wait") & (kept["req"].to_numpy() >= 0)]
    posts = kept[np.isin(op, ("isend", "irecv"))]
    have = pd.MultiIndex.from_arrays([posts["task"], posts["req"]])
    missing = ~pd.MultiIndex.from_arrays([waits["task"], waits["req"]]).isin(have)
    if missing.any():
        t, q = waits[missing].iloc[0][["task", "req"]].tolist()
        raise InputFileError(f"a request crosses {what}: task {t} waits on request {q} posted before the cut",
                             where, todo="Cut at another collective")


__all__ = ["cut", "world_collectives"]
