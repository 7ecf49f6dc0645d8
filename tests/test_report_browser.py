"""The report in a real headless Chromium: charts and tables are in the DOM, injected tag
values created no element, and no script error occurred (RELIABILITY.md 34)."""

from __future__ import annotations

import html as htmllib
import subprocess
from datetime import date
from html.parser import HTMLParser

import pytest

from conftest import require_binary
from report_fixtures import INJECTIONS, org_config
from service.report.write import write_report

pytestmark = [pytest.mark.binary, pytest.mark.slow]  # a headless Chromium per test

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-quic",
         "--no-first-run", "--disable-component-update", "--disable-sync"]


class Elements(HTMLParser):
    """Every element of the dumped DOM, as (tag, attributes)."""

    def __init__(self):
        super().__init__()
        self.elements: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag, attrs):
        self.elements.append((tag, dict(attrs)))

    def tags(self, name: str) -> list[dict[str, str | None]]:
        return [attrs for tag, attrs in self.elements if tag == name]


def chromium(binary: str, tmp_path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([binary, *FLAGS, f"--user-data-dir={tmp_path / 'profile'}", *args],
                          capture_output=True, text=True, timeout=60, check=True)


def test_report_renders_in_chromium_without_injected_elements_or_script_errors(tmp_path):
    binary = require_binary("chromium")
    config = org_config(tmp_path / "org")
    html = tmp_path / "out" / "2026-11-29" / "report.html"
    write_report(config, date(2026, 11, 29), str(tmp_path / "out"))
    shot = tmp_path / "report.png"
    chromium(binary, tmp_path, f"--screenshot={shot}", "--window-size=1280,2000", html.as_uri())
    assert shot.stat().st_size > 10_000
    dumped = chromium(binary, tmp_path, "--enable-logging=stderr", "--v=0", "--dump-dom", html.as_uri())
    dom = Elements()
    dom.feed(dumped.stdout)

    (root,) = dom.tags("html")
    assert root.get("data-report-ok") == f"{len(dom.tags('svg'))}:{len(dom.tags('table'))}"  # our script ran
    assert len(dom.tags("svg")) >= 2 and len(dom.tags("table")) >= 8
    assert len(dom.tags("rect")) > 30  # the stacked bars were drawn
    assert len(dom.tags("script")) == 1  # ours, nothing injected
    assert dom.tags("img") == []
    assert not [a for _, a in dom.elements if any(k.startswith("on") for k in a)]
    text = htmllib.unescape(dumped.stdout)
    assert all(value in text for value in INJECTIONS)  # shown as text
    console = [line for line in dumped.stderr.splitlines() if ":CONSOLE" in line]
    assert console == []
