"""What shows a history: the JSON result, the terminal table, the figures, the HTML page and the CSV that Apache
Otava reads as it is (its CsvImporter: a header row, a time column, one numeric column per metric, other columns
taken as attributes; docs/watch.md gives the otava.yaml)."""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path

from hpcvar.history.changes import SYMBOLS, Change
from hpcvar.history.series import Group, Series
from hpcvar.units import format_interval

TIME_COLUMN = "time"  # Otava's default time_column
ATTRIBUTE_COLUMNS = ("run", "command", "hosts", "status", "answer")


def _change_json(c: Change | None) -> dict | None:
    return c.to_json() if c is not None else None


def series_json(s: Series) -> dict:
    return {"metric": s.metric, "unit": s.unit, "higher_is_worse": s.higher_is_worse, "floor": s.floor,
            "points": [{"run": p.run, "started_utc": p.started_utc, "median": p.value, "ci_lo": p.ci_lo,
                        "ci_hi": p.ci_hi, "n": p.n} for p in s.points],
            "segments": [[a + 1, b] for a, b in s.segments],
            "changes": [c.to_json() for c in s.changes], "latest": _change_json(s.latest)}


def group_json(g: Group) -> dict:
    changes = [c for s in g.series for c in s.changes]
    starts = [s.latest for s in g.series if s.latest is not None and s.latest.confirmed]
    return {"command": g.key[1], "hosts": g.key[0].split(",") if g.key[0] else [], "label": g.label,
            "runs": [{"run": r.id, "started_utc": r.info.get("started_utc"), "status": r.info.get("status"),
                      "answer": _answer(r)} for r in g.runs],
            "change_points": _by_run(changes, g), "last_run_starts_change": bool(starts),
            "last_run_changes": [c.to_json() for c in starts],
            "series": [series_json(s) for s in g.series]}


def _answer(run) -> str:
    """The run's one-line answer (OK, DEGRADED, UNRELIABLE; screen and characterize), '' when it has none."""
    a = (run.info.get("result") or {}).get("answer")
    return str(a.get("status", "")) if isinstance(a, dict) else ""


def change_text(pct: float) -> str:
    """A change of a median in percent as people read it; a rise from a median of 0 (a throttled share before a
    quota) is no percentage: 'from 0'."""
    return f"{pct:+.1f}%" if math.isfinite(pct) else "from 0"


def _by_run(changes: list[Change], g: Group) -> list[dict]:
    """The confirmed changes gathered by the run they start at: one change point may move several metrics."""
    out: dict[int, dict] = {}
    for c in sorted(changes, key=lambda c: (c.at, c.metric)):
        d = out.setdefault(c.at, {"at": c.at + 1, "run": c.run, "started_utc": c.started_utc, "metrics": []})
        d["metrics"].append({"metric": c.metric, "symbol": c.symbol, "verdict": c.verdict,
                             "change_pct": c.test["change_pct"]})
    return list(out.values())


def result_json(groups: list[Group], skipped: list, settings: dict) -> dict:
    gj = [group_json(g) for g in groups]
    return {**settings, "groups": gj, "skipped_runs": [{"run": r.id, "status": r.status} for r in skipped],
            "last_run_starts_change": any(g["last_run_starts_change"] for g in gj),
            "symbols": [{"symbol": s, "meaning": m} for s, m in SYMBOLS]}


# ---- CSV for Apache Otava --------------------------------------------------------------------------------------
def metric_column(s: Series) -> str:
    return f"{s.metric} ({s.unit})" if s.unit else s.metric


def csv_text(g: Group) -> str:
    """One row per run: ``time`` (ISO 8601 UTC), the attributes, then per metric its median and the 95% CI
    (``<metric> ci_lo``/``ci_hi``); a metric a run lacks is ``nan`` (Otava parses every metric cell as a float)."""
    cols = [TIME_COLUMN, *ATTRIBUTE_COLUMNS]
    for s in g.series:
        m = metric_column(s)
        cols += [m, f"{m} ci_lo", f"{m} ci_hi"]
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(cols)
    for run in g.runs:
        row = [run.info.get("started_utc"), run.id, g.key[1], g.key[0], run.info.get("status"), _answer(run)]
        for s in g.series:
            p = next((p for p in s.points if p.run == run.id), None)
            row += [repr(v) for v in ((p.value, p.ci_lo, p.ci_hi) if p else (math.nan,) * 3)]
        w.writerow(row)
    return buf.getvalue()


# ---- terminal ----------------------------------------------------------------------------------------------------
def _fmt(v: float, unit: str) -> str:
    from hpcvar.units import format_time_ns

    if not math.isfinite(v):
        return "-"
    return format_time_ns(v) if unit == "ns" else f"{v:.4g}" + (f" {unit}" if unit else "")


def render(console, res: dict) -> None:
    from rich.markup import escape
    from rich.table import Table

    if not res["groups"]:
        console.print("no runs in this window" + (f" ({len(res['skipped_runs'])} in progress, interrupted or lost "
                                                  "left out)" if res["skipped_runs"] else ""), markup=False)
    for g in res["groups"]:
        n = len(g["runs"])
        console.print(f"[bold]{escape(g['label'])}[/]: {n} run(s), {g['runs'][0]['started_utc']} .. "
                      f"{g['runs'][-1]['started_utc']}")
        if not g["change_points"]:
            console.print("  no change confirmed", markup=False)
        for cp in g["change_points"]:
            moved = "; ".join(f"{m['symbol']} {m['metric']} {change_text(m['change_pct'])}" for m in cp["metrics"])
            console.print(f"  change at run {cp['at']} ({cp['run']}, {cp['started_utc']}): {moved}", markup=False)
        if g["last_run_starts_change"]:
            for c in g["last_run_changes"]:
                console.print(f"  [bold red]the last run starts a change[/]: {c['symbol']} {escape(c['metric'])} "
                              f"{change_text(c['change_pct'])} against runs "
                              f"{c['runs_before'][0]}-{c['runs_before'][1]}")
        t = Table(title="Latest run against the runs since the last change", title_justify="left")
        for col in ("metric", "latest", "95% CI", "since run", "level then", "change", "symbol"):
            t.add_column(col, justify="left" if col in ("metric", "symbol") else "right")
        for s in g["series"]:
            p, c = s["points"][-1], s["latest"]
            t.add_row(s["metric"], _fmt(p["median"], s["unit"]),
                      _ci_text(p, s["unit"]),
                      str(s["segments"][-1][0]) if s["segments"] else "-",
                      _fmt(c["baseline_median"], s["unit"]) if c else "-",
                      change_text(c["change_pct"]) if c else "-", (c["symbol"] if c else "") +
                      (" (change)" if c and c["verdict"] != "unchanged" else ""))
        console.print(t)
    if res["skipped_runs"]:
        console.print(f"left out: {len(res['skipped_runs'])} run(s) in progress, interrupted or lost", markup=False)


# ---- figures -----------------------------------------------------------------------------------------------------
def _times(s: Series):
    import datetime as dt

    return [dt.datetime.fromisoformat(p.started_utc.replace("Z", "+00:00")) for p in s.points]


def _display_unit(s: Series) -> tuple[str, float]:
    """Times in ns drawn in us, ms or s by their size; other units as they are."""
    if s.unit != "ns" or not s.points:
        return s.unit, 1.0
    top = max(abs(p.value) for p in s.points)
    for unit, scale in (("s", 1e-9), ("ms", 1e-6), ("us", 1e-3)):
        if top * scale >= 1:
            return unit, scale
    return "ns", 1.0


def series_figure(s: Series, title: str):
    """The series with its 95% CIs, each segment's level (median of its runs' medians) and each confirmed change
    with its symbol; a confirmed last-run change in red."""
    import matplotlib.dates as mdates
    import numpy as np

    from hpcvar.report.plots import figure

    x = _times(s)
    unit, scale = _display_unit(s)
    y = np.array([p.value for p in s.points]) * scale
    err = np.array([[p.value - p.ci_lo for p in s.points], [p.ci_hi - p.value for p in s.points]]) * scale
    fig, ax = figure(figsize=(7.2, 2.8))
    ax.errorbar(x, y, yerr=np.abs(err), fmt="o", ms=4, capsize=2, color="#1f77b4", label="run median, 95% CI")
    for a, b in s.segments:
        ax.hlines(float(np.median(y[a:b])), x[a], x[b - 1], colors="#555555", lw=1.5, zorder=1)
    for c in s.changes:
        at = x[c.at - 1] + (x[c.at] - x[c.at - 1]) / 2
        color = "#c62828" if c.verdict == "degraded" else "#2e7d32"
        ax.axvline(at, color=color, ls="--", lw=1)
        ax.annotate(c.symbol, (at, 1.0), xycoords=("data", "axes fraction"), ha="center", va="bottom",
                    color=color, fontsize=10, fontweight="bold")
    if s.latest is not None and s.latest.confirmed:
        ax.plot([x[-1]], [y[-1]], "o", ms=9, mfc="none", mec="#c62828", mew=2, label="last run starts a change")
    ax.set_ylabel(f"median ({unit})" if unit else "median")
    ax.set_title(title, fontsize=9, loc="left", pad=14)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(ax.xaxis.get_major_locator()))
    if len(ax.get_legend_handles_labels()[0]) > 1:
        ax.legend(fontsize=7, loc="best")
    return fig


def _changed_first(g: Group) -> list[Series]:
    return sorted(g.series, key=lambda s: (not (s.changes or (s.latest is not None and s.latest.confirmed)),))


def plot_group(g: Group, directory: Path, prefix: str) -> list[Path]:
    """A figure per metric of the group into ``directory`` (PNG and SVG, hpcvar.report.plots.save): the changed
    metrics first."""
    from hpcvar.report.plots import save

    return [save(series_figure(s, s.metric), Path(directory) / f"{prefix}-{i:03d}")[0]
            for i, s in enumerate(_changed_first(g))]


def _png_b64(fig) -> str:
    """The figure as an inline PNG for the page (no SVG, no file: the page is drawn in one pass)."""
    import base64

    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=80, bbox_inches="tight")
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode()


# ---- HTML --------------------------------------------------------------------------------------------------------
def render_html(groups: list[Group], res: dict, title: str) -> str:
    import datetime as dt

    from jinja2 import Environment, PackageLoader, select_autoescape

    from hpcvar import __version__

    env = Environment(loader=PackageLoader("hpcvar.report", "templates"), autoescape=select_autoescape(["html"]))
    env.filters["change"] = change_text
    views = []
    for g, gj in zip(groups, res["groups"], strict=True):
        figs = [{"caption": s.metric, "data": _png_b64(series_figure(s, s.metric))} for s in _changed_first(g)]
        views.append({**gj, "figures": figs, "latest_rows": _latest_rows(gj)})
    return env.get_template("history.html.j2").render(
        title=title, res=res, groups=views, symbols=SYMBOLS, version=__version__,
        generated=dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"))


def _ci_text(p: dict, unit: str) -> str:
    """A run's 95% CI of its median; a run of one sample has none ("n = 1")."""
    return format_interval(p["ci_lo"], p["ci_hi"], p.get("n"), lambda x: _fmt(x, unit), " .. ")


def _latest_rows(gj: dict) -> list[dict]:
    rows = []
    for s in gj["series"]:
        p, c = s["points"][-1], s["latest"]
        rows.append({"metric": s["metric"], "latest": _fmt(p["median"], s["unit"]),
                     "ci": _ci_text(p, s["unit"]),
                     "level": _fmt(c["baseline_median"], s["unit"]) if c else "-",
                     "change": change_text(c["change_pct"]) if c else "-", "symbol": c["symbol"] if c else "",
                     "verdict": c["verdict"] if c else "unchanged", "n": len(s["points"])})
    return rows
