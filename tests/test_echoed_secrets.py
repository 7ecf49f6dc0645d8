"""A server that echoes the secret it was sent (slurmrestd or a proxy in front of it writing the
refused token into its error, a warning quoting it) never gets it shown: not in the error, the
lake's state, `/api/v1/status` (which read that state) or the log (RELIABILITY 20)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from test_slurm_jobs_http import ANSWER, CLAIMS, TOKEN, slurmrestd  # noqa: F401 (a fixture)

from connectors import http_json
from service.cli.main import cli
from service.core import logs
from service.core.errors import SourceError

ECHOED = f"Authentication failure for token {TOKEN} (user svc-spend)"


def lake_texts(lake) -> str:
    return "".join(p.read_text(errors="replace") for p in lake.rglob("*") if p.is_file() and p.suffix != ".parquet")


@pytest.mark.parametrize("status, body, exit_code", [
    pytest.param(401, json.dumps({"errors": [{"description": ECHOED, "error_number": 1007}]}), 3, id="401-errors"),
    pytest.param(200, json.dumps({"errors": [{"error": ECHOED, "error_number": 1007}], "jobs": []}), 3, id="200-errors"),
    pytest.param(502, f"<html>proxy: upstream refused X-SLURM-USER-TOKEN: {TOKEN}</html>", 3, id="502-proxy-page"),
    pytest.param(200, json.dumps(json.loads(ANSWER) | {"warnings": [{"description": ECHOED}]}), 0, id="200-warning"),
])
def test_a_token_slurmrestd_echoes_back_is_shown_nowhere(tmp_path, slurmrestd, monkeypatch, status, body, exit_code):  # noqa: F811
    url, server = slurmrestd
    monkeypatch.setenv("SLURM_JWT", TOKEN)
    server.plan += [(status, body.encode())] * 5
    (tmp_path / "spendlake.yaml").write_text(json.dumps({"lake": str(tmp_path / "lake"), "inventory": [
        {"name": "slurm", "kind": "slurm-jobs", "url": url, "token_env": "SLURM_JWT", "api_version": "v0.0.38",
         "max_attempts": 1}]}))
    result = CliRunner().invoke(cli, ["--config", str(tmp_path / "spendlake.yaml"), "-vv", "inventory"])
    assert result.exit_code == exit_code, result.output
    assert "Authentication failure for token <redacted>" in result.output or "X-SLURM-USER-TOKEN: <redacted>" in result.output
    shown = result.output + lake_texts(tmp_path / "lake")
    assert TOKEN not in shown and CLAIMS not in shown


def test_a_urls_password_a_server_echoes_back_is_not_in_the_error(slurmrestd):  # noqa: F811
    url, server = slurmrestd
    server.plan.append((401, json.dumps({"error": "bad password p%4ss-w0rd for svc"}).encode()))
    with pytest.raises(SourceError) as raised:
        http_json.get_json(url.replace("http://", "http://svc:p%254ss-w0rd@") + "/slurmdb/v0.0.38/jobs", attempts=1)
    assert "answered HTTP 401: bad password <redacted> for svc" in str(raised.value), raised.value


def test_a_six_character_password_a_server_echoes_back_is_not_in_the_error(slurmrestd):  # noqa: F811
    url, server = slurmrestd
    server.plan.append((401, json.dumps({"error": "bad password hunt3r for svc"}).encode()))
    with pytest.raises(SourceError) as raised:
        http_json.get_json(url.replace("http://", "http://svc:hunt3r@") + "/slurmdb/v0.0.38/jobs", attempts=1)
    assert "answered HTTP 401: bad password <redacted> for svc" in str(raised.value), raised.value


def test_a_six_character_token_slurmrestd_echoes_back_is_shown_nowhere(tmp_path, slurmrestd, monkeypatch):  # noqa: F811
    url, server = slurmrestd
    monkeypatch.setenv("SLURM_JWT", "s3cr3t")
    server.plan += [(401, json.dumps({"errors": [{"description": "token s3cr3t refused"}]}).encode())] * 5
    (tmp_path / "spendlake.yaml").write_text(json.dumps({"lake": str(tmp_path / "lake"), "inventory": [
        {"name": "slurm", "kind": "slurm-jobs", "url": url, "token_env": "SLURM_JWT", "user_name": "svc",
         "api_version": "v0.0.38", "max_attempts": 1}]}))
    result = CliRunner().invoke(cli, ["--config", str(tmp_path / "spendlake.yaml"), "-vv", "inventory"])
    assert result.exit_code == 3 and "token <redacted> refused" in result.output, result.output
    assert "s3cr3t" not in result.output + lake_texts(tmp_path / "lake")


def test_a_short_secret_is_redacted_as_a_word_and_leaves_the_words_it_is_part_of():
    logs.hide("cat7")
    assert logs.redact("cat7 refused; concat7 and cat7s kept, (cat7) not") == \
        "<redacted> refused; concat7 and cat7s kept, (<redacted>) not"
    logs.hide("")  # an empty variable hides nothing
    assert logs.redact("a line") == "a line"


def test_the_secrets_a_test_hid_are_forgotten_by_the_next():
    assert "cat7" not in logs.SECRETS  # the previous test's (tests/conftest.py clears them)
