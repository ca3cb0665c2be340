"""The report: runs -> sections -> one self-contained HTML file (or Markdown).

HTML: jinja2 template, CSS inline, figures embedded as base64 PNG: the file
opens without a network. Markdown: the headlines, warnings and tables in
plain text, figures referenced by path. The renderer is chosen from the
output file's extension.
"""

from __future__ import annotations

import base64
import datetime as _dt
import html
from pathlib import Path

from hpcvar import __version__
from hpcvar.errors import UsageError
from hpcvar.report.sections import Headline, Section, section_for
from hpcvar.results.store import Run, atomic_write_text

MACHINE_KEYS = ("host", "cpu_model", "cores", "kernel", "governor", "virtualized", "smt_active", "clocksource",
                "git_sha")


def machine_warnings(meta: dict) -> list[str]:
    """Generic warnings about the machine, each with its remedy."""
    out = []
    gov = meta.get("governor")
    if gov and gov != "performance":
        out.append(f"CPU frequency governor is '{gov}': clock speeds change under load and times with them; "
                   "set 'performance' (cpupower frequency-set -g performance) for stable numbers.")
    if meta.get("virtualized"):
        out.append("This machine is a virtual machine: the hypervisor adds its own noise (steal time) and the "
                   "network may be virtual; compare with bare-metal numbers before drawing conclusions.")
    return out


def run_nodes(run: Run) -> list[str]:
    """The nodes a run's ranks or collectors ran on, in rank order without repeats (empty when unknown)."""
    nodes = run.info.get("nodes") or []
    if not nodes:
        hosts = ((run.info.get("metadata") or {}).get("native") or {}).get("hosts") or ""
        nodes = [h for h in str(hosts).split(",") if h]
    return list(dict.fromkeys(str(n) for n in nodes))


def _section_or_default(run: Run) -> Section:
    from hpcvar.errors import HpcvarError

    status = run.info.get("status")
    try:
        sec = section_for(run)
    except HpcvarError as e:  # a failed or interrupted run may lack what its section draws from
        sec = Section(title=run.info.get("command", run.id))
        sec.notes.append(f"This run is {status}; its section could not be drawn: {e.render()}")
        return sec
    if sec is not None:
        if status not in (None, "complete"):
            sec.notes.insert(0, f"This run is {status}: what it shows is what was measured before it stopped.")
        return sec
    sec = Section(title=run.info.get("command", run.id))
    sec.notes.append("No report section is defined for this command; its result is in run.json.")
    return sec


def collect(runs: list[Run]) -> dict:
    sections, headlines, warnings = [], [], []
    machines: dict = {}
    for run in runs:
        sec = _section_or_default(run)
        headlines.extend(sec.headlines)
        for w in run.info.get("warnings", []):
            warnings.append(f"{run.id}: {w}")
        meta = run.info.get("metadata", {})
        machines.setdefault(meta.get("host"), meta)
        sections.append((run, sec))
    for meta in machines.values():
        for w in machine_warnings(meta):
            if w not in warnings:
                warnings.append(w)
    return {"sections": sections, "headlines": headlines, "warnings": warnings, "machines": machines}


def _png_b64(path: Path) -> str:
    return base64.b64encode(Path(path).read_bytes()).decode()


def _table_html(df) -> str:
    import pandas as pd

    fmt = {c: (lambda v: f"{v:.4g}" if isinstance(v, float) else str(v)) for c in df.columns}
    return pd.DataFrame(df).to_html(index=False, border=0, formatters=fmt, escape=True, na_rep="")


def render_html(runs: list[Run], title: str) -> str:
    from jinja2 import Environment, PackageLoader, select_autoescape

    data = collect(runs)
    env = Environment(loader=PackageLoader("hpcvar.report", "templates"), autoescape=select_autoescape(["html"]))
    tpl = env.get_template("report.html.j2")
    first_meta: dict = next(iter(data["machines"].values()), {}) if data["machines"] else {}
    sections = []
    for run, sec in data["sections"]:
        sections.append({
            "title": sec.title, "run_id": run.id, "command": run.info.get("command"),
            "status": run.info.get("status"), "notes": sec.notes, "nodes": run_nodes(run),
            "figures": [{"caption": c, "data": _png_b64(p)} for c, p in sec.figures if Path(p).is_file()],
            "tables": [{"caption": c, "html": _table_html(df)} for c, df in sec.tables],
            "params": [(k, html.escape(str(v))) for k, v in (run.info.get("params") or {}).items()],
        })
    hosts = ", ".join(str(h) for h in data["machines"]) or "unknown host"
    nodes = list(dict.fromkeys(n for run in runs for n in run_nodes(run)))
    subtitle = f"{len(runs)} run(s) on {hosts}" + (f"; ranks on {len(nodes)} node(s): {', '.join(nodes)}"
                                                    if len(nodes) > 1 else "")
    return tpl.render(
        title=title, subtitle=subtitle,
        headlines=data["headlines"], warnings=data["warnings"],
        machine=[(k, first_meta.get(k)) for k in MACHINE_KEYS],
        sections=sections, version=__version__,
        generated=_dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC"))


def render_markdown(runs: list[Run], title: str) -> str:
    data = collect(runs)
    lines = [f"# {title}", ""]
    if data["headlines"]:
        lines += ["## Summary", "", "| metric | value | meaning |", "| --- | --- | --- |"]
        lines += [f"| {h.label} | {h.value} | {h.meaning} |" for h in data["headlines"]]
        lines.append("")
    if data["warnings"]:
        lines += ["## Warnings", ""] + [f"- {w}" for w in data["warnings"]] + [""]
    for run, sec in data["sections"]:
        nodes = run_nodes(run)
        where = f"; ranks on {len(nodes)} node(s): {', '.join(nodes)}" if nodes else ""
        lines += [f"## {sec.title}", "", f"run `{run.id}` ({run.info.get('command')}){where}", ""]
        lines += [f"{n}" for n in sec.notes] + ([""] if sec.notes else [])
        for caption, df in sec.tables:
            lines += [f"### {caption}", "", _md_table(df), ""]
        for caption, p in sec.figures:
            lines.append(f"![{caption}]({p})")
        lines.append("")
    return "\n".join(lines)


def _md_cell(v) -> str:
    text = f"{v:.4g}" if isinstance(v, float) else str(v)
    return text.replace("|", "\\|")


def _md_table(df) -> str:
    head = "| " + " | ".join(map(str, df.columns)) + " |"
    rule = "| " + " | ".join("---" for _ in df.columns) + " |"
    rows = ["| " + " | ".join(_md_cell(v) for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join([head, rule, *rows])


def write_report(runs: list[Run], out: Path, title: str = "hpcvar report") -> Path:
    out = Path(out)
    suffix = out.suffix.lower()
    if suffix in (".html", ".htm"):
        text = render_html(runs, title)
    elif suffix == ".md":
        text = render_markdown(runs, title)
    else:
        raise UsageError(f"cannot tell the report format from '{out.name}'", "-o", "Use a .html or .md file name")
    atomic_write_text(out, text)
    return out


__all__ = ["Headline", "Section", "render_html", "render_markdown", "write_report"]
