"""Time-aligned attribution of detours to kernel events ('hpcvar noise record --attribute').

This is *matched* attribution: a detour is attributed to a kernel source only when one of that source's
trace events (tracefs, trace clock x86-tsc, i.e. the collector's own TSC cycles) overlaps it in time on
its CPU. The /proc rate matching of ``analysis.attribution`` is a *guess* from counts; both are reported,
each labelled.

- ``align``: all (detour, event) pairs whose closed intervals overlap, with the overlap in cycles.
- ``attribute``: per detour its sources (chronological, joined by " + "), the primary source (largest
  overlap) and the share of the detour's time given to each source (in proportion to the overlaps; equal
  shares when all overlaps are 0).
- ``match_trace``: the per-detour table ``noise.attribution``, the table ``noise.attribution_summary`` and
  the JSON summary per CPU: share of detours and of lost time per source, the unattributed share, the
  attributed share per duration decade, kernel events seen / inside a detour / lost by tracefs.

A detour k spans ``[s_k, s_k + d_k + t_min]``: from the last TSC read before the gap to the first read
after it (d_k is stored minus t_min).
"""

from __future__ import annotations

import numpy as np

UNATTRIBUTED = "unattributed"
MATCHED_HOW = ("matched: every detour is time-aligned with the kernel tracepoints recorded on its CPU (tracefs, "
               "trace clock x86-tsc = the collector's TSC cycles); a source is named only when one of its events "
               "overlaps the detour")
RATE_HOW = ("rate match: /proc counts over the window compared with the rates of periodic detours; a guess from "
            "counts, not a time match")
CLASS_EDGES_NS = (0.0, 1e3, 1e4, 1e5, 1e6, np.inf)


def align(det_start, det_end, ev_start, ev_end) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Pairs (detour index, event index, overlap) of overlapping closed intervals.

    Detours must be sorted by start and by end (the collector's are disjoint and increasing); events may
    be in any order and nest. An event touching a detour at one point overlaps it (overlap 0). Cost:
    O((D + E) log D + pairs).
    """
    ds, de = np.asarray(det_start, dtype=np.int64), np.asarray(det_end, dtype=np.int64)
    es, ee = np.asarray(ev_start, dtype=np.int64), np.asarray(ev_end, dtype=np.int64)
    if ds.shape != de.shape or es.shape != ee.shape:
        raise ValueError("start and end arrays must have equal lengths")
    if (de < ds).any() or (ee < es).any():
        raise ValueError("an interval ends before it starts")
    if (np.diff(ds) < 0).any() or (np.diff(de) < 0).any():
        raise ValueError("detours must be sorted by start and by end")
    empty = np.zeros(0, dtype=np.int64)
    if ds.size == 0 or es.size == 0:
        return empty, empty, empty
    i0 = np.searchsorted(de, es, side="left")  # first detour ending at or after the event's start
    i1 = np.searchsorted(ds, ee, side="right")  # first detour starting after the event's end
    cnt = np.maximum(i1 - i0, 0)
    total = int(cnt.sum())
    if total == 0:
        return empty, empty, empty
    ev_idx = np.repeat(np.arange(es.size, dtype=np.int64), cnt)
    offs = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(cnt) - cnt, cnt)
    det_idx = np.repeat(i0, cnt) + offs
    ov = np.minimum(de[det_idx], ee[ev_idx]) - np.maximum(ds[det_idx], es[ev_idx])
    o = np.lexsort((es[ev_idx], det_idx))
    return det_idx[o], ev_idx[o], np.maximum(ov[o], 0)


def attribute(det_start, det_end, ev_start, ev_end, ev_source) -> dict:
    """Per detour: ``sources`` (chronological by first event, " + "), ``primary`` (largest overlap, then
    earliest), ``n_events``; and ``shares``: a frame (det, source, weight, events) with weights summing to 1
    per attributed detour. Unattributed detours have sources = primary = 'unattributed'."""
    import pandas as pd

    n = len(det_start)
    src_arr = np.asarray(ev_source, dtype=object)
    d_idx, e_idx, ov = align(det_start, det_end, ev_start, ev_end)
    sources = np.full(n, UNATTRIBUTED, dtype=object)
    primary = np.full(n, UNATTRIBUTED, dtype=object)
    n_events = np.zeros(n, dtype=np.int64)
    if d_idx.size == 0:
        return {"sources": sources, "primary": primary, "n_events": n_events, "event_matched": np.zeros(
            len(ev_start), dtype=bool), "shares": pd.DataFrame(columns=["det", "source", "weight", "events"])}
    pairs = pd.DataFrame({"det": d_idx, "source": src_arr[e_idx], "ov": ov,
                          "t": np.asarray(ev_start, dtype=np.int64)[e_idx]})
    per = pairs.groupby(["det", "source"], sort=False).agg(ov=("ov", "sum"), t=("t", "min"),
                                                           events=("ov", "size")).reset_index()
    per = per.sort_values(["det", "t", "source"], kind="stable")
    joined = per.groupby("det", sort=True)["source"].agg(" + ".join)
    sources[joined.index.to_numpy()] = joined.to_numpy()
    top = per.sort_values(["det", "ov", "t"], ascending=[True, False, True], kind="stable").drop_duplicates("det")
    primary[top["det"].to_numpy()] = top["source"].to_numpy()
    cnt = np.bincount(d_idx, minlength=n)
    n_events[:] = cnt
    tot = per.groupby("det")["ov"].transform("sum").to_numpy(dtype=float)
    k = per.groupby("det")["source"].transform("size").to_numpy(dtype=float)
    per["weight"] = np.where(tot > 0, per["ov"].to_numpy(dtype=float) / np.where(tot > 0, tot, 1.0), 1.0 / k)
    matched = np.zeros(len(ev_start), dtype=bool)
    matched[e_idx] = True
    return {"sources": sources, "primary": primary, "n_events": n_events, "event_matched": matched,
            "shares": per[["det", "source", "weight", "events"]].reset_index(drop=True)}


def _cpu_session(session: dict, cpu: int) -> dict:
    return (session.get("cpus") or {}).get(str(cpu)) or {}


def match_cpu(trace, c, kev, session: dict) -> tuple:
    """(per-detour frame, summary rows, summary dict) for one CpuTrace ``c``; ``kev`` holds this CPU's
    kernel intervals with ``start_cycles``/``end_cycles`` relative to the collector's common start."""
    import pandas as pd

    from hpcvar.noise.trace import recorded_starts

    ns = 1e9 / trace.freq_hz
    t_min = int(c.meta.get("t_min_cycles", 0))
    s = recorded_starts(c)
    e = s + c.duration + t_min
    dur_ns = c.duration * ns
    cs = _cpu_session(session, c.cpu)
    lost = int(cs.get("lost", 0))
    covered = np.ones(c.events, dtype=bool)
    if lost and cs.get("last_cycles") is not None:  # overwrite off: a full buffer dropped the newest events
        covered = s <= int(cs["last_cycles"])
    in_win = ((kev["end_cycles"] >= 0) & (kev["start_cycles"] <= c.length)).to_numpy()
    kw = kev[in_win]
    att = attribute(s, e, kw["start_cycles"].to_numpy(), kw["end_cycles"].to_numpy(), kw["source"].to_numpy())
    det = pd.DataFrame({"cpu": c.cpu, "event": np.arange(c.events, dtype=np.int64), "start_ns": s * ns,
                        "duration_ns": dur_ns, "sources": att["sources"].astype(str),
                        "primary": att["primary"].astype(str), "kernel_events": att["n_events"],
                        "covered": covered})
    cov_n = int(covered.sum())
    lost_total = float(dur_ns[covered].sum())
    attributed = covered & (att["n_events"] > 0)
    sh = att["shares"]
    ev_n = kw.groupby("source").size()  # kernel events per source in the window

    def row(src, detours, lost_ns, events, in_detours):
        return {"cpu": c.cpu, "source": src, "detours": int(detours), "detour_share": detours / cov_n if cov_n else 0.0,
                "lost_ns": float(lost_ns), "lost_share": lost_ns / lost_total if lost_total else 0.0,
                "kernel_events": int(events), "kernel_events_in_detours": int(in_detours)}

    rows, seen = [], set()
    if len(sh):
        sh = sh[covered[sh["det"].to_numpy(dtype=np.int64)]]
        w_ns = sh["weight"].to_numpy(dtype=float) * dur_ns[sh["det"].to_numpy(dtype=np.int64)]
        g = sh.assign(lost_ns=w_ns).groupby("source").agg(detours=("det", "nunique"), lost_ns=("lost_ns", "sum"))
        ev_m = kw[att["event_matched"]].groupby("source").size()
        for src, r in g.iterrows():
            rows.append(row(src, r["detours"], r["lost_ns"], ev_n.get(src, 0), ev_m.get(src, 0)))
        seen = set(g.index)
    rows += [row(src, 0, 0.0, n_ev, 0) for src, n_ev in ev_n.items() if src not in seen]  # never in a detour
    rows.sort(key=lambda r: (-r["lost_ns"], -r["detours"], r["source"]))
    un = covered & ~attributed
    un_ns = float(dur_ns[un].sum())
    rows.append(row(UNATTRIBUTED, un.sum(), un_ns, 0, 0))
    classes = []
    for lo, hi in zip(CLASS_EDGES_NS[:-1], CLASS_EDGES_NS[1:], strict=True):
        m = covered & (dur_ns >= lo) & (dur_ns < hi)
        if m.any():
            classes.append({"lo_ns": lo, "hi_ns": None if np.isinf(hi) else hi, "detours": int(m.sum()),
                            "attributed_share": float((attributed & m).sum() / m.sum())})
    summary = {"cpu": c.cpu, "detours": c.events, "covered_detours": cov_n, "attributed": int(attributed.sum()),
               "attributed_share": attributed.sum() / cov_n if cov_n else 0.0,
               "unattributed_share": un.sum() / cov_n if cov_n else 0.0,
               "lost_ns": lost_total, "unattributed_lost_share": un_ns / lost_total if lost_total else 0.0,
               "kernel_events": int(len(kw)), "kernel_events_in_detours": int(att["event_matched"].sum()),
               "trace_records": int(cs.get("records", 0)), "lost_kernel_events": lost,
               "sources": [{k: v for k, v in r.items() if k != "cpu"} for r in rows], "classes": classes}
    return det, rows, summary


SUMMARY_COLUMNS = ["cpu", "source", "detours", "detour_share", "lost_ns", "lost_share", "kernel_events",
                   "kernel_events_in_detours"]


def match_trace(trace, kev, session: dict) -> tuple:
    """(noise.attribution frame, noise.attribution_summary frame, JSON dict) for every CPU of ``trace``.

    ``kev`` is the ``noise.kernel_events`` frame (cpu, source, kind, start_cycles, end_cycles, complete);
    ``session`` the tracefs facts stored with the run (clock, events, buffer, per-CPU records and losses)."""
    import pandas as pd

    dets, rows, cpus = [], [], []
    for c in trace.cpus:
        k = kev[kev["cpu"] == c.cpu]
        det, r, summ = match_cpu(trace, c, k, session)
        dets.append(det)
        rows += r
        cpus.append(summ)
    lost = sum(s["lost_kernel_events"] for s in cpus)
    out = {"available": True, "how": MATCHED_HOW, "clock": session.get("clock"), "events": session.get("events", []),
           "buffer_kb": session.get("buffer_kb"), "lost_kernel_events": lost, "cpus": cpus}
    if lost:
        out["warning"] = (f"tracefs lost {lost} kernel events (buffer full); detours after the last recorded "
                          "event are left out of the shares")
    return pd.concat(dets, ignore_index=True), pd.DataFrame(rows, columns=SUMMARY_COLUMNS), out


__all__ = ["align", "attribute", "match_cpu", "match_trace", "UNATTRIBUTED", "MATCHED_HOW", "RATE_HOW"]
