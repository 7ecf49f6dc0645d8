"""`spendlake serve` as a process: one per lake, SIGTERM waits for jobs and leaves no temp files."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import urllib.request

import pytest
from servicekit import REPO, start_serve, write_config

pytestmark = pytest.mark.slow  # `spendlake serve` subprocesses


def config_data(tmp_path) -> dict:
    return {"lake": str(tmp_path / "lake"), "service": {"listen": "127.0.0.1:0"}}


def test_a_second_serve_on_the_same_lake_refuses_and_names_the_pid(tmp_path):
    config = write_config(tmp_path, config_data(tmp_path))
    proc, base = start_serve(config)
    try:
        assert base.startswith("http://127.0.0.1:")
        with urllib.request.urlopen(base + "/healthz", timeout=10) as response:
            assert json.load(response) == {"status": "ok"}
        second = subprocess.run([sys.executable, "-m", "service", "--config", str(config), "serve"], cwd=REPO,
                                capture_output=True, text=True, timeout=30)
        assert second.returncode == 3
        assert f"another spendlake service holds the lake (pid {proc.pid})" in second.stderr
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
    assert "stopped" in "".join(proc.output)


SLOW_SERVICE = """
import sys, time
from service.core.config import load_config
from service.core.files import write_json_atomic
from service.core.lake import Lake
from service.serve.scheduler import Tasks
from service.serve.service import serve

config = load_config(sys.argv[1])

def slow_daily(day):
    with Lake(config.lake).scratch() as scratch:  # a job's work in progress, as ingest has it
        (scratch / "partial.parquet").write_bytes(b"half")
        print("job started", flush=True)
        time.sleep(1.5)
        write_json_atomic(config.lake.parent / "reports" / "done.json", {"day": day.isoformat()})

serve(config, tasks=Tasks(ingest=lambda: None, rules=None, daily=slow_daily), announce=lambda l: print(l, flush=True))
"""


def test_sigterm_waits_for_the_running_job_exits_0_and_leaves_no_temp_files(tmp_path):
    config = write_config(tmp_path, config_data(tmp_path))
    script = tmp_path / "slow_service.py"
    script.write_text(textwrap.dedent(SLOW_SERVICE))
    proc = subprocess.Popen([sys.executable, str(script), str(config)], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin"})
    lines = []
    try:
        for line in proc.stdout:  # the make-up daily run starts at once on a new lake
            lines.append(line)
            if "job started" in line:
                break
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
    finally:
        proc.kill()
    lines += proc.stdout.readlines()
    output = "".join(lines)
    assert "stopping: waiting for running jobs" in output and output.rstrip().endswith("stopped")
    assert json.loads((tmp_path / "reports" / "done.json").read_text())["day"]
    assert json.loads((tmp_path / "lake" / "_state" / "jobs.json").read_text())["daily"]["last_run_date"]
    leftovers = [p for p in tmp_path.rglob("*") if p.name.endswith(".tmp") or p.name.startswith("scratch-")
                 or p.name == "partial.parquet"]
    assert leftovers == []
