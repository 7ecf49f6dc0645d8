"""A real headless Chromium for the tests: the DOM it built, and what it logged."""

from __future__ import annotations

import subprocess
from html.parser import HTMLParser

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


def dumped_dom(binary: str, tmp_path, url: str) -> tuple[Elements, subprocess.CompletedProcess]:
    """The DOM Chromium built for `url`, and its run (stderr holds the console)."""
    dumped = chromium(binary, tmp_path, "--enable-logging=stderr", "--v=0", "--dump-dom", url)
    dom = Elements()
    dom.feed(dumped.stdout)
    return dom, dumped


def console_lines(dumped: subprocess.CompletedProcess) -> list[str]:
    """The page's console messages (a script error, a Content-Security-Policy violation)."""
    return [line for line in dumped.stderr.splitlines() if ":CONSOLE" in line]
