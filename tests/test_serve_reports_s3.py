"""With report.out an s3:// prefix, `spendlake serve` serves the reports from the bucket (moto),
reading only: ListObjectsV2 and GetObject on keys under that prefix, nothing else."""

from __future__ import annotations

import json
from datetime import date, timedelta

import boto3
import pytest
from moto import mock_aws
from prometheus_client import CollectorRegistry

from report_fixtures import sample_report
from service.core.config import parse_config
from service.core.publish import upload_s3
from service.report.render import render_files
from service.serve.app import Api
from service.serve.reports import PAGE_DAYS
from test_serve_reports import DAY, LISTED, request

FILES = render_files(sample_report())
BUCKET = "finance-reports"


@pytest.fixture
def bucket_server(tmp_path, api_server):
    """moto's S3 with the bucket, and a server whose report.out is s3://BUCKET/daily; (port, api, s3)."""
    with mock_aws():
        s3 = boto3.client("s3")
        s3.create_bucket(Bucket=BUCKET)
        config = parse_config({"lake": str(tmp_path / "lake"), "report": {"out": f"s3://{BUCKET}/daily"}})
        api = Api(config, CollectorRegistry())
        yield api_server(api), api, s3


def recorded_calls(api: Api) -> list[tuple[str, dict]]:
    """Every S3 operation the service makes from now on, with its parameters."""
    calls = []
    api.reports.store.client.meta.events.register(
        "provide-client-params.s3.*", lambda params, model, **_: calls.append((model.name, dict(params))))
    return calls


def test_reports_on_s3_are_listed_and_served_reading_only_under_the_prefix(bucket_server):
    port, api, s3 = bucket_server
    upload_s3(FILES, s3, BUCKET, f"daily/{DAY}", last="report.html")  # as `spendlake report --out s3://...` does
    upload_s3({"report.html": b"SECRET"}, s3, BUCKET, "other/2026-11-30")  # beside the prefix, not under it
    upload_s3({"report.html": b"SECRET"}, s3, BUCKET, "daily-old/2026-11-30")
    calls = recorded_calls(api)

    listed = json.loads(request(port, "/api/v1/reports")[2])
    assert listed["location"] == f"s3://{BUCKET}/daily/" and listed["latest"] == DAY
    assert [(d["day"], [f["name"] for f in d["files"]]) for d in listed["days"]] == [(DAY, LISTED)]
    assert request(port, "/reports/latest/")[1]["Location"] == f"../{DAY}/report.html"
    for name, data in FILES.items():
        status, headers, body = request(port, f"/reports/{DAY}/{name}")
        assert (status, body, headers["Content-Length"]) == (200, data, str(len(data))), name
    headers = request(port, f"/reports/{DAY}/report.html")[1]
    assert "script-src 'sha256-" in headers["Content-Security-Policy"]
    assert request(port, f"/reports/{DAY}/report.html", If_None_Match=headers["ETag"])[0] == 304
    assert request(port, "/reports/2026-11-30/report.html")[0] == 404

    assert {operation for operation, _ in calls} == {"ListObjectsV2", "GetObject"}
    assert all(p["Bucket"] == BUCKET and p.get("Key", p.get("Prefix")).startswith("daily/") for _, p in calls)


def test_a_day_being_uploaded_on_s3_is_a_404_saying_so(bucket_server):
    port, _, s3 = bucket_server
    upload_s3({k: v for k, v in FILES.items() if k != "report.html"}, s3, BUCKET, f"daily/{DAY}")
    status, _, body = request(port, f"/reports/{DAY}/report.json")
    assert status == 404 and json.loads(body)["error"]["message"] == (
        f"the report of {DAY} is not complete: report.html is written last (being written now, or its run failed)")
    assert request(port, "/reports/latest/")[0] == 404
    assert "being written" in request(port, "/reports/")[2].decode()


def test_an_unreadable_bucket_is_a_503_naming_the_prefix_and_the_permissions_and_logged(bucket_server, caplog):
    port, _, s3 = bucket_server
    s3.delete_bucket(Bucket=BUCKET)
    status, _, body = request(port, "/reports/")
    error = json.loads(body)["error"]
    assert status == 503 and "NoSuchBucket" in error["message"] and error["where"] == f"s3://{BUCKET}/daily/"
    assert error["hint"] == "the service needs s3:ListBucket and s3:GetObject on the report.out prefix"
    assert any("NoSuchBucket" in r.getMessage() for r in caplog.records if r.levelname == "ERROR")


def listed_keys(api: Api) -> list[int]:
    """How many objects each ListObjectsV2 the service makes from now on returns."""
    counts = []
    api.reports.store.client.meta.events.register(
        "after-call.s3.ListObjectsV2", lambda parsed, **_: counts.append(len(parsed.get("Contents", []))))
    return counts


@pytest.mark.slow
def test_a_thousand_days_on_s3_list_their_folders_and_only_the_shown_days_files(bucket_server):
    port, api, s3 = bucket_server
    days = [(date(2024, 1, 1) + timedelta(n)).isoformat() for n in range(1000)]
    for day in days[:-1]:
        for name in ("report.html", "summary.md"):
            s3.put_object(Bucket=BUCKET, Key=f"daily/{day}/{name}", Body=b"x")
    s3.put_object(Bucket=BUCKET, Key=f"daily/{days[-1]}/summary.md", Body=b"x")  # being written
    s3.put_object(Bucket=BUCKET, Key=f"daily/{days[-1]}-old/report.html", Body=b"x")  # sorts before days[-1]/
    calls, counts = recorded_calls(api), listed_keys(api)

    listed = json.loads(request(port, "/api/v1/reports")[2])
    assert listed["latest"] == days[-2] and listed["older"] == f"/api/v1/reports?before={days[-PAGE_DAYS]}"
    assert [d["day"] for d in listed["days"]] == days[::-1][:PAGE_DAYS]
    assert [[f["name"] for f in d["files"]] for d in listed["days"][:2]] == [["summary.md"], ["report.html", "summary.md"]]
    # the folders (1,001 common prefixes: two requests), then one listing of the page's days
    assert [p.get("Delimiter") for _, p in calls] == ["/", "/", None] and counts[2] <= 2 * PAGE_DAYS + 1
    del calls[:]
    assert request(port, "/reports/latest/")[1]["Location"] == f"../{days[-2]}/report.html"
    # the folders, then the newest day's files: not complete, so the day before's
    assert [p["Prefix"] for _, p in calls] == ["daily/", "daily/", f"daily/{days[-1]}/", f"daily/{days[-2]}/"]

    del calls[:]
    older = json.loads(request(port, listed["older"])[2])
    assert [d["day"] for d in older["days"]] == days[::-1][PAGE_DAYS:2 * PAGE_DAYS] and older["latest"] == days[-2]
    assert len(calls) == 5  # the folders, the page's files, the newest day's and the day before's
    oldest = json.loads(request(port, f"/api/v1/reports?before={days[PAGE_DAYS]}")[2])
    assert [d["day"] for d in oldest["days"]] == days[PAGE_DAYS - 1::-1] and oldest["older"] is None
    assert f'<a href="?before={days[-PAGE_DAYS]}">older days</a>' in request(port, "/reports/")[2].decode()
    assert {operation for operation, _ in calls} == {"ListObjectsV2"}
    assert all(p["Bucket"] == BUCKET and p["Prefix"].startswith("daily/") for _, p in calls)
