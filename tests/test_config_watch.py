"""The config file edited on disk without SIGHUP: said once in the log and by a gauge."""

from __future__ import annotations

import os

from prometheus_client import CollectorRegistry, generate_latest

from service.serve.config_watch import CHANGED_MESSAGE, ConfigWatch


def gauge(registry: CollectorRegistry) -> float:
    return registry.get_sample_value("spendlake_config_file_changed")


def later(path, seconds: int = 5) -> None:
    """Move `path`'s mtime on, as an edit a few seconds after the start would."""
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + seconds * 10**9))


def test_an_edit_is_logged_once_and_exported_until_undone(tmp_path):
    config = tmp_path / "spendlake.yaml"
    config.write_text("lake: /data/lake\n")
    said, registry = [], CollectorRegistry()
    watch = ConfigWatch(config, said.append)
    registry.register(watch)
    assert gauge(registry) == 0 and said == []

    config.write_text("lake: /data/lake\nservice: {top_n: 5}\n")
    later(config)
    assert watch.check() and watch.check()
    assert gauge(registry) == 1
    assert said == [f"{CHANGED_MESSAGE} ({config})"]
    assert b"spendlake_config_file_changed 1.0" in generate_latest(registry)

    config.write_text("lake: /data/lake\n")  # undone: the file says what runs again
    later(config, 10)
    assert gauge(registry) == 0 and said == [f"{CHANGED_MESSAGE} ({config})"]


def test_a_touch_is_no_change_and_a_removed_file_is_one(tmp_path):
    config = tmp_path / "spendlake.yaml"
    config.write_text("lake: /data/lake\n")
    said = []
    watch = ConfigWatch(config, said.append)
    later(config)
    assert not watch.check() and said == []
    config.unlink()
    assert watch.check() and said == [f"{CHANGED_MESSAGE} ({config})"]


def test_no_file_nothing_to_watch():
    registry = CollectorRegistry()
    registry.register(ConfigWatch(None, print))
    assert gauge(registry) == 0
