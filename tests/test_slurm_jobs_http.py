"""slurm-jobs over HTTP against a stand-in slurmrestd that replays the real one's answers
(tests/data/slurm/slurmrestd-jobs.json, and the errors Slurm 22.05 gives): version discovery,
the time window, the JWT from the environment (never logged), retries, refusals.
The real slurmrestd is read in tests/test_slurm_jobs_live.py."""

from __future__ import annotations

import base64
import json
import logging
import threading
import time
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from click.testing import CliRunner
from conftest import DATA

from connectors import http_json
from service.attribution.allocation import SETTLED_JOBS, newest_records
from service.cli.main import cli
from service.core.config import parse_config
from service.core.errors import SourceError
from service.core.lake import Lake
from service.ingest.inventory import run_inventory
from test_slurm_jobs import SETTLED, jobs, requeued_in_its_submit_second

NOW = datetime(2026, 12, 2, 6, tzinfo=timezone.utc)
CLAIMS = base64.urlsafe_b64encode(json.dumps({"exp": 1, "iat": 0, "sun": "svc-spend"}).encode()).decode().rstrip("=")
TOKEN = f"eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.{CLAIMS}.c2lnbmF0dXJl"
ANSWER = (DATA / "slurm" / "slurmrestd-jobs.json").read_bytes()
SLOW_SECONDS = 1.5
OPENAPI = json.dumps({"paths": {p: {} for p in ("/slurmdb/v0.0.37/jobs", "/slurmdb/v0.0.38/jobs",
                                                "/slurmdb/v0.0.38/job/{job_id}", "/slurm/v0.0.39/jobs")}}).encode()


class FakeSlurmrestd(BaseHTTPRequestHandler):
    """Answers as slurmrestd 22.05 does; `plan` holds queued (status, body) answers for the jobs path."""

    requests: list[tuple[str, dict, dict]]
    plan: list[tuple[int, bytes]]
    slow: tuple[str, ...] = ()  # paths answered only after slow_seconds
    slow_seconds = SLOW_SECONDS

    def do_GET(self):  # noqa: N802 (http.server's name)
        path, query = urlsplit(self.path).path, parse_qs(urlsplit(self.path).query)
        self.requests.append((path, query, dict(self.headers)))
        if path in self.slow:
            time.sleep(self.slow_seconds)
        if self.headers.get("X-SLURM-USER-TOKEN") and not self.headers.get("X-SLURM-USER-NAME"):
            return self.answer(401, b"Authentication failure")
        if path in ("/openapi/v3", "/openapi"):
            return self.answer(200, OPENAPI)
        if path == "/slurmdb/v0.0.38/jobs":
            return self.answer(*(self.plan.pop(0) if self.plan else (200, ANSWER)))
        return self.answer(404, b"Unable find requested URL")

    def answer(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        try:
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):  # a slow answer the client gave up on
            pass

    def log_message(self, *args):
        pass


@pytest.fixture
def slurmrestd(monkeypatch):
    monkeypatch.setattr(http_json, "BACKOFF_SECONDS", 0)
    handler = type("Handler", (FakeSlurmrestd,), {"requests": [], "plan": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", handler
    finally:
        server.shutdown()
        server.server_close()


def run(tmp_path: Path, url: str, now: datetime = NOW, **source):
    config = parse_config({"lake": str(tmp_path / "lake"),
                           "inventory": [{"name": "slurm", "kind": "slurm-jobs", "url": url, **source}]})
    [outcome] = run_inventory(config, now=now)
    return outcome


def test_jobs_of_the_lookback_window_from_the_newest_version(tmp_path, slurmrestd, monkeypatch):
    url, server = slurmrestd
    monkeypatch.setenv("SLURM_JWT", TOKEN)
    outcome = run(tmp_path, url, token_env="SLURM_JWT", lookback_hours=24)
    assert outcome.error is None, outcome.error
    assert jobs(tmp_path) == SETTLED
    (discovery, _, _), (path, query, headers) = server.requests
    assert (discovery, path) == ("/openapi/v3", "/slurmdb/v0.0.38/jobs")
    since = int((NOW - timedelta(hours=24)).timestamp())
    assert query == {"start_time": [f"uts{since}"], "end_time": [f"uts{int(NOW.timestamp())}"]}
    # the user is the token's own (its `sun` claim) unless user_name says otherwise
    assert (headers["X-SLURM-USER-TOKEN"], headers["X-SLURM-USER-NAME"]) == (TOKEN, "svc-spend")


def test_a_configured_version_and_user_skip_discovery(tmp_path, slurmrestd, monkeypatch):
    url, server = slurmrestd
    monkeypatch.setenv("SLURM_JWT", TOKEN)
    assert run(tmp_path, url + "/", token_env="SLURM_JWT", api_version="v0.0.38", user_name="root").error is None
    [(path, _, headers)] = server.requests
    assert (path, headers["X-SLURM-USER-NAME"]) == ("/slurmdb/v0.0.38/jobs", "root")


@pytest.mark.parametrize("slow, version, lever", [
    (("/openapi/v3", "/openapi"), None, "set inventory[0].api_version (e.g. v0.0.40)"),
    (("/slurmdb/v0.0.38/jobs",), "v0.0.38", "read a shorter window (inventory[0].lookback_hours)")])
def test_a_request_too_slow_names_the_setting_that_makes_its_answer_smaller(tmp_path, slurmrestd, slow, version,
                                                                           lever):
    """The OpenAPI document that tells the version is the same whatever the window: a discovery too
    slow was told to read a shorter window (lookback_hours); it is told to set api_version, so it is
    not asked for. The jobs' own request names the window, under the source's path."""
    url, server = slurmrestd
    server.slow = slow
    versioned = {"api_version": version} if version else {}
    error = str(run(tmp_path, url, timeout_seconds=0.3, max_attempts=1, **versioned).error)
    assert "the server was too slow" in error and f"raise inventory[0].timeout_seconds, or {lever}" in error, error
    assert ("lookback_hours" in error) == (version is not None)


def test_nothing_in_the_window_is_zero_jobs_not_a_failure(tmp_path, slurmrestd, monkeypatch):
    url, server = slurmrestd
    monkeypatch.setenv("SLURM_JWT", TOKEN)
    server.plan.append((200, json.dumps({"errors": [{"description": "Nothing found", "error_number": 9003,
                                                     "error": "Nothing found with query"}], "jobs": []}).encode()))
    outcome = run(tmp_path, url, token_env="SLURM_JWT", api_version="v0.0.38")
    assert outcome.error is None and outcome.rows == {"jobs snapshot_date=2026-12-02": 0}


def test_14_slurmrestd_unavailable_twice_then_answering_succeeds_after_retries(tmp_path, slurmrestd, monkeypatch):
    url, server = slurmrestd
    monkeypatch.setenv("SLURM_JWT", TOKEN)
    server.plan += [(503, b"busy"), (502, b"bad gateway")]
    outcome = run(tmp_path, url, token_env="SLURM_JWT", api_version="v0.0.38", max_attempts=3)
    assert outcome.error is None and len(server.requests) == 3 and jobs(tmp_path) == SETTLED


def test_15_slurmrestd_unavailable_every_time_fails_after_the_attempts_and_commits_nothing(tmp_path, slurmrestd,
                                                                                           monkeypatch):
    url, server = slurmrestd
    monkeypatch.setenv("SLURM_JWT", TOKEN)
    server.plan += [(503, b"busy")] * 5
    outcome = run(tmp_path, url, token_env="SLURM_JWT", api_version="v0.0.38", max_attempts=4)
    assert f"{url}/slurmdb/v0.0.38/jobs: answered HTTP 503 after 4 attempts: busy" in str(outcome.error)
    assert len(server.requests) == 4 and not (tmp_path / "lake" / "jobs").exists()


def test_19_a_refused_token_exits_3_saying_how_to_renew_it_and_20_the_token_is_never_shown(
        tmp_path, slurmrestd, monkeypatch):
    url, server = slurmrestd
    monkeypatch.setenv("SLURM_JWT", TOKEN)
    # slurmrestd 22.05 answers a bad token with HTTP 200 and an error (tests/test_slurm_cluster.py)
    server.plan.append((200, json.dumps({"errors": [{"error_number": 1007, "error": "Protocol authentication error",
                                                     "source": "slurmdb_jobs_get"}], "jobs": []}).encode()))
    (tmp_path / "spendlake.yaml").write_text(json.dumps({"lake": str(tmp_path / "lake"), "inventory": [
        {"name": "slurm", "kind": "slurm-jobs", "url": url, "token_env": "SLURM_JWT", "api_version": "v0.0.38"}]}))
    result = CliRunner().invoke(cli, ["--config", str(tmp_path / "spendlake.yaml"), "-vv", "inventory"])
    assert result.exit_code == 3
    assert "slurmrestd answered with error(s): Protocol authentication error" in result.output
    assert "the JWT in SLURM_JWT was refused: renew it (scontrol token)" in result.output
    assert 'DEBUG urllib3.connectionpool: http://127.0.0.1' in result.output  # the request was logged, its path only
    assert TOKEN not in result.output and CLAIMS not in result.output


def test_a_missing_token_variable_is_named(tmp_path, slurmrestd, monkeypatch):
    url, server = slurmrestd
    monkeypatch.delenv("SLURM_JWT", raising=False)
    outcome = run(tmp_path, url, token_env="SLURM_JWT")
    assert "the environment variable SLURM_JWT holding slurmrestd's JWT is not set" in str(outcome.error)
    assert "inventory[0].token_env" in str(outcome.error) and server.requests == []


def test_a_server_without_slurmdb_jobs_or_not_there_is_named(tmp_path, slurmrestd, monkeypatch):
    url, server = slurmrestd
    monkeypatch.setenv("SLURM_JWT", TOKEN)
    monkeypatch.setattr(FakeSlurmrestd, "do_GET", lambda self: self.answer(200, b'{"paths": {}}'))
    outcome = run(tmp_path, url, token_env="SLURM_JWT")
    assert "cannot tell which /slurmdb/<version>/jobs slurmrestd serves" in str(outcome.error)
    assert "set inventory[0].api_version (e.g. v0.0.38)" in str(outcome.error)
    outcome = run(tmp_path, "http://127.0.0.1:9/", api_version="v0.0.38", max_attempts=2)
    assert "http://127.0.0.1:9/slurmdb/v0.0.38/jobs: cannot reach it after 2 attempt(s)" in str(outcome.error)


def test_an_unreachable_ipv6_url_is_named_with_its_brackets_and_without_its_query():
    with pytest.raises(SourceError) as raised:
        http_json.get_json("http://[::1]:9/slurmdb/v0.0.38/jobs?token=s3cret", attempts=1, timeout=2)
    assert str(raised.value).startswith("http://[::1]:9/slurmdb/v0.0.38/jobs: cannot reach it after 1 attempt(s)")
    assert "s3cret" not in str(raised.value)


META = {"plugin": {"type": "openapi/slurmdbd", "name": "Slurm OpenAPI slurmdbd", "data_parser": "data_parser/v0.0.40",
                   "accounting_storage": "accounting_storage/slurmdbd"},
        "client": {"source": "[127.0.0.1]:51234", "user": "svc-spend", "group": "svc-spend"},
        "command": [], "slurm": {"version": {"major": "23", "micro": "4", "minor": "11"}, "release": "23.11.4",
                                 "cluster": "spendlake"}}


def test_an_error_answer_says_slurms_errors_not_the_start_of_its_meta_block(tmp_path, slurmrestd, monkeypatch):
    """Slurm 23 answers a failed query with HTTP 500 and `errors` after a `meta` block longer than
    the 300 characters shown: the error said only `{"meta": {"plugin": ...`."""
    url, server = slurmrestd
    monkeypatch.setenv("SLURM_JWT", TOKEN)
    body = {"meta": META, "errors": [{"description": "Unable to connect to slurmdbd", "error_number": 1800,
                                      "error": "Unable to contact slurm controller (connect failure)",
                                      "source": "slurmdb_jobs_get"}], "warnings": [], "jobs": []}
    server.plan.append((500, json.dumps(body).encode()))
    outcome = run(tmp_path, url, token_env="SLURM_JWT", api_version="v0.0.38", max_attempts=1)
    assert (f"{url}/slurmdb/v0.0.38/jobs: answered HTTP 500: Unable to connect to slurmdbd"
            in str(outcome.error)), outcome.error
    assert not (tmp_path / "lake" / "jobs").exists()


def test_slurms_warnings_are_said_and_its_jobs_read(tmp_path, slurmrestd, monkeypatch, caplog):
    url, server = slurmrestd
    monkeypatch.setenv("SLURM_JWT", TOKEN)
    body = json.loads(ANSWER) | {"warnings": [{"description": "Cluster spendlake is not responding",
                                               "source": "slurmdb_jobs_get"}]}
    server.plan.append((200, json.dumps(body).encode()))
    outcome = run(tmp_path, url, token_env="SLURM_JWT", api_version="v0.0.38")
    assert outcome.error is None and jobs(tmp_path) == SETTLED
    assert (f"{url}/slurmdb/v0.0.38/jobs: Slurm wrote 1 warning(s) beside the jobs: Cluster spendlake is not "
            "responding") in caplog.text


def test_jobs_starting_after_the_snapshot_are_said_of_slurmrestd_as_a_clock_not_a_zone(tmp_path, slurmrestd,
                                                                                       monkeypatch, caplog):
    """slurmrestd's times are seconds since 1970 (no zone to set): a job starting after the
    snapshot is a clock ahead (slurmctld's) or behind (this one), said as files' are (jobs48
    said it of files alone); read all the same. The answer's jobs start 2026-12-02 01:19:49-54."""
    url, _ = slurmrestd
    monkeypatch.setenv("SLURM_JWT", TOKEN)
    outcome = run(tmp_path, url, now=datetime(2026, 12, 2, 1, tzinfo=timezone.utc), token_env="SLURM_JWT",
                  api_version="v0.0.38")
    assert outcome.error is None and jobs(tmp_path)
    [said] = [r.getMessage() for r in caplog.records if "start after this snapshot" in r.getMessage()]
    assert said.startswith(f"{url}/slurmdb/v0.0.38/jobs: 10 job(s) start after this snapshot was taken "
                           "(2026-12-02T01:00:00 UTC), which no job can; the first, job ")
    assert said.endswith("its times are seconds since 1970, the same in every zone: the clock that wrote them runs "
                         "ahead of this machine's, or this machine's runs behind (compare both with NTP)")
    assert "timezone" not in said
    caplog.clear()  # within the clock skew: nothing said
    assert run(tmp_path / "at", url, now=datetime(2026, 12, 2, 1, 16, tzinfo=timezone.utc), token_env="SLURM_JWT",
               api_version="v0.0.38").error is None
    assert "start after this snapshot" not in caplog.text



def test_jobs_starting_after_the_snapshot_in_a_sacct_json_file_are_said_as_a_clock_not_a_zone(tmp_path, caplog):
    """review49 #4: sacct --json files carry seconds since 1970 as slurmrestd does, yet their
    line said "its times are read in UTC (inventory[0].timezone) … set inventory[0].timezone",
    which changes nothing for them. A parsable2 file keeps the zone's words
    (test_job_times_impossible)."""
    (tmp_path / "sacct.json").write_bytes(ANSWER)
    config = parse_config({"lake": str(tmp_path / "lake"), "inventory": [
        {"name": "slurm", "kind": "slurm-jobs", "path": str(tmp_path / "sacct.json")}]})
    [outcome] = run_inventory(config, now=datetime(2026, 12, 2, 1, tzinfo=timezone.utc))
    assert outcome.error is None and jobs(tmp_path)
    [said] = [r.getMessage() for r in caplog.records if "start after this snapshot" in r.getMessage()]
    assert said.startswith(f"{tmp_path / 'sacct.json'}: 10 job(s) start after this snapshot was taken "
                           "(2026-12-02T01:00:00 UTC), which no job can; the first, job "), said
    assert said.endswith("its times are seconds since 1970, the same in every zone: the clock that wrote them runs "
                         "ahead of this machine's, or this machine's runs behind (compare both with NTP)"), said

def test_a_sacct_json_file_with_warnings_is_read_and_they_are_said(tmp_path, caplog):
    body = json.loads(ANSWER) | {"warnings": [{"description": "Cluster spendlake is not responding",
                                               "error": "Unspecified error"}]}
    (tmp_path / "sacct.json").write_text(json.dumps(body))
    config = parse_config({"lake": str(tmp_path / "lake"), "inventory": [
        {"name": "slurm", "kind": "slurm-jobs", "path": str(tmp_path / "sacct.json")}]})
    [outcome] = run_inventory(config, now=NOW)
    assert outcome.error is None and jobs(tmp_path) == SETTLED
    assert (f"{tmp_path / 'sacct.json'}: Slurm wrote 1 warning(s) beside the jobs: Cluster spendlake is not "
            "responding (Unspecified error)") in caplog.text


def test_a_urls_user_and_password_are_sent_as_basic_auth_and_never_shown(tmp_path, slurmrestd, caplog):
    """`https://user:p%C3%A4ss@host` (a slurmrestd behind a proxy that asks for a password): urllib3
    sent the request without them."""
    url, server = slurmrestd
    with_password = url.replace("http://", "http://svc%40lab:p%C3%A4ss:w@")
    caplog.set_level("DEBUG")
    assert run(tmp_path, with_password, api_version="v0.0.38").error is None
    [(_, _, headers)] = server.requests
    assert headers["Authorization"] == "Basic " + base64.b64encode("svc@lab:päss:w".encode()).decode()
    server.plan += [(503, b"busy")] * 2
    outcome = run(tmp_path, with_password, api_version="v0.0.38", max_attempts=2)
    assert f"{url}/slurmdb/v0.0.38/jobs: answered HTTP 503 after 2 attempts" in str(outcome.error)
    assert "p%C3%A4ss" not in str(outcome.error) + caplog.text and "svc%40lab" not in caplog.text


def test_an_answer_nested_too_deeply_is_not_json_naming_the_url(tmp_path, slurmrestd):
    url, server = slurmrestd
    server.plan.append((200, b"[" * 100_000))
    outcome = run(tmp_path, url, api_version="v0.0.38")
    assert f"{url}/slurmdb/v0.0.38/jobs: the answer is not JSON (JSON nested too deeply" in str(outcome.error)
    assert outcome.error.exit_code == 3


def test_a_token_whose_claims_nest_too_deeply_is_sent_to_slurmrestd_without_a_user_name(tmp_path, slurmrestd, monkeypatch):
    url, server = slurmrestd
    nested = base64.urlsafe_b64encode(b"[" * 20_000).decode().rstrip("=")
    monkeypatch.setenv("SLURM_JWT", f"eyJhbGciOiJIUzI1NiJ9.{nested}.c2lnbmF0dXJl")
    outcome = run(tmp_path, url, token_env="SLURM_JWT", api_version="v0.0.38")
    # was a RecursionError traceback reading the token's claims; now slurmrestd judges the token
    assert "HTTP 401" in str(outcome.error), outcome.error
    (_, _, headers), = server.requests
    assert "X-SLURM-USER-NAME" not in headers


@pytest.mark.parametrize("api_version", [None, "v0.0.38"])
def test_an_expired_token_answered_with_http_401_says_to_renew_it(tmp_path, slurmrestd, monkeypatch, api_version):
    """slurmrestd 23.02 and later answer a refused or expired JWT with HTTP 401 (22.05 with 200
    and an error): the hint said to check the URL and the openapi/db plugin, or, while the
    version was looked up, to set api_version."""
    url, server = slurmrestd
    monkeypatch.setenv("SLURM_JWT", TOKEN)
    server.do_GET = lambda self: self.answer(401, b"Authentication failure")
    outcome = run(tmp_path, url, token_env="SLURM_JWT", **({"api_version": api_version} if api_version else {}))
    assert ": answered HTTP 401: Authentication failure — the JWT in SLURM_JWT was refused or has expired: renew " \
           "it (scontrol token lifespan=...) and check inventory[0].user_name" in str(outcome.error), outcome.error
    assert TOKEN not in str(outcome.error)


def test_a_job_running_in_one_window_and_in_none_of_a_later_one_ends_when_last_seen(tmp_path, slurmrestd, caplog):
    """A job running when a snapshot was taken and absent from the next, whose window starts
    after that: each snapshot's record holds when it was taken and from when it read, and the
    run that ends the job says so once (tests/test_ended_jobs.py prices it)."""
    url, server = slurmrestd
    answer = json.loads(ANSWER)
    running = next(job for job in answer["jobs"] if job["job_id"] == 2)
    running["state"]["current"], running["time"]["end"] = "RUNNING", 0
    nothing = json.dumps({"errors": [{"description": "Nothing found", "error_number": 9003,
                                      "error": "Nothing found with query"}], "jobs": []}).encode()
    server.plan += [(200, json.dumps(answer).encode()), (200, nothing), (200, nothing)]
    config = parse_config({"lake": str(tmp_path / "lake"), "inventory": [
        {"name": "slurm", "kind": "slurm-jobs", "url": url, "api_version": "v0.0.38", "lookback_hours": 24}]})
    run_inventory(config, now=NOW)
    caplog.set_level(logging.WARNING)
    for later in (NOW + timedelta(hours=30), NOW + timedelta(days=2)):  # ends it; then nothing more to say
        assert run_inventory(config, now=later)[0].error is None
    [said] = [r.getMessage() for r in caplog.records if "taken to have ended" in r.getMessage()]
    assert said.startswith("inventory source slurm: 1 job record(s) running when an earlier snapshot was taken")
    assert "first: spendlake/2@1796174389, last seen 2026-12-02 06:00:00 UTC" in said
    record = json.loads((tmp_path / "lake/_ledger/snapshots/jobs/source=slurm/snapshot_date=2026-12-03.json")
                        .read_text())
    assert (record["taken_at"], record["window_start"]) == ("2026-12-03T12:00:00+00:00", "2026-12-02T12:00:00+00:00")
    con = Lake(tmp_path / "lake").query()
    try:
        assert con.execute(f"SELECT end_time FROM ({SETTLED_JOBS}) WHERE record_id = 'spendlake/2@1796174389' "
                           "AND snapshot_date = '2026-12-02'").fetchall() == [(datetime(2026, 12, 2, 6),)]
    finally:
        con.close()


def test_a_later_window_asking_another_user_ends_the_job_when_last_seen_and_says_so(tmp_path, slurmrestd, caplog):
    """slurmrestd shows a user's jobs only (PrivateData): a later window read as another user
    does not ask about job 2 any more, so it ended when last seen (its GPUs idle since, not
    held to every later bill), said once; the next read as the first user says nothing more
    (each snapshot's record holds the fingerprint of what it asked, hashed)."""
    url, server = slurmrestd
    answer = json.loads(ANSWER)
    running = next(job for job in answer["jobs"] if job["job_id"] == 2)
    running["state"]["current"], running["time"]["end"] = "RUNNING", 0
    nothing = json.dumps({"jobs": []}).encode()
    server.plan += [(200, json.dumps(answer).encode()), (200, nothing), (200, nothing)]

    def inventory(user: str, now: datetime) -> list[tuple]:
        config = parse_config({"lake": str(tmp_path / "lake"), "inventory": [
            {"name": "slurm", "kind": "slurm-jobs", "url": url, "api_version": "v0.0.38", "lookback_hours": 24,
             "user_name": user}]})
        assert run_inventory(config, now=now)[0].error is None
        with Lake(tmp_path / "lake").query() as con:
            return con.execute(f"SELECT end_time FROM ({SETTLED_JOBS}) WHERE record_id = 'spendlake/2@1796174389' "
                               "AND snapshot_date = '2026-12-02'").fetchall()

    caplog.set_level(logging.WARNING)
    inventory("alice", NOW)
    assert inventory("bob", NOW + timedelta(hours=18)) == [(datetime(2026, 12, 2, 6),)]  # its window reaches back
    assert inventory("alice", NOW + timedelta(days=2)) == [(datetime(2026, 12, 2, 6),)]
    [said] = [r.getMessage() for r in caplog.records if "job record(s)" in r.getMessage()]
    assert "1 job record(s) running when an earlier snapshot was taken are not in this one, which asked otherwise" in said
    assert "taken to have ended when last seen" in said
    records = sorted((tmp_path / "lake/_ledger/snapshots/jobs/source=slurm").glob("*.json"))
    alice, bob, again = (json.loads(path.read_text())["fingerprint"] for path in records)
    assert alice == again != bob and url not in records[0].read_text()


def test_sacct_files_record_no_window(tmp_path):
    config = parse_config({"lake": str(tmp_path / "lake"), "inventory": [
        {"name": "slurm", "kind": "slurm-jobs", "path": str(DATA / "slurm" / "sacct.json")}]})
    run_inventory(config, now=NOW)
    [record] = (tmp_path / "lake/_ledger/snapshots/jobs/source=slurm").glob("*.json")
    assert "taken_at" not in json.loads(record.read_text())


def test_switched_to_sacct_files_a_running_job_they_do_not_hold_ends_when_last_seen_and_says_so(
        tmp_path, slurmrestd, caplog):
    """slurm-jobs switched from `url` to `path`: the files' snapshots hold no window times, so
    job 2, running in slurmrestd's last window and not in the files, ran on for ever; it ends
    when last seen, said with the sacct that gives its end, and a file holding it gives it."""
    url, server = slurmrestd
    answer = json.loads(ANSWER)
    running = next(job for job in answer["jobs"] if job["job_id"] == 2)
    running["state"]["current"], running["time"]["end"] = "RUNNING", 0
    server.plan.append((200, json.dumps(answer).encode()))
    without = json.loads((DATA / "slurm" / "sacct.json").read_text())
    without["jobs"] = [job for job in without["jobs"] if job["job_id"] != 2]
    (tmp_path / "without-2.json").write_text(json.dumps(without))

    def inventory(now: datetime, **read) -> list[tuple]:
        config = parse_config({"lake": str(tmp_path / "lake"),
                               "inventory": [{"name": "slurm", "kind": "slurm-jobs", "lookback_hours": 24, **read}]})
        assert run_inventory(config, now=now)[0].error is None
        with Lake(tmp_path / "lake").query() as con:
            return con.execute(f"SELECT end_time FROM ({newest_records(f'({SETTLED_JOBS})')}) "
                               "WHERE newest = 1 AND record_id = 'spendlake/2@1796174389'").fetchall()

    assert inventory(NOW, url=url, api_version="v0.0.38") == [(None,)]
    caplog.set_level(logging.WARNING)
    assert inventory(NOW + timedelta(days=1), path=str(tmp_path / "without-2.json")) == [(datetime(2026, 12, 2, 6),)]
    [said] = [r.getMessage() for r in caplog.records if "taken to have ended" in r.getMessage()]
    assert "1 job record(s) running when an earlier snapshot was taken are not in this one" in said
    assert said.endswith("; sacct files holding it give its end: sacct -S 2026-12-02)")
    ended = datetime.fromtimestamp(1796174394, timezone.utc).replace(tzinfo=None)
    assert inventory(NOW + timedelta(days=2), path=str(DATA / "slurm" / "sacct.json")) == [(ended,)]


def read_twice_the_same_day(tmp_path, slurmrestd, *times: datetime, between=lambda: None) -> list[tuple]:
    """slurmrestd answers job 2 running, then nothing; inventory (lookback_hours 6) runs at
    `times` (`between` called after the first): the job records as their readers take them
    (record_id, state, end_time)."""
    url, server = slurmrestd
    answer = json.loads(ANSWER)
    running = next(job for job in answer["jobs"] if job["job_id"] == 2)
    running["state"]["current"], running["time"]["end"] = "RUNNING", 0
    answer["jobs"] = [running]
    server.plan += [(200, json.dumps(answer).encode()), (200, json.dumps({"jobs": []}).encode())]
    config = parse_config({"lake": str(tmp_path / "lake"), "inventory": [
        {"name": "slurm", "kind": "slurm-jobs", "url": url, "api_version": "v0.0.38", "lookback_hours": 6}]})
    for number, now in enumerate(times):
        assert run_inventory(config, now=now)[0].error is None
        if number == 0:
            between()
    with Lake(tmp_path / "lake").query() as con:
        return con.execute(f"SELECT record_id, state, end_time FROM ({SETTLED_JOBS})").fetchall()


def test_a_days_snapshot_verify_found_altered_is_replaced_keeping_nothing_of_it(tmp_path, slurmrestd):
    """The earlier snapshot passes the quick check but `verify` found its bytes altered: its
    records are not kept into the day's new one, which replaces it as before (and repairs it)."""
    lake = Lake(tmp_path / "lake")
    altered = {"snapshot": "jobs/source=slurm/snapshot_date=2026-12-02", "state": "altered", "detail": "sha256"}
    settled = read_twice_the_same_day(tmp_path, slurmrestd, NOW, NOW + timedelta(hours=17),
                                      between=lambda: lake.write_state("snapshot_verify", {"problems": [altered]}))
    assert settled == []


def test_a_days_snapshot_taken_again_keeps_the_jobs_only_the_earlier_one_held(tmp_path, slurmrestd, caplog):
    """Inventory run again the same day replaces the day's snapshot; with lookback_hours 6 the
    23:00 run reads from 17:00, so job 2, running at 06:00 and ended before 17:00, was in no
    snapshot any more: its GPU-hours idle, the run gone from `runs`. The earlier snapshot's jobs
    the later one does not hold are kept, a running one ended when it was last seen, and the
    day's record reads from the earlier window's start."""
    settled = read_twice_the_same_day(tmp_path, slurmrestd, NOW, NOW + timedelta(hours=17))  # 06:00, 23:00
    assert settled == [("spendlake/2@1796174389", "RUNNING", datetime(2026, 12, 2, 6))]
    [said] = [r.getMessage() for r in caplog.records if "taken to have ended" in r.getMessage()]  # said once
    assert said.startswith("inventory source slurm: 1 job record(s) running when the day's earlier snapshot was taken "
                           "are not in this one, which replaces it (first: spendlake/2@1796174389, last seen "
                           "2026-12-02 06:00:00 UTC): kept, each taken to have ended when last seen")
    [record] = (tmp_path / "lake/_ledger/snapshots/jobs/source=slurm").glob("*.json")
    assert (json.loads(record.read_text())["taken_at"], json.loads(record.read_text())["window_start"]) == (
        "2026-12-02T23:00:00+00:00", "2026-12-02T00:00:00+00:00")


def test_a_damaged_snapshot_of_another_source_leaves_this_one_stored(tmp_path, slurmrestd, caplog):
    url, _ = slurmrestd
    config = parse_config({"lake": str(tmp_path / "lake"), "inventory": [
        {"name": "slurm", "kind": "slurm-jobs", "url": url, "api_version": "v0.0.38"},
        {"name": "other", "kind": "jobs-file", "path": str(tmp_path / "none"), "cluster": "p5"}]})
    lake = Lake(tmp_path / "lake")
    with lake.connect() as con:
        damaged = lake.commit_snapshot(con, con.sql("SELECT 'x' AS record_id"), table="jobs", source="other",
                                       key="snapshot_date", value="2026-12-01")
    damaged.write_bytes(damaged.read_bytes()[:-20])
    [outcome] = run_inventory(config, only=["slurm"], now=NOW)
    assert outcome.error is None and outcome.rows == {"jobs snapshot_date=2026-12-02": len(SETTLED)}
    assert "could not count the job records its snapshot ends: " in caplog.text
    assert "jobs snapshot source=other/snapshot_date=2026-12-01 is truncated" in caplog.text


def test_a_days_snapshot_taken_again_by_a_clock_set_back_ends_what_it_keeps_no_later_than_now(tmp_path, slurmrestd):
    """The day's earlier snapshot was taken at 23:00 by a clock that ran ahead; set back, the run
    at 06:00 keeps job 2 it no longer reads ended at 06:00, not at 23:00, hours not yet lived."""
    settled = read_twice_the_same_day(tmp_path, slurmrestd, NOW + timedelta(hours=17), NOW)  # 23:00, then 06:00
    assert [end for _, _, end in settled] == [datetime(2026, 12, 2, 6)]


def test_gpu_shards_in_a_slurmrestd_answer_count_as_configured(tmp_path, slurmrestd, monkeypatch):
    """As in a sacct file (test_slurm_shapes.py): job 2 on 2 shards, 4 per GPU, holds half a GPU."""
    from test_slurm_shapes import sharded

    url, server = slurmrestd
    monkeypatch.setenv("SLURM_JWT", TOKEN)
    server.plan.append((200, sharded(tmp_path, "slurmrestd-jobs.json").read_bytes()))
    assert run(tmp_path, url, token_env="SLURM_JWT", shared_gpus={"shard": 4}).error is None
    assert dict(jobs(tmp_path, "job_id, gpus"))["2"] == 0.5


def test_gpu_shards_in_a_slurmrestd_answer_without_shared_gpus_are_said(tmp_path, slurmrestd, monkeypatch, caplog):
    """Without shared_gpus job 2's shards count 0 GPUs: one line says so, naming the key to set."""
    from test_slurm_shapes import sharded

    url, server = slurmrestd
    monkeypatch.setenv("SLURM_JWT", TOKEN)
    server.plan.append((200, sharded(tmp_path, "slurmrestd-jobs.json").read_bytes()))
    assert run(tmp_path, url, token_env="SLURM_JWT").error is None
    assert dict(jobs(tmp_path, "job_id, gpus"))["2"] == 0
    assert "1 record(s) hold gres/shard, which shares GPUs, and count 0 GPUs for it (their hours go to idle); the " \
           "first, job 2: set inventory[0].shared_gpus: {shard: <its count per GPU in gres.conf>}" in caplog.text


def test_a_url_with_a_query_keeps_it_after_the_paths_asked(tmp_path, slurmrestd):
    """`http://h/?tenant=a#top`: the discovery and jobs paths went after the query (or the
    fragment), so slurmrestd was asked for `/` (404); the query now follows each path and joins
    the window's parameters, the fragment (never sent) dropped."""
    url, server = slurmrestd
    assert run(tmp_path, url + "/?tenant=a#top", user_name="svc").error is None
    (discovery, first, _), (path, query, _) = server.requests
    assert (discovery, first, path) == ("/openapi/v3", {"tenant": ["a"]}, "/slurmdb/v0.0.38/jobs")
    assert query["tenant"] == ["a"] and set(query) == {"tenant", "start_time", "end_time"}


def test_a_prometheus_url_with_a_path_prefix_keeps_its_query_after_the_api_path(monkeypatch):
    from connectors import prometheus_api
    asked = []
    monkeypatch.setattr(prometheus_api, "get_json", lambda url, **_: asked.append(url) or {
        "status": "success", "data": {"resultType": "matrix", "result": []}})
    prometheus_api.query_range("http://prom:9090/tenant/a/?org=7#x", "up", NOW - timedelta(hours=1), NOW, 60,
                               timeout=1, attempts=1, hint="", access=(None, ""))
    assert asked == ["http://prom:9090/tenant/a/api/v1/query_range?org=7"]
