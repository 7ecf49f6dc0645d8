"""Missing credentials (RELIABILITY 19) as an AWS profile the config files do not have: one
sentence naming it and how to fix it, exit 3, for every AWS source, never botocore's traceback."""

from __future__ import annotations

import pytest
import yaml
from click.testing import CliRunner

from service.cli.main import cli

SOURCES = {
    "aws-cur2": ("ingest", "sources", {"location": "s3://bills/ex"}),
    "aws-tags": ("inventory", "inventory", {"regions": ["us-east-1"]}),
    "cloudwatch-logs": ("inventory", "inventory", {"regions": ["us-east-1"]}),
    "s3-objects": ("inventory", "inventory", {"buckets": [{"bucket": "ckpt"}]}),
    "gpu-metrics": ("inventory", "inventory", {"cloudwatch": True, "regions": ["us-east-1"]}),
}


@pytest.mark.parametrize("kind", sorted(SOURCES))
@pytest.mark.parametrize("from_env", [False, True])
def test_19_an_aws_profile_that_does_not_exist_is_one_sentence_naming_it(tmp_path, monkeypatch, kind, from_env):
    (tmp_path / "aws-config").write_text("[profile other]\nregion = us-east-1\n")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "aws-credentials"))
    command, section, settings = SOURCES[kind]
    if from_env:
        monkeypatch.setenv("AWS_PROFILE", "nosuch")
    else:
        settings = {**settings, "profile": "nosuch"}
    path = tmp_path / "spendlake.yaml"
    path.write_text(yaml.safe_dump({"lake": str(tmp_path / "lake"),
                                    section: [{"name": "aws", "kind": kind, **settings}]}))
    result = CliRunner().invoke(cli, ["--config", str(path), command], catch_exceptions=False)
    assert result.exit_code == 3, result.output
    [failed] = [line for line in result.output.splitlines() if "FAILED" in line]
    assert "no AWS profile named 'nosuch'" in failed and "aws configure list-profiles" in failed, failed
    assert f"set {section}[0].profile (or AWS_PROFILE)" in failed, failed
