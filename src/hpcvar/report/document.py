"""The report: runs -> sections -> one self-contained HTML file (or Markdown).

HTML: jinja2 template, CSS inline, figures embedded as base64 PNG: the file
opens without a network. Markdown: the headlines, warnings and tables in
plain text, figures referenced by path. The renderer is chosen from the
output file's extension.
"""

from __future__ import annotations

import base64
import datetime as _dt
from pathlib import Path
from typing import Any

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


def collect(runs: list[Run], tops: list[Run] | None = None, baseline: Run | None = None,
            expectations=None, verdict_out: list | None = None) -> dict:
    """Every run's section, the headlines, warnings and machines, and the verdict (see report.verdict).

    Figures are drawn into the directory set by ``plots.redirect`` by the caller, never into the runs."""
    from hpcvar.report import plots, verdict

    with plots.baselines(verdict.pair_baseline(runs, baseline)):
        data = _collect(runs, tops, baseline, expectations)
    if verdict_out is not None:
        verdict_out.append(data["verdict"])
    return data


def _collect(runs: list[Run], tops: list[Run] | None, baseline: Run | None, expectations=None) -> dict:
    from hpcvar.report import verdict

    sections, headlines, warnings = [], [], []
    machines: dict[Any, dict[str, Any]] = {}
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
    v = verdict.build(tops if tops is not None else runs, sections, baseline, expectations)
    return {"sections": sections, "headlines": headlines, "warnings": warnings, "machines": machines, "verdict": v}


def _png_b64(path: Path) -> str:
    return base64.b64encode(Path(path).read_bytes()).decode()


def plain(v) -> str:
    """A table cell as a person reads it: 4 significant digits without exponent, no 'nan', no 'False'."""
    import numpy as np

    if v is None:
        return ""
    if isinstance(v, (bool, np.bool_)):
        return "yes" if v else "no"
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, (float, np.floating)):
        if not np.isfinite(v):
            return "" if np.isnan(v) else ("inf" if v > 0 else "-inf")
        if float(v).is_integer() and abs(float(v)) < 1e15:
            return str(int(v))
        return np.format_float_positional(float(v), precision=4, fractional=False, trim="-")
    return str(v)


def _table_html(df) -> str:
    """A stored table for people (hpcvar.report.humanize: headers with units, scaled values, no reprs)."""
    from hpcvar.report.humanize import frame

    return frame(df).to_html(index=False, border=0, escape=True, na_rep="")


def _params(run: Run) -> list[tuple[str, str]]:
    """A run's parameters as people read them ('quantum' '1 ms', 'quick' 'yes'), each once."""
    from hpcvar.report.humanize import value

    return [value(str(k), v) for k, v in (run.info.get("params") or {}).items()]


def _verdict_view(v) -> dict:
    from hpcvar.report.sections import STATUSES

    base = None
    if v.baseline is not None:
        rows = [r for r in v.baseline["metrics"] if r["verdict"] != "unchanged"]
        base = {"id": v.baseline.get("baseline_id", ""), "rows": rows,
                "unchanged": sum(r["verdict"] == "unchanged" for r in v.baseline["metrics"]),
                "threshold": v.baseline["threshold_pct"], "alpha": v.baseline["alpha"]}
    failed = [c for c in v.checks if c["status"] != "passed"]
    return {"answer": v.answer.line(), "status": v.answer.status.lower(), "summary": v.summary(),
            "steps": v.steps, "findings": v.findings, "baseline": base, "baseline_error": v.baseline_error,
            "statuses": STATUSES, "counts": v.counts(), "checks": failed, "checks_total": len(v.checks),
            "expect_path": v.expect_path}


def render_html(runs: list[Run], title: str, tops: list[Run] | None = None, baseline: Run | None = None,
                expectations=None, verdict_out: list | None = None) -> str:
    import tempfile

    from jinja2 import Environment, PackageLoader, select_autoescape

    from hpcvar.report import plots
    from hpcvar.report.humanize import value

    env = Environment(loader=PackageLoader("hpcvar.report", "templates"), autoescape=select_autoescape(["html"]))
    tpl = env.get_template("report.html.j2")
    with tempfile.TemporaryDirectory(prefix="hpcvar-report-") as tmp, plots.redirect(Path(tmp)):
        data = collect(runs, tops, baseline, expectations, verdict_out)
        sections = []
        for run, sec in data["sections"]:
            sections.append({
                "title": sec.title, "run_id": run.id, "command": run.info.get("command"),
                "status": run.info.get("status"), "notes": sec.notes, "nodes": run_nodes(run),
                "figures": [{"caption": c, "data": _png_b64(p)} for c, p in sec.figures if Path(p).is_file()],
                "tables": [{"caption": c, "html": _table_html(df)} for c, df in sec.tables],
                "params": _params(run),
            })
    first_meta: dict[str, Any] = next(iter(data["machines"].values()), {}) if data["machines"] else {}
    hosts = ", ".join(str(h) for h in data["machines"]) or "unknown host"
    nodes = list(dict.fromkeys(n for run in runs for n in run_nodes(run)))
    subtitle = f"{len(runs)} run(s) on {hosts}" + (f"; ranks on {len(nodes)} node(s): {', '.join(nodes)}"
                                                    if len(nodes) > 1 else "")
    return tpl.render(
        title=title, subtitle=subtitle, verdict=_verdict_view(data["verdict"]),
        headlines=data["headlines"], warnings=data["warnings"],
        machine=[value(k, first_meta.get(k), "unknown") for k in MACHINE_KEYS],
        sections=sections, version=__version__,
        generated=_dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC"))


def _md_verdict(v) -> list[str]:
    lines = ["## Verdict", "", f"**{v.answer.line()}**", "", v.summary(), ""]
    if v.steps:
        lines += ["| step | status | detail | run |", "| --- | --- | --- | --- |"]
        lines += [f"| {s.name} | {s.status} | {_md_text(s.detail)} | {f'`{s.run}`' if s.run else ''} |"
                  for s in v.steps]
        lines.append("")
    if v.findings:
        lines += ["### Summary: the headlines, judged", "",
                  "| status | headline | value | judged against | meaning |", "| --- | --- | --- | --- | --- |"]
        lines += [f"| {h.status} | {_md_text(h.label)} | {_md_text(h.value)} | {_md_text(h.reference)} | "
                  f"{_md_text(h.meaning)} |" for _, h in v.findings]
        lines.append("")
    if v.baseline is not None:
        changed = [r for r in v.baseline["metrics"] if r["verdict"] != "unchanged"]
        lines += [f"Against baseline `{v.baseline.get('baseline_id', '')}`: {len(changed)} metric(s) changed "
                  f"(Mann-Whitney, Holm p < {v.baseline['alpha']:g}, median moved > "
                  f"{v.baseline['threshold_pct']:g}%).", ""]
        if changed:
            lines += ["| metric | verdict | baseline median | current median | change % |",
                      "| --- | --- | --- | --- | --- |"]
            lines += [f"| {_md_text(r['metric'])} | {r['verdict']} | {plain(r['baseline_median'])} "
                      f"{r['unit']} | {plain(r['current_median'])} {r['unit']} | {plain(r['change_pct'])} |"
                      for r in changed]
            lines.append("")
    elif v.baseline_error:
        lines += [f"The baseline could not be compared: {v.baseline_error}", ""]
    if v.checks:
        off = [c for c in v.checks if c["status"] != "passed"]
        lines += [f"Expectations ({v.expect_path}): {len(v.checks) - sum(c['status'] == 'failed' for c in off)} of "
                  f"{len(v.checks)} met.", ""]
        if off:
            lines += ["| status | where | metric | value | expected | source |",
                      "| --- | --- | --- | --- | --- | --- |"]
            lines += [f"| {c['status']} | {c['where']} | {c['metric']} | {plain(c['value'])} | {_md_text(c['bound'])} "
                      f"| {c['source']} |" for c in off]
            lines.append("")
    return lines


def _md_text(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def render_markdown(runs: list[Run], title: str, tops: list[Run] | None = None, baseline: Run | None = None,
                    expectations=None, verdict_out: list | None = None,
                    figures_dir: Path | None = None, link_base: Path | None = None) -> str:
    """Markdown: figures are copied into ``figures_dir`` and linked relative to ``link_base`` (the report's
    folder), so the .md and its folder of figures move together."""
    import shutil
    import tempfile

    from hpcvar.report import plots

    with tempfile.TemporaryDirectory(prefix="hpcvar-report-") as tmp, plots.redirect(Path(tmp)):
        data = collect(runs, tops, baseline, expectations, verdict_out)
        links: dict[Path, str] = {}
        for run, sec in data["sections"]:
            for _, p in sec.figures:
                p = Path(p)
                if not p.is_file() or p in links:
                    continue
                if figures_dir is None:
                    links[p] = str(p)
                    continue
                figures_dir.mkdir(parents=True, exist_ok=True)
                name = p.name if p.parent == Path(tmp) else f"{run.path.name}-{p.name}"
                shutil.copyfile(p, figures_dir / name)
                links[p] = (figures_dir / name).relative_to(link_base).as_posix() if link_base else str(
                    figures_dir / name)
    lines = [MD_GENERATOR, "", f"# {title}", ""]
    lines += _md_verdict(data["verdict"])
    if data["warnings"]:
        lines += ["## Warnings", ""] + [f"- {w}" for w in data["warnings"]] + [""]
    for run, sec in data["sections"]:
        nodes = run_nodes(run)
        where = f"; ranks on {len(nodes)} node(s): {', '.join(nodes)}" if nodes else ""
        lines += [f"## {sec.title}", "", f"run `{run.id}` ({run.info.get('command')}){where}", ""]
        lines += [f"{n}" for n in sec.notes] + ([""] if sec.notes else [])
        params = _params(run)
        if params:
            lines += ["parameters: " + "; ".join(f"{_md_text(k)} {_md_text(v)}" for k, v in params), ""]
        for caption, df in sec.tables:
            lines += [f"### {caption}", "", _md_table(df), ""]
        for caption, p in sec.figures:
            if Path(p) in links:
                lines.append(f"![{caption}]({links[Path(p)]})")
        lines.append("")
    return "\n".join(lines)


def _md_table(df) -> str:
    from hpcvar.report.humanize import frame

    df = frame(df)
    head = "| " + " | ".join(_md_text(c) for c in df.columns) + " |"
    rule = "| " + " | ".join("---" for _ in df.columns) + " |"
    rows = ["| " + " | ".join(_md_text(v) for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join([head, rule, *rows])


# what marks a file as an hpcvar report (is_report): 'hpcvar report' overwrites only those without --force
HTML_GENERATOR = '<meta name="generator" content="hpcvar report">'
MD_GENERATOR = "<!-- generator: hpcvar report -->"


def is_report(path: Path) -> bool:
    """Whether ``path`` is a report hpcvar wrote (its generator mark in the first 4 KiB)."""
    try:
        with open(path, "rb") as f:
            head = f.read(4096).decode("utf-8", "replace")
    except OSError:
        return False
    return HTML_GENERATOR in head or head.startswith(MD_GENERATOR)


def write_report(runs: list[Run], out: Path, title: str = "hpcvar report", tops: list[Run] | None = None,
                 baseline: Run | None = None, expectations=None, verdict_out: list | None = None) -> Path:
    """Write the report of ``runs`` to ``out`` (.html self-contained, or .md with a ``<stem>_files`` folder).

    ``tops``: the runs as the user named them (a characterization not expanded into its steps), for the
    verdict's list of steps; ``baseline``: a run to compare against (overlaid and marked in the verdict);
    ``expectations``: site expectations (hpcvar.expect) to judge the runs against; ``verdict_out``: a list that
    receives the verdict (hpcvar.report.verdict.Verdict, with its one-line answer)."""
    out = Path(out)
    suffix = out.suffix.lower()
    if suffix in (".html", ".htm"):
        text = render_html(runs, title, tops, baseline, expectations, verdict_out)
    elif suffix == ".md":
        text = render_markdown(runs, title, tops, baseline, expectations, verdict_out,
                               figures_dir=out.parent / f"{out.stem}_files", link_base=out.parent)
    else:
        raise UsageError(f"cannot tell the report format from '{out.name}'", "-o", "Use a .html or .md file name")
    atomic_write_text(out, text)
    return out


__all__ = ["HTML_GENERATOR", "MD_GENERATOR", "Headline", "Section", "is_report", "render_html", "render_markdown",
           "write_report"]
