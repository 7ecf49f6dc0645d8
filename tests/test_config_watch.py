"""The config file edited on disk without SIGHUP: said once in the log and by a gauge."""

from __future__ import annotations

import os

from prometheus_client import CollectorRegistry, generate_latest

from service.serve.config_watch import CHANGED_MESSAGE, GONE_MESSAGE, ConfigWatch, as_read


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
    watch = ConfigWatch(config, said.append, as_read(config))
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
    watch = ConfigWatch(config, said.append, as_read(config))
    later(config)
    assert not watch.check() and said == []
    config.unlink()
    assert watch.check() and said == [f"{GONE_MESSAGE} ({config})"]


def test_no_file_nothing_to_watch():
    registry = CollectorRegistry()
    registry.register(ConfigWatch(None, print, as_read(None)))
    assert gauge(registry) == 0


def test_an_edit_after_the_config_was_read_is_noticed_though_made_before_the_service_ran(tmp_path):
    """A SIGHUP's config is read, then the service waits for running jobs (minutes of ingest)
    before it serves with it: an edit in that wait is one the running service does not have."""
    import threading

    from stackkit import wait_until

    from service.core.config import load_config
    from service.serve.scheduler import Tasks
    from service.serve.service import Requests, Service

    path = tmp_path / "spendlake.yaml"
    path.write_text(f"lake: {tmp_path / 'lake'}\nservice: {{listen: '127.0.0.1:0'}}\n")
    requests, said = Requests(), []
    service = Service(load_config(path), tasks=Tasks(ingest=lambda: None, rules=None, daily=lambda day: None),
                      requests=requests)
    path.write_text(f"lake: {tmp_path / 'lake'}\nservice: {{listen: '127.0.0.1:0', top_n: 5}}\n")
    later(path)
    running = threading.Thread(target=service.run, args=(said.append,))
    running.start()
    try:
        wait_until(lambda: any(CHANGED_MESSAGE in line for line in said), 10, "the change said")
    finally:
        requests.stop = True
        running.join(30)


def test_a_sighup_waiting_for_running_jobs_does_not_ask_for_another_sighup(tmp_path):
    """The edit said once; then SIGHUP: while the reload waits for the running ingest, a scrape
    said 'send SIGHUP to load it' again and exported 1, as if the SIGHUP had been lost."""
    import threading
    import urllib.request

    from stackkit import wait_until

    from service.core.config import load_config
    from service.serve.scheduler import Tasks
    from service.serve.service import Requests, Service

    path = tmp_path / "spendlake.yaml"
    path.write_text(f"lake: {tmp_path / 'lake'}\nservice: {{listen: '127.0.0.1:0'}}\n")
    running_ingest, release = threading.Event(), threading.Event()

    def ingest():
        running_ingest.set()
        release.wait(30)

    requests, said = Requests(), []
    service = Service(load_config(path), tasks=Tasks(ingest=ingest, rules=None, daily=lambda day: None),
                      requests=requests, reload=lambda: load_config(path))
    running = threading.Thread(target=service.run, args=(said.append,))
    running.start()
    try:
        assert running_ingest.wait(10)
        [url] = [line.split()[2] for line in said if line.startswith("spendlake serving")]
        path.write_text(f"lake: {tmp_path / 'lake'}\nservice: {{listen: '127.0.0.1:0', top_n: 5}}\n")
        later(path)
        wait_until(lambda: any(CHANGED_MESSAGE in line for line in said), 10, "the change said")
        requests.reload = True
        wait_until(lambda: any("reloading: waiting for running jobs" in line for line in said), 10, "the wait")
        with urllib.request.urlopen(f"{url}/metrics", timeout=10) as response:
            assert b"spendlake_config_file_changed 0.0" in response.read()
        assert sum(CHANGED_MESSAGE in line for line in said) == 1, said
    finally:
        release.set()
        requests.stop = True
        running.join(30)


def url(said: list[str]) -> str:
    [serving] = [line.split()[2] for line in said if line.startswith("spendlake serving")]
    return serving


def test_a_config_a_sighup_could_not_load_is_not_said_to_need_a_sighup_until_it_changes_again(tmp_path):
    """An edit that does not load (invalid YAML) and a SIGHUP: the log said 'SIGHUP: the config was not
    reloaded ...' and, the same millisecond, 'config changed on disk; send SIGHUP to load it', advising
    what had just failed."""
    import threading
    import urllib.request

    from stackkit import wait_until

    from service.core.config import load_config
    from service.serve.config_watch import REFUSED_MESSAGE
    from service.serve.scheduler import Tasks
    from service.serve.service import Requests, Service

    path = tmp_path / "spendlake.yaml"
    path.write_text(f"lake: {tmp_path / 'lake'}\nservice: {{listen: '127.0.0.1:0'}}\n")
    requests, said = Requests(), []
    service = Service(load_config(path), tasks=Tasks(ingest=lambda: None, rules=None, daily=lambda day: None),
                      requests=requests, reload=lambda: load_config(path))
    path.write_text(f"lake: {tmp_path / 'lake'}\nservice: {{listen: '127.0.0.1:0'\n")  # a brace left open
    later(path)
    requests.reload = True  # the SIGHUP that came with the edit
    running = threading.Thread(target=service.run, args=(said.append,))
    running.start()
    try:
        wait_until(lambda: any("SIGHUP: the config was not reloaded" in line for line in said), 10, "the refusal")
        wait_until(lambda: any(line.startswith("spendlake serving") for line in said), 10, "the service")
        later(path, 10)  # a touch: still the file that does not load
        with urllib.request.urlopen(f"{url(said)}/metrics", timeout=10) as response:  # a scrape checks the file
            assert b"spendlake_config_file_changed 1.0" in response.read()
        [refused] = [line for line in said if REFUSED_MESSAGE in line]
        assert refused.startswith(f"{REFUSED_MESSAGE} ({path}): ") and "SIGHUP" not in refused, said
        assert not any(CHANGED_MESSAGE in line for line in said), said
        path.write_text(f"lake: {tmp_path / 'lake'}\nservice: {{listen: '127.0.0.1:0', top_n: 5}}\n")
        later(path, 20)  # fixed: this one a SIGHUP may load
        wait_until(lambda: any(CHANGED_MESSAGE in line for line in said), 10, "the new change said")
        assert sum(CHANGED_MESSAGE in line for line in said) == 1, said
    finally:
        requests.stop = True
        running.join(30)


def test_an_edit_that_does_not_load_is_said_so_without_asking_for_a_sighup(tmp_path):
    """`lake: [` written into a running service's config: the log said 'send SIGHUP to load it', and
    only after that SIGHUP was refused that it does not load."""
    from service.core.config import load_config
    from service.serve.config_watch import REFUSED_MESSAGE

    config = tmp_path / "spendlake.yaml"
    config.write_text(f"lake: {tmp_path / 'lake'}\n")
    said = []
    watch = ConfigWatch(config, said.append, as_read(config), validate=lambda: load_config(config))
    config.write_text("lake: [\n")
    later(config)
    assert watch.check()
    [line] = said
    assert line.startswith(f"{REFUSED_MESSAGE} ({config}): ") and "SIGHUP" not in line, said
    later(config, 10)  # a touch: the same file that does not load, said once
    assert watch.check() and len(said) == 1
    config.write_text(f"lake: {tmp_path / 'lake'}\nservice: {{top_n: 5}}\n")
    later(config, 20)  # fixed: this one a SIGHUP loads
    assert watch.check() and said[1:] == [f"{CHANGED_MESSAGE} ({config})"]


def test_each_edit_after_the_config_file_was_removed_is_said_as_any_edit_is(tmp_path):
    """The file removed from under a running service, then written again: neither the broken
    file nor the fixed one was ever logged (a removed file's digest, None, read as nothing refused)."""
    from service.core.config import load_config
    from service.serve.config_watch import GONE_MESSAGE, REFUSED_MESSAGE

    config = tmp_path / "spendlake.yaml"
    config.write_text(f"lake: {tmp_path / 'lake'}\n")
    said = []
    watch = ConfigWatch(config, said.append, as_read(config), validate=lambda: load_config(config))
    config.unlink()
    assert watch.check() and said == [f"{GONE_MESSAGE} ({config})"]
    config.write_text("lake: [\n")
    later(config)
    assert watch.check() and len(said) == 2 and said[1].startswith(f"{REFUSED_MESSAGE} ({config}): "), said
    config.write_text(f"lake: {tmp_path / 'lake'}\nservice: {{top_n: 5}}\n")
    later(config, 10)
    assert watch.check() and said[2:] == [f"{CHANGED_MESSAGE} ({config})"]


def test_a_second_edit_while_the_first_waits_for_its_sighup_is_said_too(tmp_path):
    """Two edits before a SIGHUP: the second was never logged (the watch said a change once), so
    one that broke the file after a good edit left the log saying 'send SIGHUP to load it'."""
    from service.core.config import load_config
    from service.serve.config_watch import REFUSED_MESSAGE

    config = tmp_path / "spendlake.yaml"
    config.write_text(f"lake: {tmp_path / 'lake'}\n")
    said = []
    watch = ConfigWatch(config, said.append, as_read(config), validate=lambda: load_config(config))
    config.write_text(f"lake: {tmp_path / 'lake'}\nservice: {{top_n: 5}}\n")
    later(config)
    assert watch.check() and said == [f"{CHANGED_MESSAGE} ({config})"]
    config.write_text(f"lake: {tmp_path / 'lake'}\nservice: {{top_n: 6}}\n")
    later(config, 10)
    assert watch.check() and said[1:] == [f"{CHANGED_MESSAGE} ({config})"]
    later(config, 15)  # a touch: the change already said
    assert watch.check() and len(said) == 2
    config.write_text(f"lake: {tmp_path / 'lake'}\nservice: {{top_n: 6\n")  # broken after the good edits
    later(config, 20)
    assert watch.check() and len(said) == 3 and said[2].startswith(f"{REFUSED_MESSAGE} ({config}): "), said
    watch.reloading(as_read(config))  # as if that SIGHUP's file were what runs: the next edit is said again
    config.write_text(f"lake: {tmp_path / 'lake'}\nservice: {{top_n: 5}}\n")
    later(config, 25)
    assert watch.check() and said[3:] == [f"{CHANGED_MESSAGE} ({config})"]
