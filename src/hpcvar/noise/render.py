"""Terminal rendering and the HTML report section of 'noise record' runs."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.table import Table

from hpcvar.report.sections import Headline, Section, register
from hpcvar.units import format_time_ns


def _periods(c: dict, n: int = 3) -> str:
    return ", ".join(f"{p['hz']:.1f} Hz ({p['strength']:.2f})" for p in c["periods"][:n]) or "-"


def render_noise(console: Console, result: dict) -> None:
    t = Table(title="OS jitter per CPU", title_justify="left")
    for col in ("cpu", "t_min", "events", "rate", "noise", "p50", "p99", "max", "periodic sources (locking)"):
        last = col.startswith("periodic")
        t.add_column(col, justify="left" if last else "right", no_wrap=not last)
    for c in result["cpus"]:
        t.add_row(str(c["cpu"]), format_time_ns(c["t_min_ns"]) if c["t_min_ns"] is not None else "-",
                  str(c["events"]), f"{c['events_per_s']:.0f}/s", f"{100 * c['noise_fraction']:.3g}%",
                  format_time_ns(c["p50_ns"]), format_time_ns(c["p99_ns"]), format_time_ns(c["max_ns"]),
                  _periods(c))
    console.print(t)
    tick = [c["tick"] for c in result["cpus"] if c.get("tick")]
    if tick:
        found = sum(1 for x in tick if x["found"])
        console.print(f"kernel tick CONFIG_HZ={tick[0]['config_hz']}: in the spectrum of {found} of {len(tick)} CPUs")
    att = result.get("attribution", {})
    if att.get("available"):
        top = [s for s in att.get("top_sources", [])][:8]
        if top:
            console.print("sources over the window (/proc): " + "; ".join(
                f"CPU{s['cpu']} {s['source'].split(' (')[0]} {s['per_s']:.0f}/s" for s in top))
        for m in att.get("matches", [])[:6]:
            console.print(f"  CPU {m['cpu']}: {m['hz']:.1f} Hz matches {m['source']} at {m['per_s']:.1f}/s "
                          f"({m['how']})")
    q = result.get("quality", {})
    if q.get("freq_drift_ppm") is not None:
        console.print(f"collector: TSC {q['tsc_hz'] / 1e9:.6f} GHz, drift over the run {q['freq_drift_ppm']:+.2f} ppm, "
                      f"calibration spread {q.get('calib_spread_ppm', 0):.1f} ppm"
                      + (", in a VM" if q.get("in_vm") else ""))
    if result.get("run"):
        console.print(f"stored in {result['run']}")


@register("noise record")
def noise_section(run) -> Section:
    res = run.info.get("result") or {}
    sec = Section(title="OS jitter (hpcvar noise record)")
    for c in res.get("cpus", []):
        sec.headlines.append(Headline(
            f"CPU {c['cpu']} noise", f"{100 * c['noise_fraction']:.3g}% ({c['events_per_s']:.0f} events/s)",
            f"CPU time lost to detours; max {format_time_ns(c['max_ns'])}, top period {_periods(c, 1)}"))
    if run.has_table("noise.summary"):
        sec.tables.append(("Per-CPU detour statistics", run.read_table("noise.summary")))
    if run.has_table("noise.periods"):
        sec.tables.append(("Periodic sources (fundamental, phase locking)", run.read_table("noise.periods")))
    if run.has_table("noise.sources"):
        src = run.read_table("noise.sources")
        sec.tables.append(("Interrupt/softirq rates over the window (/proc)", src[src["per_s"] >= 1.0]))
    plots = Path(run.path) / "plots"
    for p in sorted(plots.glob("noise_*.png")):
        sec.figures.append((p.stem.replace("_", " "), p))
    sec.notes.append("Attribution compares /proc counters with detour rates: a rate match is a guess, "
                     "not a time-aligned proof (docs/noise.md).")
    for w in run.info.get("warnings", []):
        sec.notes.append(w)
    return sec


__all__ = ["render_noise", "noise_section"]
