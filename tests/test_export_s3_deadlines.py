"""`spendlake export --out s3://...` put its files with a bare boto3 client: botocore's 60 s connect and
60 s read for each of five attempts, for each file, and nothing over all of them. Now each attempt ends by
--timeout-seconds and all of the uploads by --deadline-seconds. Counted, not timed: a loaded host only
slows each call."""

from __future__ import annotations

import boto3
import yaml
from click.testing import CliRunner
from moto.s3.responses import S3Response
from servicekit import commit

from service.cli.main import cli
from service.core.lake import Lake
from test_report_s3_deadlines import silent_endpoint
from tests.test_aws_deadlines import aws, slowed  # noqa: F401 (a fixture)

BUCKET = "finance"
# two billing periods: the dataset's two metadata files, then each period's data and metadata.json
ROWS = [("2026-10-20 00:00:00", "2026-10-20 01:00:00", "USD", "3.5", {"team": "nlp"}),
        ("2026-11-02 00:00:00", "2026-11-02 01:00:00", "USD", "1.25", {"team": "vision"})]


def exported(tmp_path, *args: str):
    lake = Lake(tmp_path / "lake")
    commit(lake, "cur", ROWS)
    config = tmp_path / "spendlake.yaml"
    config.write_text(yaml.safe_dump({"lake": str(lake.root), "sources": [
        {"name": "cur", "kind": "focus", "location": str(tmp_path / "export")}]}))
    return CliRunner().invoke(cli, ["--config", str(config), "export", "--format", "focus",
                                    "--out", f"s3://{BUCKET}/focus", *args])


def test_an_exports_uploads_end_by_deadline_seconds(tmp_path, monkeypatch, aws):
    """Each PUT answered in 1 s: six files would take six seconds; with --deadline-seconds 2.5 no PUT is
    sent past it, no period's metadata.json (written after its data) among them, exit 3 naming the flag."""
    boto3.client("s3", region_name="us-east-1").create_bucket(Bucket=BUCKET)
    sent = slowed(monkeypatch, S3Response, "put_object")
    done = exported(tmp_path, "--timeout-seconds", "1", "--deadline-seconds", "2.5")
    assert done.exit_code == 3, done.output
    assert done.stderr == (f"error: s3://{BUCKET}/focus: the export's S3 calls were not all answered within 2.5 s "
                           "(--deadline-seconds), retries included — raise --deadline-seconds, or check that the S3 "
                           "endpoint answers\n")
    assert 0 < len(sent) <= 3, sent  # each takes 1 s or more: at most three begin before 2.5 s
    listed = boto3.client("s3", region_name="us-east-1").list_objects_v2(Bucket=BUCKET).get("Contents", [])
    assert not [item["Key"] for item in listed if item["Key"].endswith("/metadata.json")]


def test_an_export_to_an_endpoint_not_answering_fails_after_five_attempts_of_timeout_seconds(tmp_path, monkeypatch):
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(name, "testing")
    with silent_endpoint() as (url, taken):
        monkeypatch.setenv("AWS_ENDPOINT_URL", url)  # the SDK's own setting, as README's Export says
        done = exported(tmp_path, "--timeout-seconds", "0.3")
        attempts = len(taken)
    assert done.exit_code == 3 and "Read timeout on endpoint URL" in done.stderr, done.output
    assert done.stderr.rstrip().endswith("— check that the S3 endpoint answers, or raise --timeout-seconds")
    assert attempts == 5  # the first file's five attempts (the standard retry mode's), then the export failed


def test_a_deadline_shorter_than_the_timeout_is_a_usage_error(tmp_path):
    done = exported(tmp_path, "--timeout-seconds", "60", "--deadline-seconds", "10")
    assert done.exit_code == 2
    assert done.stderr.startswith("error: --deadline-seconds: 10 s is less than --timeout-seconds (60 s)")


def test_an_export_with_an_unknown_aws_profile_says_to_set_aws_profile_not_a_config_key(tmp_path, monkeypatch):
    """Was '— set export.profile (or AWS_PROFILE) to one that ...': the config has no export section; the
    export takes the SDK's settings from the environment (README: Export)."""
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "aws-config"))  # no profile of this name anywhere
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "aws-credentials"))
    monkeypatch.setenv("AWS_PROFILE", "no-such-profile")
    done = exported(tmp_path)
    assert done.exit_code == 3, done.output
    assert done.stderr.startswith("error: no AWS profile named 'no-such-profile' in the AWS config or "
                                  "credentials files — set AWS_PROFILE to one that `aws configure list-profiles` "
                                  "shows"), done.stderr
    assert "export.profile" not in done.stderr
