from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import date
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"
SAMPLES = DATA / "samples"  # copies of ../shared/samples, so the project builds without shared/


@pytest.fixture(autouse=True)
def _no_real_aws(monkeypatch):
    """Tests never reach a real AWS account, whatever the machine's environment holds."""
    isolate(monkeypatch)


@pytest.fixture(autouse=True)
def _no_command_recorded(monkeypatch):
    """The CLI records its command for the locks this process takes (`spendlake rollup`): one test's
    invocation would name the holder of a lock a later test takes in-process."""
    from service.core import locks

    monkeypatch.setattr(locks, "_command", "")


@pytest.fixture(autouse=True)
def _no_rule_checks_kept(monkeypatch):
    """The job rules' checks are kept by what they read (service/attribution/job_rules.py): each
    test starts with none."""
    from collections import OrderedDict

    from service.attribution import job_rules

    monkeypatch.setattr(job_rules, "_CHECKED", OrderedDict())


@pytest.fixture(autouse=True)
def _no_secrets_hidden(monkeypatch):
    """A secret one test hid (a URL's password, a JWT) would be redacted from a later test's output."""
    from service.core import logs

    monkeypatch.setattr(logs, "SECRETS", {})


def isolate(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.delenv("SPENDLAKE_CONFIG", raising=False)


@contextmanager
def state_refused(name: str, number: int, words: str) -> Iterator[None]:
    """Within: Lake.write_state fails with OSError(number, words) for the `name` state file (a
    full disk, a chmod) and writes the others."""
    from service.core.lake import Lake

    write_state = Lake.write_state

    def refused(self, state, data):
        if state == name:
            raise OSError(number, words, str(self.state_file(state)))
        write_state(self, state, data)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Lake, "write_state", refused)
        yield


def written_shorter(file: Path, rows: int = 100) -> None:
    """Another Parquet file of `file`'s first `rows` rows written in its place: shorter, and
    readable (not cut short)."""
    import duckdb

    with duckdb.connect() as con:
        con.execute(f"COPY (SELECT * FROM read_parquet('{file}') LIMIT {rows}) TO '{file}.new' (FORMAT parquet)")
    Path(f"{file}.new").replace(file)


def require_binary(name: str) -> str:
    """Path of a Debian binary a test needs. Under CI=true a missing binary fails the test
    (CI must install it); elsewhere the test is skipped with the install hint."""
    import shutil

    path = shutil.which(name)
    if path:
        return path
    message = f"{name} not found: apt-get install the package that provides it (see .ci/run)"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture
def api_server():
    """`start(api, **options)`: a real HTTP server for an `Api` on 127.0.0.1 (the port the OS
    chose is returned), stopped after the test."""
    from service.serve.listener import make_server

    servers = []

    def start(api, **options) -> int:
        server = make_server(api, "127.0.0.1:0", **options)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return server.server_address[1]

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def stop(proc, timeout: float = 15) -> None:
    """SIGTERM a process a test started, then SIGKILL it if it outlives `timeout` seconds."""
    import subprocess

    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


# The demo organisation most demo tests read: 40 days across a month boundary, seed 7. One
# run per session (the whole demo takes several seconds); tests only read what it wrote.
DEMO_DAYS, DEMO_START, DEMO_SEED = 40, date(2026, 10, 20), 7


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory):
    """`run_demo` once for the session: the DemoResult (config, lake, findings, as_of)."""
    from service.cli.demo_org import run_demo

    with pytest.MonkeyPatch.context() as monkeypatch:  # session fixtures run before the autouse one
        isolate(monkeypatch)
        return run_demo(tmp_path_factory.mktemp("demo") / "d", days=DEMO_DAYS, start=DEMO_START, seed=DEMO_SEED)
