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
