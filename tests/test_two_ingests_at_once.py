"""Two `spendlake ingest`s at once on one lake (RELIABILITY 12), as processes of their own.

Session 47's lead saw two ingests of the demo lake (and of a copy of its config with the source
renamed) started together both exit 0 with the same output. No gap: nothing is read before the
lake's lock, but with nothing new an ingest holds it 0.10-0.28 s (the demo lake), less than the
spread of two processes' start-up, and one that finds it held waits up to LOOK_SECONDS (0.2 s)
for it to be let go (service/core/locks.py): the second took the lock after the first and found
nothing new either. Where both have work and overlap, one commits, the other is refused (exit 3)
naming the holder, and the lake holds the bill once."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from decimal import Decimal

import pytest
import yaml

from conftest import REPO, SAMPLES
from service.core.lake import Lake

FOCUS = SAMPLES / "focus" / "focus_1.0_sample_1000.csv"
BILL = Decimal("20.280226728990") + Decimal("0.240000000000")  # the sample's 2024-09 and 2024-10


def spendlake(config, *args, **popen):
    command = [sys.executable, "-m", "service", "--config", str(config), *args]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    if popen:
        return subprocess.Popen(command, env=env, cwd=REPO, text=True, **popen)
    return subprocess.run(command, env=env, cwd=REPO, capture_output=True, text=True, timeout=300)


def total(config) -> Decimal:
    result = spendlake(config, "attribute", "--since", "2024-09-01", "--until", "2024-11-01", "--format", "json")
    assert result.returncode == 0, result.stderr
    [(currency, cost)] = [(t["currency"], t["cost"]) for t in json.loads(result.stdout)["totals"]]
    return Decimal(cost)


@pytest.mark.slow  # three to five processes
@pytest.mark.parametrize("second", ["the same config", "a copy with the source renamed"])
def test_12_two_ingests_with_work_at_once_one_commits_the_other_is_refused_and_the_bill_counts_once(tmp_path, second):
    (tmp_path / "export").mkdir()
    shutil.copy(FOCUS, tmp_path / "export")
    source = {"name": "focus", "kind": "focus", "location": str(tmp_path / "export")}
    first = tmp_path / "spendlake.yaml"
    first.write_text(yaml.safe_dump({"lake": str(tmp_path / "lake"), "sources": [source]}))
    other = first
    if second == "a copy with the source renamed":
        other = tmp_path / "renamed.yaml"
        other.write_text(yaml.safe_dump({"lake": str(tmp_path / "lake"), "sources": [{**source, "name": "renamed"}]}))
    lake = Lake(tmp_path / "lake")

    running = spendlake(first, "ingest", stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while lake.lock_holder("ingest") is None and running.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    running.send_signal(signal.SIGSTOP)  # held, with its work under way: the overlap, whatever the machine's speed
    try:
        assert running.poll() is None, "the first ingest finished before it was seen holding the lake"
        refused = spendlake(other, "ingest")
    finally:
        running.send_signal(signal.SIGCONT)
    out, err = running.communicate(timeout=300)

    assert refused.returncode == 3, refused.stdout + refused.stderr
    assert f"another spendlake ingest holds the lake (pid {running.pid} on " in refused.stderr
    assert "wait for it to finish, or stop that process" in refused.stderr and not refused.stdout
    assert running.returncode == 0, err
    assert sorted(line.split(": ")[0] for line in out.splitlines()) == ["focus 2024-09", "focus 2024-10"]
    assert "committed 999 rows USD 20.280226728990" in out
    assert sorted((e.source, e.billing_period) for e in lake.ledger()) == [("focus", "2024-09"), ("focus", "2024-10")]

    again = spendlake(other, "ingest")  # once the first let go
    assert again.returncode == 0, again.stderr
    assert ("unchanged" if other == first else "renamed 2024-09: committed 999 rows") in again.stdout, again.stdout
    assert total(first) == total(other) == BILL  # under either config, never doubled
