"""Views of a screen: the one-line answer first, nodes and links, findings with the median of the others and what
they cost; the report section with node-by-node heat maps of bandwidth and latency and per-node noise bars."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from hpcvar.compare import Metric
from hpcvar.report.sections import BAD, GOOD, SUSPECT, Headline, Section
from hpcvar.units import format_time_ns

STATUS_STYLE = {"OK": "bold green", "DEGRADED": "bold red", "UNRELIABLE": "bold yellow"}
STATUS_HEADLINE = {"OK": GOOD, "DEGRADED": BAD, "UNRELIABLE": SUSPECT}
ANNOTATE_UP_TO = 16  # nodes: heat-map cells carry their value up to this many nodes
RULE = ("Outliers: modified z-score 0.6745 (x - median) / MAD' beyond 3.5 on the metric's bad side (Iglewicz & "
        "Hoaglin), MAD' = max(MAD, the metric's floor), and never when the item's 95% CI overlaps the rest's "
        "(hpcvar.stats.outliers; docs/screen.md). A node's links are its fault when their median stands out among "
        "the nodes and every one of them stands out against the other nodes' links; otherwise the links that "
        "stand out are named as pairs.")


def _mbit(v: float) -> str:
    return "-" if not math.isfinite(v) else f"{v * 8 / 1e6:.4g}"


def _answer(run) -> dict:
    return (run.info.get("result") or {}).get("answer") or {}


# ---- terminal ----------------------------------------------------------------------------------------------
def render(console, run) -> None:
    from rich.markup import escape
    from rich.table import Table

    res = run.info.get("result") or {}
    a = _answer(run)
    console.print(f"[{STATUS_STYLE.get(str(a.get('status')), 'bold')}]{escape(a.get('line', ''))}[/]")
    nm = run.read_table("screen.node_metrics") if run.has_table("screen.node_metrics") else pd.DataFrame()
    if len(nm):
        console.print(_nodes_table(nm, Table))
    lm = run.read_table("screen.link_metrics") if run.has_table("screen.link_metrics") else pd.DataFrame()
    hosts = list(res.get("nodes") or [])
    if len(lm) and len(hosts) <= ANNOTATE_UP_TO:
        for metric, title, cell in (("link_bandwidth", "Bandwidth (Mbit/s), row sends to column", _mbit),
                                    ("link_latency", "8-byte one-way latency (us)", lambda v: f"{v / 1e3:.3g}")):
            console.print(_matrix_table(lm[lm["metric"] == metric], hosts, title, cell, Table))
    f = run.read_table("screen.findings") if run.has_table("screen.findings") else pd.DataFrame()
    if len(f):
        console.print(_findings_table(f, Table))
    checks = res.get("expectations") or []
    bad = [c for c in checks if c["status"] != "passed"]
    if checks:
        console.print(f"expectations: {len(checks) - len([c for c in bad if c['status'] == 'failed'])} of "
                      f"{len(checks)} met", markup=False)
    for c in bad:
        console.print(f"  {c['status']}: {c['where']} {c['metric']} {c['value']:.4g} (expected {c['bound']}, "
                      f"{c['source']})", markup=False)


def _nodes_table(nm: pd.DataFrame, Table):
    t = Table(title="Nodes", title_justify="left")
    for col in ("node", "OS noise", "longest detour", "compute", "clock read", "shm latency", "throttled",
                "measured"):
        t.add_column(col, justify="left" if col in ("node", "measured") else "right")
    for host, g in nm.groupby("host", sort=False):
        v = {r.metric: r for r in g.itertuples(index=False)}
        why = next((r.why for r in g.itertuples(index=False) if r.why), "")
        t.add_row(str(host), _cell(v, "noise_fraction", lambda r: f"{r.value:.3g}%"),
                  _cell(v, "longest_detour", lambda r: format_time_ns(r.value)),
                  _cell(v, "compute_rate", lambda r: f"{r.value / 1e6:.4g} Mop/s"),
                  _cell(v, "timer_cost", lambda r: format_time_ns(r.value)),
                  _cell(v, "shm_latency", lambda r: format_time_ns(r.value)),
                  _cell(v, "cpu_throttled", lambda r: f"{r.value:.2g}%"),
                  f"[yellow]disturbed: {why}[/]" if why else "undisturbed")
    return t


def _cell(v: dict, name: str, text) -> str:
    """A node's figure, red when the outlier rule flagged it or it is beyond the metric's own bound."""
    from hpcvar.screen.analysis import METRICS

    r = v.get(name)
    if r is None:
        return "-"
    return f"[red]{text(r)}[/]" if r.outlier or METRICS[name].beyond(r.value) else text(r)


def _matrix_table(g: pd.DataFrame, hosts: list[str], title: str, cell, Table):
    t = Table(title=title, title_justify="left")
    t.add_column("")
    for h in hosts:
        t.add_column(h, justify="right")
    val = {(r.src, r.dst): r.value for r in g.itertuples(index=False)}
    sym = all(m == "link_latency" for m in g["metric"])
    for a in hosts:
        row = []
        for b in hosts:
            v = val.get((a, b), val.get((b, a)) if sym else None)
            row.append("" if a == b or v is None else cell(v))
        t.add_row(a, *row)
    return t


def _findings_table(f: pd.DataFrame, Table):
    from hpcvar.expect import fmt

    t = Table(title="Findings", title_justify="left")
    for col in ("where", "what", "value", "median of the others", "ratio", "z or bound", "status", "what it costs"):
        t.add_column(col, justify="right" if col in ("value", "median of the others", "ratio", "z or bound")
                     else "left")
    for r in f.itertuples(index=False):
        what = r.metric.replace("_", " ") + (f" ({r.side})" if r.side and r.side != "any" else "")
        cost = "" if not math.isfinite(r.cost) else f"{100 * r.cost:+.0f}%"
        cause = getattr(r, "cause", "") or ""  # screens stored before the column have none
        t.add_row(r.where, what, fmt(r.metric, r.value), fmt(r.metric, r.reference),
                  f"{r.ratio:.2f}x" if math.isfinite(r.ratio) else "-", _rule(r._asdict(), short=True),
                  r.status + (f": {r.why}" if r.why else "") + (f" ({cause})" if cause else ""), cost)
    return t


def _rule(f: dict, short: bool = False) -> str:
    """What judged a finding: its z against the threshold, or the metric's own bound (cpu_throttled)."""
    from hpcvar.expect import fmt
    from hpcvar.screen.analysis import METRICS

    m = METRICS[f["metric"]]
    if math.isfinite(m.bound):
        side = "at most" if m.higher_is_worse else "at least"
        return f"{side} {fmt(m.name, m.bound)}" + ("" if short else " (its own bound, not the others')")
    return f"{f['z']:+.1f}" if short else f"z {f['z']:+.1f} against threshold {f['threshold']:g}"


# ---- plots -------------------------------------------------------------------------------------------------
def plots(run) -> list[Path]:
    res = run.info.get("result") or {}
    hosts = list(res.get("nodes") or [])
    out = []
    if run.has_table("screen.link_metrics") and len(hosts) > 1:
        lm = run.read_table("screen.link_metrics")
        f = run.read_table("screen.findings") if run.has_table("screen.findings") else pd.DataFrame()
        out += _heat(run, lm, f, hosts, "link_bandwidth", "screen_bandwidth")
        out += _heat(run, lm, f, hosts, "link_latency", "screen_latency")
    if run.has_table("screen.node_metrics"):
        out += _node_bars(run, run.read_table("screen.node_metrics"))
    return out


def _matrix(lm: pd.DataFrame, hosts: list[str], metric: str) -> np.ndarray:
    idx = {h: i for i, h in enumerate(hosts)}
    m = np.full((len(hosts), len(hosts)), np.nan)
    for r in lm[lm["metric"] == metric].itertuples(index=False):
        if r.src in idx and r.dst in idx:
            m[idx[r.src], idx[r.dst]] = r.value
            if metric == "link_latency":
                m[idx[r.dst], idx[r.src]] = r.value
    return m


def _flagged_cells(f: pd.DataFrame, hosts: list[str], metric: str) -> set[tuple[int, int]]:
    idx = {h: i for i, h in enumerate(hosts)}
    cells = set()
    for r in f[f["metric"] == metric].itertuples(index=False) if len(f) else []:
        if r.scope == "pair":
            a, b = r.hosts.split(",")
            cells.add((idx[a], idx[b]))
            if metric == "link_latency":
                cells.add((idx[b], idx[a]))
        elif r.scope == "node" and r.where in idx:
            i = idx[r.where]
            for j in range(len(hosts)):
                if j != i:
                    if r.side in ("send", "both", "any", ""):
                        cells.add((i, j))
                    if r.side in ("receive", "both", "any", ""):
                        cells.add((j, i))
    return cells


def _heat(run, lm: pd.DataFrame, f: pd.DataFrame, hosts: list[str], metric: str, name: str) -> list[Path]:
    from matplotlib.patches import Rectangle

    from hpcvar.report.plots import figure, label_cells, save

    m = _matrix(lm, hosts, metric)
    if not np.isfinite(m).any():
        return []
    bw = metric == "link_bandwidth"
    show = m * 8 / 1e6 if bw else m / 1e3
    n = len(hosts)
    side = min(2.0 + 0.55 * n, 14.0)
    fig, ax = figure(figsize=(side + 1.6, side))
    ax.grid(False)
    cmap = "viridis" if bw else "viridis_r"  # bright = good either way
    im = ax.imshow(np.ma.masked_invalid(show), cmap=cmap, aspect="equal")
    fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04).set_label("Mbit/s" if bw else "one-way latency (us)")
    ax.set_xticks(range(n), hosts, rotation=45, ha="right", fontsize=max(6, 10 - n // 8))
    ax.set_yticks(range(n), hosts, fontsize=max(6, 10 - n // 8))
    ax.set_xlabel("receiving node" if bw else "node")
    ax.set_ylabel("sending node" if bw else "node")
    ax.set_title(("Bandwidth, " if bw else "8-byte latency, ") + f"{n} nodes (outliers framed red)")
    if n <= ANNOTATE_UP_TO:
        label_cells(ax, im, show)
    for i, j in _flagged_cells(f, hosts, metric):
        ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, edgecolor="red", linewidth=2.5))
    return [save(fig, run.plots_dir() / name)[0]]


def _node_bars(run, nm: pd.DataFrame) -> list[Path]:
    """Per node: the noise, the kernel's speed and, when a node was throttled at all, its throttled share (its
    dashed line the metric's own bound, not the median)."""
    from hpcvar.report.plots import figure, save
    from hpcvar.screen.analysis import METRICS

    thr = nm[nm["metric"] == "cpu_throttled"]["value"]
    panels = [(m, lbl) for m, lbl in (("noise_fraction", "CPU time lost to OS noise (%)"),
                                       ("compute_rate", "compute kernel (Mop/s)"),
                                       ("cpu_throttled", "CPU time throttled by a quota (%)"))
              if (nm["metric"] == m).any() and (m != "cpu_throttled" or (thr > 0).any())]
    if not panels:
        return []
    hosts = list(dict.fromkeys(nm["host"]))
    fig, axes = figure(len(panels), 1, figsize=(max(5.0, 1.0 + 0.5 * len(hosts)), 2.6 * len(panels)))
    axes = np.atleast_1d(axes)
    for ax, (metric, label) in zip(axes, panels, strict=True):
        g = nm[nm["metric"] == metric].set_index("host").reindex(hosts)
        scale = 1e-6 if metric == "compute_rate" else 1.0
        v = g["value"].to_numpy() * scale
        err = np.vstack([v - g["ci_lo"].to_numpy() * scale, g["ci_hi"].to_numpy() * scale - v])
        m = METRICS[metric]
        bad = g["outlier"].fillna(False).to_numpy(bool) | np.array([m.beyond(x) for x in g["value"]], bool)
        colors = ["#d62728" if o else ("#bbbbbb" if not ok else "#1f77b4")
                  for o, ok in zip(bad, g["valid"].fillna(True), strict=True)]
        ax.bar(range(len(hosts)), v, color=colors, yerr=np.nan_to_num(np.abs(err)), capsize=3)
        ax.axhline(m.bound if np.isfinite(m.bound) else float(np.nanmedian(v)), color="k", lw=0.8, ls="--")
        ax.set_xticks(range(len(hosts)), hosts, rotation=45, ha="right", fontsize=8)
        ax.set_ylabel(label, fontsize=8)
    axes[0].set_title("Per node, 95% CI; red: outlier or over its bound, grey: disturbed by load; dashed: median "
                      "(throttled: its bound)", fontsize=9)
    return [save(fig, run.plots_dir() / "screen_nodes")[0]]


# ---- report and compare ------------------------------------------------------------------------------------
def section(run) -> Section:
    from hpcvar.expect import fmt

    res = run.info.get("result") or {}
    a = _answer(run)
    sec = Section(title="Screen: which node, which link")
    sec.headlines.append(Headline("answer", a.get("status", "?"), a.get("line", ""),
                                  STATUS_HEADLINE.get(str(a.get("status")), SUSPECT),
                                  "the other nodes of this screen" + (
                                      f" and the expectations of {res['expectations'][0]['source'].split(':')[0]}"
                                      if res.get("expectations") else "")))
    for f in res.get("findings") or []:
        sec.headlines.append(Headline(
            f"{f['where']}: {f['metric'].replace('_', ' ')}", fmt(f["metric"], f["value"]),
            (f"{f['ratio']:.2f}x the median of the others ({fmt(f['metric'], f['reference'])})"
             if math.isfinite(f["ratio"]) else f"the median of the others {fmt(f['metric'], f['reference'])}")
            + (f"; {f['cost_text']}" if f.get("cost_text") else "") + (f"; {f['cause']}" if f.get("cause") else ""),
            BAD if f["status"] == "degraded" else SUSPECT,
            _rule(f) + (f"; {f['why']}" if f["why"] else "")))
    for p in ("screen_bandwidth", "screen_latency", "screen_nodes"):
        fp = run.path / "plots" / f"{p}.png"
        if fp.is_file():
            sec.figures.append(({"screen_bandwidth": "Bandwidth between every pair of nodes (row sends)",
                                 "screen_latency": "8-byte one-way latency between every pair of nodes",
                                 "screen_nodes": "Per-node OS noise and compute speed (and the share a CPU quota "
                                                 "throttled, when one did)"}[p], fp))
    for name, cap in (("screen.findings", "Findings"), ("screen.node_metrics", "Per-node figures"),
                      ("screen.expect", "Expectations")):
        if run.has_table(name):
            sec.tables.append((cap, run.read_table(name)))
    sec.notes.append(RULE)
    return sec


def metrics(run) -> list[Metric]:
    out = []
    if run.has_table("screen.noise_windows"):
        w = run.read_table("screen.noise_windows")
        out += [Metric(f"screen {h} noise lost per 100 ms", g["lost_fraction"].to_numpy(), True, "")
                for h, g in w.groupby("host")]
    if run.has_table("screen.kernel"):
        k = run.read_table("screen.kernel")
        out += [Metric(f"screen {h} kernel ns per iteration", g["ns_per_iter"].to_numpy(), True, "ns")
                for h, g in k.groupby("host")]
    if run.has_table("screen.load") and run.has_table("screen.nodes"):
        from hpcvar.screen.analysis import THROTTLED_PCT, throttled_items

        shares = throttled_items({t: run.read_table(t) for t in ("screen.load", "screen.nodes")})
        # 0 without a quota: a move below the share the screen itself names a quota at is no change
        out += [Metric(f"screen {h} CPU time throttled", x, True, "%", floor=THROTTLED_PCT)
                for h, x in shares.items() if x.size]
    if run.has_table("screen.bw"):
        b = run.read_table("screen.bw")
        out += [Metric(f"screen bandwidth {s}->{d}", g["bw_bytes_per_s"].dropna().to_numpy(), False, "B/s")
                for (s, d), g in b.groupby(["src", "dst"])]
    if run.has_table("screen.lat"):
        lat = run.read_table("screen.lat")
        out += [Metric(f"screen latency {a}-{b}", g["oneway_ns"].to_numpy(), True, "ns")
                for (a, b), g in lat.groupby(["host_a", "host_b"])]
    return out
