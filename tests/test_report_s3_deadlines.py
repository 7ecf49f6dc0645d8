"""Reports on S3 (`report.out: s3://...`) were written and read with a bare boto3 client: botocore's
60 s connect and 60 s read for each of five attempts, for each file, so serve's daily report (and a
/reports page) could hang on an endpoint that stopped answering. Now each attempt's connect and reads
end by report.timeout_seconds, and all of a report's uploads, or the calls of one page or file served,
by report.deadline_seconds (aws_client, as a billing source's on S3). Counted, not timed: a loaded
host only slows each call."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import date

import boto3
import pytest
from moto.s3.responses import S3Response
from prometheus_client import CollectorRegistry

from report_fixtures import sample_report
from service.core.config import parse_config
from service.core.deadline import DeadlinePassed
from service.core.errors import SourceError, SpendlakeError
from service.report.render import render_files
from service.report.write import upload_report
from service.serve.app import Api
from test_serve_reports import request
from tests.test_aws_deadlines import aws, slowed  # noqa: F401 (a fixture)

FILES = render_files(sample_report())
BUCKET = "finance-reports"
DAY = date(2026, 11, 29)


@contextmanager
def silent_endpoint() -> Iterator[tuple[str, list[socket.socket]]]:
    """An HTTP endpoint that takes each connection and never answers; (its URL, the connections taken)."""
    taken: list[socket.socket] = []
    with socket.create_server(("127.0.0.1", 0)) as server:
        def take() -> None:
            while True:
                try:
                    taken.append(server.accept()[0])
                except OSError:  # closed at the end
                    return

        threading.Thread(target=take, daemon=True).start()
        try:
            yield f"http://127.0.0.1:{server.getsockname()[1]}", taken
        finally:
            server.shutdown(socket.SHUT_RDWR)
            for connection in taken:
                connection.close()


def report_settings(**settings):
    return parse_config({"report": settings}).report


def test_a_reports_uploads_end_by_report_deadline_seconds(monkeypatch, aws):
    """Each PUT answered in 1 s: the report's files would take a second each; with deadline_seconds 2.5
    no PUT is sent past it, report.html (written last) is not among them, and the error names the key."""
    boto3.client("s3", region_name="us-east-1").create_bucket(Bucket=BUCKET)
    sent = slowed(monkeypatch, S3Response, "put_object")
    with pytest.raises(DeadlinePassed) as raised:
        upload_report(FILES, f"s3://{BUCKET}/daily", DAY, report_settings(timeout_seconds=1, deadline_seconds=2.5))
    assert str(raised.value) == (
        f"s3://{BUCKET}/daily/{DAY}/: the report's S3 calls were not all answered within 2.5 s "
        "(report.deadline_seconds), retries included — raise report.deadline_seconds, or check that the S3 "
        "endpoint of the reports answers")
    assert len(FILES) > 3 and 0 < len(sent) <= 3, sent  # each takes 1 s or more: at most three begin before 2.5 s
    listed = boto3.client("s3", region_name="us-east-1").list_objects_v2(Bucket=BUCKET).get("Contents", [])
    assert f"daily/{DAY}/report.html" not in {item["Key"] for item in listed}


def test_an_upload_to_an_endpoint_not_answering_fails_after_max_attempts_of_timeout_seconds(monkeypatch):
    """Each attempt waited botocore's 60 s read; now report.timeout_seconds, max_attempts of them, and the
    hint names both, not the permissions."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(name, "testing")
    with silent_endpoint() as (url, taken):
        with pytest.raises(SpendlakeError) as raised:
            upload_report(FILES, f"s3://{BUCKET}/daily", DAY,
                          report_settings(endpoint_url=url, timeout_seconds=0.5, max_attempts=2))
        attempts = len(taken)
    assert "Read timeout on endpoint URL" in raised.value.message, raised.value
    assert raised.value.hint == ("check that the S3 endpoint answers, or raise report.timeout_seconds / "
                                 "report.max_attempts")
    assert attempts == 2  # the first file's two attempts, then the report failed


def test_a_report_profile_the_aws_files_lack_is_named_under_report():
    with pytest.raises(SourceError) as raised:
        upload_report(FILES, f"s3://{BUCKET}/daily", DAY, report_settings(profile="no-such-profile"))
    assert "no AWS profile named 'no-such-profile'" in raised.value.message
    assert "set report.profile (or AWS_PROFILE)" in raised.value.hint


def test_a_reports_page_on_an_endpoint_not_answering_ends_by_report_deadline_seconds(tmp_path, monkeypatch,
                                                                                      api_server):
    """serve's /api/v1/reports on an endpoint that never answers: each listing's attempts waited 60 s each;
    now the page's calls end by one deadline_seconds (1.2 s: at most three attempts of 0.5 s begin), a 5xx
    naming it, and the next page is given a deadline of its own."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(name, "testing")
    with silent_endpoint() as (url, taken):
        config = parse_config({"lake": str(tmp_path / "lake"), "report": {
            "out": f"s3://{BUCKET}/daily", "endpoint_url": url, "timeout_seconds": 0.5, "deadline_seconds": 1.2}})
        port = api_server(Api(config, CollectorRegistry()))
        pages = [request(port, "/api/v1/reports") for _ in range(2)]
        attempts = len(taken)
    for status, _, body in pages:
        error = json.loads(body)["error"]
        assert status >= 500 and error["message"] == (
            "the report's S3 calls were not all answered within 1.2 s (report.deadline_seconds), retries included")
        assert error["where"] == f"s3://{BUCKET}/daily/"
    assert 2 <= attempts <= 6, attempts  # one to three for each page; five each of 60 s without
