"""A URL configured with its credentials (`http://user:password@prometheus:9090`, an S3
endpoint `http://key:secret@minio:9000`) never shows them: not in errors, status, the lake's
state or the logs, `-vv` and botocore's tracebacks included (RELIABILITY 20)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from prometheus_support import answering_prometheus
from service.cli.main import cli
from service.core.errors import SourceError

PASSWORD = "tiger-s3cret-42"


def lake_texts(lake) -> str:
    return "".join(p.read_text(errors="replace") for p in lake.rglob("*") if p.is_file() and p.suffix != ".parquet")


def test_20_a_prometheus_url_with_a_password_is_never_shown(tmp_path):
    empty = {"status": "success", "data": {"resultType": "matrix", "result": []}}
    with answering_prometheus(empty, []) as url:
        url = url.replace("http://", f"http://scott:{PASSWORD}@")
        (tmp_path / "spendlake.yaml").write_text(json.dumps({"lake": str(tmp_path / "lake"), "inventory": [
            {"name": "k8s", "kind": "k8s-pods", "prometheus_url": url, "max_attempts": 1, "timeout_seconds": 5}]}))
        failed = CliRunner().invoke(cli, ["--config", str(tmp_path / "spendlake.yaml"), "-vv", "inventory"])
    status = CliRunner().invoke(cli, ["--config", str(tmp_path / "spendlake.yaml"), "status", "--format", "json"])
    assert failed.exit_code == 3, failed.output
    assert "http://<redacted>@127.0.0.1:" in failed.output and "no kube-state-metrics series" in failed.output
    for text in (failed.output, status.output, lake_texts(tmp_path / "lake")):
        assert PASSWORD not in text and "scott" not in text


def test_20_an_s3_endpoint_with_credentials_is_never_shown_even_in_debug_tracebacks(tmp_path, monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    (tmp_path / "spendlake.yaml").write_text(json.dumps({"lake": str(tmp_path / "lake"), "sources": [
        {"name": "cur", "kind": "aws-cur2", "location": "s3://bucket/exports", "max_attempts": 1,
         "endpoint_url": f"http://minio:{PASSWORD}@127.0.0.1:1"}]}))  # nothing listens on port 1
    failed = CliRunner().invoke(cli, ["--config", str(tmp_path / "spendlake.yaml"), "-vv", "ingest"])
    status = CliRunner().invoke(cli, ["--config", str(tmp_path / "spendlake.yaml"), "status", "--format", "json"])
    assert failed.exit_code == 3
    assert "Traceback" in failed.output and "botocore" in failed.output  # botocore's DEBUG lines did run
    assert 'Could not connect to the endpoint URL: "http://<redacted>@127.0.0.1:1/bucket' in failed.output
    for text in (failed.output, status.output, lake_texts(tmp_path / "lake")):
        assert PASSWORD not in text


def test_20_an_error_hides_the_password_of_any_url_it_names_and_keeps_the_rest():
    error = SourceError('cannot reach "https://u:p%40ss@prom.example:9090/api?q=1"', where="http://tok@h/x",
                        hint="check s3://bucket/a@b and http://host/x@y")
    assert str(error) == ('http://<redacted>@h/x: cannot reach "https://<redacted>@prom.example:9090/api?q=1" — '
                          "check s3://bucket/a@b and http://host/x@y")


# what a proxy's password may hold: a written `%40`, a `:`, a bare `@` (urlsplit and the HTTP
# client read the userinfo to the authority's last `@`), a `'` and non-ASCII; each piece is grepped for
TRICKY = "p%40ss:w@r'd-ü"
PIECES = (TRICKY, "p@ss", "%40", "w@r", "r'd", "d-ü", "scott")


@pytest.mark.parametrize("kind, key, failure", [
    ("k8s-pods", "prometheus_url", "no kube-state-metrics series"),
    ("slurm-jobs", "url", 'no "jobs" list'),
])
def test_20_a_password_with_an_at_sign_colon_quote_and_non_ascii_is_never_shown(tmp_path, kind, key, failure):
    empty = {"status": "success", "data": {"resultType": "matrix", "result": []}}
    config = tmp_path / "spendlake.yaml"
    with answering_prometheus(empty, []) as url:
        source = {"name": "x", "kind": kind, key: url.replace("http://", f"http://scott:{TRICKY}@"), "max_attempts": 1}
        if kind == "slurm-jobs":
            source["api_version"] = "v0.0.38"
        config.write_text(json.dumps({"lake": str(tmp_path / "lake"), "inventory": [source]}))
        failed = CliRunner().invoke(cli, ["--config", str(config), "-vv", "inventory"])
    assert failed.exit_code == 3 and failure in failed.output, failed.output
    assert "http://<redacted>@127.0.0.1:" in failed.output
    status = CliRunner().invoke(cli, ["--config", str(config), "status", "--format", "json"])
    config.write_text(json.dumps({"lake": str(tmp_path / "lake"), "inventory": [
        {**source, key: f"ftp://scott:{TRICKY}@prometheus:9090"}]}))
    refused = CliRunner().invoke(cli, ["--config", str(config), "config", "validate"])
    assert refused.exit_code == 2 and "ftp://<redacted>@prometheus:9090" in refused.output, refused.output
    for text in (failed.output, status.output, refused.output, lake_texts(tmp_path / "lake")):
        assert not [piece for piece in PIECES if piece in text], text


def test_20_a_gpu_metrics_url_with_a_space_is_refused_as_the_other_urls_are(tmp_path):
    """`http://scott:pa ss@host` went through config validate; redaction ends a URL at a space,
    so an error naming it (series without the instance label) showed the password."""
    config = tmp_path / "spendlake.yaml"
    config.write_text(json.dumps({"lake": str(tmp_path / "lake"), "inventory": [
        {"name": "gpu", "kind": "gpu-metrics", "prometheus_url": "http://scott:pa ss@prometheus:9090"}]}))
    refused = CliRunner().invoke(cli, ["--config", str(config), "config", "validate"])
    assert refused.exit_code == 2 and "inventory[0].prometheus_url: must be a URL starting with http:// or https://, " \
                                      "without spaces" in refused.output, refused.output
    assert "pa ss" not in refused.output and "scott" not in refused.output


def test_20_a_refused_url_value_is_shown_without_its_password_however_long(tmp_path):
    """An error shows a refused value cut to 60 characters: the cut fell inside a long password,
    before the `@` that marks it, and the rest of the password was shown."""
    config = tmp_path / "spendlake.yaml"
    url = "ftp://scott:correct-horse-battery-staple-0123456789@prometheus.example.org:9090"
    config.write_text(json.dumps({"lake": str(tmp_path / "lake"), "inventory": [
        {"name": "k8s", "kind": "k8s-pods", "prometheus_url": url}]}))
    refused = CliRunner().invoke(cli, ["--config", str(config), "config", "validate"])
    assert refused.exit_code == 2 and "not 'ftp://<redacted>@prometheus.example.org:9090'" in refused.output, \
        refused.output
    assert "horse" not in refused.output and "scott" not in refused.output


@pytest.mark.parametrize("password", ["tig/er42", "tig?er42", "tig#er42", 'tig"er42', "tig<er42", "tig>er42",
                                      "tig er/42"])
@pytest.mark.parametrize("kind, key", [("k8s-pods", "prometheus_url"), ("slurm-jobs", "url"),
                                       ("gpu-metrics", "prometheus_url")])
def test_20_a_password_with_a_character_that_ends_the_authority_is_refused_unshown(tmp_path, password, kind, key):
    """`https://u:pa/ss@prom:9090` passed config validate: the HTTP client read `u:pa` as the
    host and its error showed `scott:pa`; a `?` or `#` ended the URL there too. A `"`, `<` or
    `>` ends what the errors' redaction takes for a URL."""
    config = tmp_path / "spendlake.yaml"
    config.write_text(json.dumps({"lake": str(tmp_path / "lake"), "inventory": [
        {"name": "x", "kind": kind, key: f"https://scott:{password}@prometheus:9090"}]}))
    refused = CliRunner().invoke(cli, ["--config", str(config), "config", "validate"])
    assert refused.exit_code == 2 and f"inventory[0].{key}:" in refused.output, refused.output
    assert "percent-encode" in refused.output or "without spaces" in refused.output, refused.output
    shown = refused.output.replace(str(tmp_path), "<tmp>")  # pytest's numbered folders hold digits too
    assert not [piece for piece in ("scott", "tig", "er42", "42") if piece in shown], shown


@pytest.mark.parametrize("section, where", [
    ({"sources": [{"name": "cur", "kind": "aws-cur2", "location": "s3://bucket/exports", "endpoint_url": "URL"}]},
     "sources[0].endpoint_url"),
    ({"inventory": [{"name": "s3", "kind": "s3-objects", "endpoint_url": "URL"}]}, "inventory[0].endpoint_url"),
    ({"engine": {"kind": "spark", "endpoint_url": "URL"}}, "engine.endpoint_url"),
])
def test_20_an_s3_endpoint_password_with_a_slash_is_refused_with_how_to_write_it(tmp_path, section, where):
    config = tmp_path / "spendlake.yaml"
    text = json.dumps({"lake": str(tmp_path / "lake"), **section}).replace("URL", "http://scott:s3/cr3t@minio:9000")
    config.write_text(text)
    refused = CliRunner().invoke(cli, ["--config", str(config), "config", "validate"])
    assert refused.exit_code == 2 and f"{where}: " in refused.output and "/ as %2F" in refused.output, refused.output
    shown = refused.output.replace(str(tmp_path), "<tmp>")
    assert not [piece for piece in ("scott", "s3/", "cr3t") if piece in shown], shown
