"""Headless Chromium through Selenium, for the layout checks of the report and the tuning
plot (tests/test_report_layout.py).

Debian's ``chromium`` and the driver of its ``chromium-driver`` package are used (Selenium
Manager cannot download a driver offline): ``NEARDUP_CHROMIUM`` / ``NEARDUP_CHROMEDRIVER``
name others. Without them (or without the selenium package) the tests skip, unless
``NEARDUP_REQUIRE_CHROMIUM=1`` (CI), where they fail.

:data:`LAYOUT_JS` runs in the page and returns every layout problem as a sentence:

* an SVG ``<text>`` whose box leaves its chart, or overlaps another text's box;
* a legend entry (``g.legend-entry``) whose text does not end with its ``data-value``;
* a word (any run of non-space characters) or a date drawn on more than one line, outside
  URL cells (class ``u``, which may wrap anywhere).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

LAYOUT_JS = r"""
const problems = [];
const inside = (r, b) => r.left >= b.left - 0.5 && r.right <= b.right + 0.5 && r.top >= b.top - 0.5
  && r.bottom <= b.bottom + 0.5;
for (const svg of document.querySelectorAll('svg.plot')) {
  const name = svg.dataset.plot;
  const box = svg.getBoundingClientRect();
  const texts = [...svg.querySelectorAll('text')].filter(t => t.textContent.trim());
  const rects = texts.map(t => t.getBoundingClientRect());
  texts.forEach((t, i) => {
    if (!inside(rects[i], box)) problems.push(`${name}: text "${t.textContent}" leaves the chart`);
  });
  for (let i = 0; i < texts.length; i++) for (let j = i + 1; j < texts.length; j++) {
    const a = rects[i], b = rects[j];
    const w = Math.min(a.right, b.right) - Math.max(a.left, b.left);
    const h = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
    if (w > 1 && h > 1) problems.push(`${name}: "${texts[i].textContent}" overlaps "${texts[j].textContent}"`);
  }
  for (const g of svg.querySelectorAll('g.legend-entry')) {
    const value = g.dataset.value || '';
    const text = g.textContent.trim();
    if (!value.trim() || !text.endsWith(value)) problems.push(`${name}: legend "${text}" lacks its value`);
  }
}
const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
const range = document.createRange();
for (let node = walker.nextNode(); node; node = walker.nextNode()) {
  const el = node.parentElement;
  if (!el || el.closest('svg, .u, style, title')) continue;
  for (const m of node.textContent.matchAll(/\S+/g)) {
    range.setStart(node, m.index);
    range.setEnd(node, m.index + m[0].length);
    const tops = new Set([...range.getClientRects()].filter(r => r.width > 0).map(r => Math.round(r.top)));
    if (tops.size > 1) problems.push(`"${m[0]}" is broken across lines (in ${el.tagName.toLowerCase()})`);
  }
}
return problems;
"""


def chromium() -> tuple[str, str] | None:
    """(browser, driver) paths, or None (a failure under NEARDUP_REQUIRE_CHROMIUM=1)."""
    browser = os.environ.get("NEARDUP_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    driver = os.environ.get("NEARDUP_CHROMEDRIVER") or shutil.which("chromedriver") \
        or ("/usr/bin/chromedriver" if Path("/usr/bin/chromedriver").is_file() else None)
    try:
        import selenium  # noqa: F401
    except ImportError:
        driver = None
    if (browser is None or driver is None) and os.environ.get("NEARDUP_REQUIRE_CHROMIUM") == "1":
        pytest.fail("NEARDUP_REQUIRE_CHROMIUM=1 but chromium, chromedriver or selenium is missing "
                    "(apt-get install chromium chromium-driver; pip install selenium)")
    return (browser, driver) if browser and driver else None


def open_browser(width: int = 1200, height: int = 900) -> Any:
    """A headless Chromium driven by Selenium (skips the test where there is none)."""
    found = chromium()
    if found is None:
        pytest.skip("needs chromium, chromium-driver and selenium (NEARDUP_REQUIRE_CHROMIUM=1 requires them)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = found[0]
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--no-first-run",
                "--disable-extensions", "--hide-scrollbars", "--force-device-scale-factor=1",
                f"--window-size={width},{height}"):
        options.add_argument(arg)
    return webdriver.Chrome(service=Service(found[1]), options=options)


def artifacts(tmp_path: Path) -> Path:
    """Where screenshots go: ``$NEARDUP_ARTIFACTS`` (kept after the run), else ``tmp_path``."""
    folder = Path(os.environ.get("NEARDUP_ARTIFACTS") or tmp_path / "screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def full_page(driver: Any, path: Path) -> None:
    """A screenshot of the whole page (the window grown to the document's height)."""
    width = driver.execute_script("return document.documentElement.scrollWidth")
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(max(int(width), 800), int(height) + 100)
    driver.save_screenshot(str(path))
