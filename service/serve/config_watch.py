"""Whether the config file on disk still says what the running service loaded.

The service reads its config at start and on SIGHUP only; an edit without SIGHUP used to
change nothing, silently, until the next restart. `ConfigWatch` stats the file (cheap: the
service's main loop asks several times a second) and reads it only when its mtime or size
moved, so a `touch` or an edit undone reads as unchanged. A changed file is loaded (not
applied) first: one that does not load is said so with its error, not as one to SIGHUP
(which used to be said, and only the refused SIGHUP told it does not load). Each change is
logged once: a file saved again with other content while the first change waits for its
SIGHUP is said again (it may now not load, or load what the first did not), a `touch` not;
`spendlake_config_file_changed` says 1 until the file says what was loaded again or a
SIGHUP loads it; a file a SIGHUP could not load is not said to need a SIGHUP until it
changes again.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from service.core.errors import SpendlakeError

CHANGED_MESSAGE = "config changed on disk; send SIGHUP to load it"
REFUSED_MESSAGE = "config changed on disk and does not load; still serving the running one"
# a file removed is said as gone (it was said as not loading, with the CLI's "pass --config PATH"), and once
# it reads as the running config again, so the log tells when spendlake_config_file_changed went back to 0
GONE_MESSAGE = "the config file the service runs from is gone; the running config goes on"
BACK_MESSAGE = "the config file is back as the service runs it"
# what a file removed (or unreadable) is said as: its digest None reads as "nothing said",
# and every later edit was then taken for the change already said, broken or not
GONE = "(no file)"


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


def as_read(path: Path | None) -> tuple[tuple[int, int] | None, str | None]:
    """What `ConfigWatch` compares the file with: take it as soon as the config is read."""
    return (None, None) if path is None else (_stat(path), _digest(path))


class ConfigWatch(Collector):
    """`path`: the file the running config was read from (None: defaults, nothing to watch);
    `loaded`: `as_read(path)` when it was read. A SIGHUP's service runs only once the running
    jobs are done, minutes later: an edit meanwhile is one the service does not have."""

    def __init__(self, path: Path | None, announce: Callable[[str], None],
                 loaded: tuple[tuple[int, int] | None, str | None], validate: Callable[[], object] | None = None):
        self.path = path
        self.announce = announce
        self.validate = validate  # loads the file as a SIGHUP would (raises SpendlakeError), or None
        self._lock = threading.Lock()  # the main loop and scrapes both check
        self._stat, self._loaded = loaded
        self._said: str | None = None  # the digest of the change last said (or a SIGHUP refused): not said again
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
            digest = _digest(self.path)
            changed = stat is None or digest != self._loaded
            if changed and (digest or GONE) != self._said:
                self._say_changed(stat, self._load_error)  # loaded as a SIGHUP would read it
            elif not changed and self._said == GONE:
                self.announce(f"{BACK_MESSAGE} ({self.path})")
            self._said = (digest or GONE) if changed else None
            self.changed = changed
            return changed

    def _say_changed(self, stat: tuple[int, int] | None, error: Callable[[], str | None]) -> None:
        """A change of the file: gone, or one that loads (a SIGHUP would load it) or does not (`error()`)."""
        if stat is None:
            self.announce(f"{GONE_MESSAGE} ({self.path})")
            return
        said = error()
        self.announce(f"{CHANGED_MESSAGE} ({self.path})" if said is None
                      else f"{REFUSED_MESSAGE} ({self.path}): {said}")

    def _load_error(self) -> str | None:
        if self.validate is None:
            return None
        try:
            self.validate()
        except SpendlakeError as exc:
            return str(exc)
        return None

    def refused(self, read: tuple[tuple[int, int] | None, str | None], error: str) -> None:
        """A SIGHUP read the file as `read` and could not load it (`error`): until it changes
        again the change is said as one that does not load, not as one a SIGHUP would load."""
        with self._lock:
            self._stat = read[0]
            changed = read[0] is None or read[1] != self._loaded
            if changed and (read[1] or GONE) != self._said:
                self._say_changed(read[0], lambda: error)
            self._said = (read[1] or GONE) if changed else None
            self.changed = changed

    def reloading(self, read: tuple[tuple[int, int] | None, str | None]) -> None:
        """A SIGHUP read the file as `read` (`as_read`): the service runs it once the running jobs
        are done, so the file is compared with it from now on; the wait asks for no other SIGHUP."""
        with self._lock:
            self._stat, self._loaded = read
            self._said = None
            self.changed = False

    def describe(self) -> list[Metric]:
        return []  # registering must not read the file

    def collect(self) -> Iterator[Metric]:
        gauge = GaugeMetricFamily("spendlake_config_file_changed",
                                  "1 when the config file on disk differs from the one the service runs "
                                  "(edited without SIGHUP).")
        gauge.add_metric([], 1 if self.check() else 0)
        yield gauge
