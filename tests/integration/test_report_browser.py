"""The HTML report in a real browser (Debian's chromium, driven by Playwright):
it renders, every figure loads, no console error."""

from __future__ import annotations

import shutil

import pytest

from tests.unit.test_compare_report import fake_latency_run

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (apt-get install chromium; CI installs it)")
def test_report_renders_in_chromium(runs_dir, tmp_path):
    sync_api = pytest.importorskip("playwright.sync_api", reason="needs playwright (pip install 'hpcvar[test]')")
    from hpcvar.report.document import write_report

    out = write_report([fake_latency_run(1.0, 1)], tmp_path / "report.html")
    errors: list[str] = []
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", "--no-first-run", "--disable-quic"])
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 900})
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            requests: list[str] = []
            page.on("request", lambda r: requests.append(r.url))
            page.goto(out.as_uri())
            n_images = page.evaluate("document.images.length")
            broken = page.evaluate("Array.from(document.images).filter(i => !(i.complete && i.naturalWidth > 0))"
                                   ".map(i => i.alt)")
            shot = tmp_path / "report.png"
            page.screenshot(path=str(shot), full_page=True)
            title = page.title()
        finally:
            browser.close()
    assert title == "hpcvar report"
    assert n_images >= 2 and broken == []
    assert errors == []
    assert all(u.startswith(("file:", "data:")) for u in requests)  # self-contained: no network request
    assert shot.stat().st_size > 20_000  # a rendered page, not a blank one


def open_in_chromium(path) -> dict:
    """Load a report in headless Chromium: its verdict block (text, and whether it comes before the first run
    section), the steps table's rows, console errors, requests, broken images."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="needs playwright (pip install 'hpcvar[test]')")
    errors: list[str] = []
    requests: list[str] = []
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu",
                                                                    "--disable-background-networking"])
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 900})
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on("request", lambda r: requests.append(r.url))
            page.goto(path.as_uri())
            verdict = page.locator("#verdict")
            out = {
                "verdict_text": verdict.inner_text(),
                "verdict_visible": verdict.is_visible(),
                "verdict_top": verdict.bounding_box()["y"],
                "first_section_top": page.locator("h2#s1").bounding_box()["y"],
                "steps": [[c.inner_text().strip() for c in r.locator("td").all()]
                          for r in page.locator("#verdict-steps tr").all()[1:]],
                "findings": page.locator("#verdict-findings tr").count() - 1,
                "broken": page.evaluate("Array.from(document.images).filter(i => !(i.complete && "
                                        "i.naturalWidth > 0)).map(i => i.alt)"),
                "images": page.evaluate("Array.from(document.images).map(i => [i.alt, i.src])"),
            }
        finally:
            browser.close()
    out["errors"], out["requests"] = errors, requests
    return out


def legend_overlaps(images: list) -> dict[str, str | None]:
    """Each embedded PNG's record of data points its legends cover (hpcvar.report.plots.save writes it)."""
    import base64
    import io

    from PIL import Image

    out = {}
    for alt, src in images:
        data = base64.b64decode(src.split(",", 1)[1])
        out[alt] = Image.open(io.BytesIO(data)).text.get("hpcvar-legend-overlap")
    return out
