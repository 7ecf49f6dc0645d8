"""`spendlake serve` on a lake it may not write: a lake a batch job writes, mounted read-only for
the service. It refused to start (exit 3 naming its lock file); it now answers reads and its jobs
fail at each run, one line each, counted. The lake is made read-only by chmod, and the service run
without the capabilities that bypass file permissions (test_ingest_hardening.py says why)."""

from __future__ import annotations

import json
import os
import re
import shutil
import time
import urllib.request
from decimal import Decimal
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from conftest import require_binary
from service.cli.main import cli
from servicekit import start_serve
from test_ingest_hardening import BYPASS_PERMISSIONS, FOCUS, lake_bytes, read_only, shared_dir  # noqa: F401

WINDOW = {"since": "2024-01-01", "until": "2025-01-01"}


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=30) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def failures(page: str, task: str) -> float:
    found = re.search(rf'^spendlake_job_failures_total{{[^}}]*task="{task}"[^}}]*}} (\S+)$', page, re.M)
    return float(found.group(1)) if found else 0.0


def read_only_for_it(lake: Path, how: str) -> tuple[str, ...]:
    """What runs the service so that `lake` is read-only for it: chmod-ed (as root, run without the
    capabilities that bypass permissions), or bind-mounted read-only over itself in a mount namespace
    of its own (the service's volume mounted read-only; the file system says EROFS to every user)."""
    if how == "chmod":
        read_only(lake)
        return (require_binary("setpriv"), f"--bounding-set={BYPASS_PERMISSIONS}", "--") if os.geteuid() == 0 else ()
    if os.geteuid() != 0:
        pytest.skip("a read-only bind mount needs root (CAP_SYS_ADMIN)")
    script = 'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" && exec "$@"'
    return (require_binary("unshare"), "--mount", "--propagation", "private", "sh", "-c", script, str(lake))


@pytest.mark.parametrize("how", ["chmod", "mount"])
def test_serve_on_a_lake_it_may_not_write_answers_reads_and_its_jobs_fail_one_line_each(shared_dir, how):
    (shared_dir / "export").mkdir()
    shutil.copy(FOCUS, shared_dir / "export" / "part-1.csv")
    lake = shared_dir / "lake"
    config = shared_dir / "spendlake.yaml"
    config.write_text(yaml.safe_dump({"lake": str(lake), "service": {"listen": "127.0.0.1:0"}, "sources": [
        {"name": "focus", "kind": "focus", "location": str(shared_dir / "export")}]}))
    for args in (["ingest"], ["report", "--date", "2024-09-30"]):  # the batch job's work, written before
        done = CliRunner().invoke(cli, ["--config", str(config), *args])
        assert done.exit_code == 0, done.output
    attributed = CliRunner().invoke(cli, ["--config", str(config), "attribute", "--since", WINDOW["since"],
                                          "--until", WINDOW["until"], "--format", "json"])
    expected = Decimal(json.loads(attributed.output)["totals"][0]["cost"])
    before = lake_bytes(lake)
    proc, url = start_serve(config, prefix=read_only_for_it(lake, how))
    try:
        status, body = get(f"{url}/api/v1/attribute?since={WINDOW['since']}&until={WINDOW['until']}")
        assert status == 200 and Decimal(json.loads(body)["totals"][0]["cost"]) == expected
        assert get(f"{url}/reports/2024-09-30/report.html")[0] == 200  # the report stored before
        deadline = time.monotonic() + 60
        while True:  # the first ingest and the make-up daily run fire at start
            status, page = get(f"{url}/metrics")
            assert status == 200 and "spendlake_lake_readable 1.0" in page
            if all(failures(page, task) >= 1 for task in ("ingest", "rules", "verify", "daily")):
                break
            assert time.monotonic() < deadline, page
            time.sleep(0.5)
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    output = "".join(proc.output)
    assert proc.returncode == 0 and "Traceback" not in output, output
    why = "permission denied for this user" if how == "chmod" else "read-only file system"
    assert output.count(f"warning: the lake {lake} is not writable by this service ({lake}/_locks/service.lock: "
                        f"{why}): serving reads only") == 1, output
    for job in ("ingest", "rules", "verify", "daily"):
        [line] = [line for line in output.splitlines() if f"job {job} failed:" in line]
        assert f"job {job} failed: {lake}: not run: this service cannot write the lake" in line, line
    assert lake_bytes(lake) == before


def test_a_service_read_only_by_its_config_schedules_no_job_and_fails_nothing(shared_dir):
    """review51 item 6: an operator serving a lake a batch job writes on purpose had SpendlakeJobFailing firing for
    as long as serve ran (each job failing at each run, the daily retry every hour). `service.read_only: true`
    schedules no job, writes nothing (no lock, no last good metrics), says so once and in /api/v1/status."""
    (shared_dir / "export").mkdir()
    shutil.copy(FOCUS, shared_dir / "export" / "part-1.csv")
    lake = shared_dir / "lake"
    config = shared_dir / "spendlake.yaml"
    document = {"lake": str(lake), "service": {"listen": "127.0.0.1:0"}, "sources": [
        {"name": "focus", "kind": "focus", "location": str(shared_dir / "export")}]}
    config.write_text(yaml.safe_dump(document))
    assert CliRunner().invoke(cli, ["--config", str(config), "ingest"]).exit_code == 0  # the batch job's work
    config.write_text(yaml.safe_dump({**document, "service": {**document["service"], "read_only": True}}))
    before = lake_bytes(lake)
    proc, url = start_serve(config)
    try:
        status, body = get(f"{url}/api/v1/status")
        assert status == 200 and json.loads(body)["read_only"] is True, body
        time.sleep(3)  # a scheduled ingest and the make-up daily run fire at once at start
        status, page = get(f"{url}/metrics")
        assert status == 200 and "spendlake_lake_readable 1.0" in page
        assert not re.search(r"^spendlake_job_(failures|skipped)_total", page, re.M), page  # no job to count
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    output = "".join(proc.output)
    assert proc.returncode == 0 and "Traceback" not in output, output
    assert output.count(f"the lake {lake} is served for reads only (service.read_only: true)") == 1, output
    assert "failed" not in output and "running it now" not in output, output
    assert lake_bytes(lake) == before
