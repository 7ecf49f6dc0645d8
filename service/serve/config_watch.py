"""Whether the config file on disk still says what the running service loaded.

The service reads its config at start and on SIGHUP only; an edit without SIGHUP used to
change nothing, silently, until the next restart. `ConfigWatch` stats the file (cheap: the
service's main loop asks several times a second) and reads it only when its mtime or size
moved, so a `touch` or an edit undone reads as unchanged. A change is logged once, and
`spendlake_config_file_changed` says 1 until the file says what was loaded again or a
SIGHUP loads it.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

CHANGED_MESSAGE = "config changed on disk; send SIGHUP to load it"


def _stat(path: Path) -> tuple[int, int] | None:
    try:
        stat = path.stat()
    except OSError:  # gone (a ConfigMap being swapped, a file moved away) counts as changed
        return None
    return stat.st_mtime_ns, stat.st_size


def _digest(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


class ConfigWatch(Collector):
    """`path`: the file the running config was read from (None: defaults, nothing to watch)."""

    def __init__(self, path: Path | None, announce: Callable[[str], None]):
        self.path = path
        self.announce = announce
        self._lock = threading.Lock()  # the main loop and scrapes both check
        self._stat = None if path is None else _stat(path)
        self._loaded = None if path is None else _digest(path)
        self.changed = False

    def check(self) -> bool:
        """True while the file differs from the loaded one; says so the first time it does."""
        if self.path is None:
            return False
        with self._lock:
            stat = _stat(self.path)
            if stat == self._stat:
                return self.changed
            self._stat = stat
            changed = stat is None or _digest(self.path) != self._loaded
            if changed and not self.changed:
                self.announce(f"{CHANGED_MESSAGE} ({self.path})")
            self.changed = changed
            return changed

    def describe(self) -> list[Metric]:
        return []  # registering must not read the file

    def collect(self) -> Iterator[Metric]:
        gauge = GaugeMetricFamily("spendlake_config_file_changed",
                                  "1 when the config file on disk differs from the one the service runs "
                                  "(edited without SIGHUP).")
        gauge.add_metric([], 1 if self.check() else 0)
        yield gauge
