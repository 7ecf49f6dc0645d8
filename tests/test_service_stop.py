"""SIGTERM waits for the running job (RELIABILITY 24), and only for it: the step queued behind
it (the rules after an ingest, the report after verify, a daily run waiting for its turn) is
left to the next start, which makes it up, rather than stretching the stop toward the SIGKILL."""

from __future__ import annotations

import threading
import time
from datetime import datetime, timedelta, timezone
from datetime import time as daytime

from prometheus_client import CollectorRegistry

from service.core.lake import Lake
from service.serve.scheduler import ServiceScheduler, Tasks


def wait_for(predicate, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_a_stop_during_ingest_waits_for_it_and_leaves_the_rules_and_the_report_to_the_next_start(tmp_path):
    from service.serve.metrics import JobMetrics

    lake, ran, release = Lake(tmp_path / "lake"), [], threading.Event()

    def ingest():
        ran.append("ingest")
        assert release.wait(10)

    tasks = Tasks(ingest=ingest, rules=lambda: ran.append("rules"), daily=lambda day: ran.append("daily"),
                  verify=lambda: ran.append("verify"))
    scheduler = ServiceScheduler(lake, JobMetrics(CollectorRegistry(), tasks.names()), tasks,
                                 ingest_every=timedelta(hours=1), daily_at=daytime(6, 0),
                                 clock=lambda: datetime.now(timezone.utc))
    scheduler.start()  # no daily run done yet: the make-up run waits for the first ingest
    wait_for(lambda: ran == ["ingest"])
    stopping = threading.Thread(target=scheduler.shutdown)
    stopping.start()
    wait_for(scheduler._stopped.is_set)  # the stop is under way before the ingest returns
    time.sleep(0.3)
    assert stopping.is_alive()  # the running ingest is waited for
    release.set()
    stopping.join(10)
    assert not stopping.is_alive() and ran == ["ingest"]
    assert "daily" not in lake.read_state("jobs")  # not done: the next start makes it up


def test_a_stop_during_verify_leaves_the_report_to_the_next_start(tmp_path):
    from service.serve.metrics import JobMetrics

    lake, ran, release = Lake(tmp_path / "lake"), [], threading.Event()

    def verify():
        ran.append("verify")
        assert release.wait(10)

    tasks = Tasks(ingest=lambda: ran.append("ingest"), rules=None, daily=lambda day: ran.append("daily"),
                  verify=verify)
    scheduler = ServiceScheduler(lake, JobMetrics(CollectorRegistry(), tasks.names()), tasks,
                                 ingest_every=timedelta(hours=1), daily_at=daytime(6, 0),
                                 clock=lambda: datetime.now(timezone.utc))
    scheduler.start()
    wait_for(lambda: ran == ["ingest", "verify"])
    stopping = threading.Thread(target=scheduler.shutdown)
    stopping.start()
    wait_for(scheduler._stopped.is_set)  # the stop is under way before verify returns
    release.set()
    stopping.join(10)
    assert not stopping.is_alive() and ran == ["ingest", "verify"]
    assert "daily" not in lake.read_state("jobs")
