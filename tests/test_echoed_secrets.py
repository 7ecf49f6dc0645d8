"""A server that echoes the secret it was sent (slurmrestd or a proxy in front of it writing the
refused token into its error, a warning quoting it) never gets it shown: not in the error, the
lake's state, `/api/v1/status` (which read that state) or the log (RELIABILITY 20)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from test_slurm_jobs_http import ANSWER, CLAIMS, TOKEN, slurmrestd  # noqa: F401 (a fixture)

from connectors import http_json
from service.cli.main import cli
from service.core import logs
from service.core.errors import SourceError

pytest_plugins = ["pytester"]

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


@pytest.mark.parametrize(("echoed", "in_url"), [("p%4ss-w0rd", "p%254ss-w0rd"), ("hunt3r", "hunt3r")],
                         ids=["percent-encoded", "six-characters"])
def test_a_urls_password_a_server_echoes_back_is_not_in_the_error(slurmrestd, echoed, in_url):  # noqa: F811
    url, server = slurmrestd
    server.plan.append((401, json.dumps({"error": f"bad password {echoed} for svc"}).encode()))
    with pytest.raises(SourceError) as raised:
        http_json.get_json(url.replace("http://", f"http://svc:{in_url}@") + "/slurmdb/v0.0.38/jobs", attempts=1)
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


def test_a_short_secret_leaves_the_amounts_counts_and_teams_that_hold_it_as_a_word():
    for secret in ("1234", "admin", "a"):  # a Prometheus or Slurm password under 8 characters
        logs.hide(secret)
    line = "committed 1234 rows USD 1234.50; team admin; a file"
    assert logs.redact(line) == line


@pytest.mark.parametrize("secret", ["a", "ab"])
def test_a_one_or_two_character_secret_leaves_a_word_after_a_colon_and_is_redacted_as_the_value(secret):
    """`source: a` is a log line's word; `password: a`, `api_key: a`, `svc:a@host`, `pass=a`, `'a'` are the secret."""
    logs.hide(secret)
    line = f"source: {secret} file; job {secret}: failed; ratio 1:{secret}"
    assert logs.redact(line) == line
    echoed = f"password: {secret}; //svc:{secret}@prom; pass={secret}; pass: {secret}; refused '{secret}'"
    assert logs.redact(echoed) == ("password: <redacted>; //svc:<redacted>@prom; pass=<redacted>; pass: <redacted>;"
                                   " refused '<redacted>'")
    keys = ("api_key", "access_token", "client_secret", "slurm_jwt", "pwd", "auth", "X-SLURM-USER-TOKEN")
    compound = "; ".join(f"{key}: {secret}" for key in keys)  # a keyword ending a compound name
    assert logs.redact(compound) == "; ".join(f"{key}: <redacted>" for key in keys)


@pytest.mark.parametrize("echoed, shown", [
    pytest.param("GET //svc:cat7@prom:9090 refused", "GET //svc:<redacted>@prom:9090 refused", id="url-userinfo"),
    pytest.param("sent pass=cat7&x=1", "sent pass=<redacted>&x=1", id="after-equals"),
    pytest.param("user: svc, pass : 'cat7'", "user: svc, pass : '<redacted>'", id="after-colon-quoted"),
    pytest.param('{"pw": "cat7"}', '{"pw": "<redacted>"}', id="json-value"),
    pytest.param("refused 'cat7' for svc", "refused '<redacted>' for svc", id="inside-quotes"),
    pytest.param("Authorization Bearer cat7 refused", "Authorization Bearer <redacted> refused", id="bearer"),
    pytest.param("basic cat7 refused", "basic <redacted> refused", id="basic"),
    pytest.param("Token cat7 expired", "Token <redacted> expired", id="token"),
    pytest.param("bad password cat7 for svc", "bad password <redacted> for svc", id="password"),
    pytest.param("secret 'cat7' rejected", "secret '<redacted>' rejected", id="secret"),
    pytest.param("api key cat7 unknown", "api key <redacted> unknown", id="key"),
])
def test_a_short_secret_is_redacted_where_it_stands_as_a_value(echoed, shown):
    logs.hide("cat7")
    assert logs.redact(echoed) == shown


def test_a_short_secret_as_a_value_leaves_the_longer_values_it_begins_or_ends():
    logs.hide("cat7")
    line = "token=concat7 password cat7s key: cat7_x; cat7 refused, (cat7) not"
    assert logs.redact(line) == line


def test_a_short_secret_ending_in_a_sign_is_redacted_where_a_letter_follows_it():
    logs.hide("pass!")
    assert logs.redact("password=pass!x, token 'pass!'") == "password=<redacted>x, token '<redacted>'"


def test_a_long_secret_is_redacted_wherever_it_stands_and_an_empty_one_hides_nothing():
    logs.hide("s3cr3t-tok3n")
    logs.hide("")
    assert logs.redact("xs3cr3t-tok3nx and a line") == "x<redacted>x and a line"


def test_the_secrets_a_test_hid_are_forgotten_by_the_next(pytester):
    """tests/conftest.py clears them: of two tests run in order, the second sees none of the first's."""
    pytester.makeconftest((Path(__file__).parent / "conftest.py").read_text())
    pytester.makepyfile(test_two="""
        from service.core import logs

        def test_hides():
            logs.hide("cat7")
            assert "cat7" in logs.SECRETS

        def test_sees_none():
            assert "cat7" not in logs.SECRETS and logs.redact("token cat7") == "token cat7"
    """)
    pytester.runpytest_subprocess("-p", "no:cacheprovider").assert_outcomes(passed=2)


@pytest.mark.parametrize("secret", ["a", "ab"])
@pytest.mark.parametrize("key", ["api_key", "apikey", "ApiKey", "oauth", "OAuth", "x-api-key", "access_token", "token",
                                 "token expired", "Token invalid", "password", "client_secret", "jwt", "auth", "pwd"])
def test_a_short_secret_is_redacted_after_every_spelling_of_its_key(secret, key):
    """`oauth: ab`, `apikey: ab` and `token expired ab` were shown while `api_key: ab` was redacted:
    the keys are one list (logs.SECRET_KEYS), for the value positions and the URL parameters alike."""
    logs.hide(secret)
    assert logs.redact(f"refused {key}: {secret} for svc") == f"refused {key}: <redacted> for svc"
    assert logs.redact(f"refused {key} {secret}") == f"refused {key} <redacted>"
    assert logs.redact(f"sent ?{key.split()[0]}={secret}x&n=1") == f"sent ?{key.split()[0]}=<redacted>&n=1"


@pytest.mark.parametrize("secret", ["a", "ab"])
def test_a_short_secret_after_an_ordinary_word_stays(secret):
    logs.hide(secret)
    line = f"source: {secret} file; monkey {secret}; expired {secret}; keys: {secret}; tokens {secret}"
    assert logs.redact(line) == line


@pytest.mark.parametrize("echoed", ["A Basic YWxpY2U6SHVudGVyMlNlY3JldFBX B", "sent YWxpY2U6SHVudGVyMlNlY3JldFBX"],
                         ids=["after-basic", "alone"])
def test_a_urls_credentials_a_server_echoes_back_in_base64_are_shown_nowhere(tmp_path, slurmrestd, echoed):  # noqa: F811
    """A server echoing the Authorization header it was sent showed the URL's user:password in
    base64 (the plain password alone was hidden) in the error, the lake's state and the log."""
    url, server = slurmrestd
    server.plan += [(500, echoed.encode())] * 5
    (tmp_path / "spendlake.yaml").write_text(json.dumps({"lake": str(tmp_path / "lake"), "inventory": [
        {"name": "slurm", "kind": "slurm-jobs", "url": url.replace("http://", "http://alice:Hunter2SecretPW@"),
         "api_version": "v0.0.38", "max_attempts": 1}]}))
    result = CliRunner().invoke(cli, ["--config", str(tmp_path / "spendlake.yaml"), "-vv", "inventory"])
    assert result.exit_code == 3 and "answered HTTP 500: " in result.output, result.output
    shown = result.output + lake_texts(tmp_path / "lake")
    assert "YWxpY2U6SHVudGVyMlNlY3JldFBX" not in shown and "Hunter2SecretPW" not in shown
    status = CliRunner().invoke(cli, ["--config", str(tmp_path / "spendlake.yaml"), "status", "--sources"])
    assert "YWxpY2U6" not in status.output and "<redacted>" in status.output, status.output


@pytest.mark.parametrize(("line", "shown"), [
    ("proxy saw Authorization header Basic c3ZjOmhvdW5kLWRvZzk=, refused", "Basic <redacted>, refused"),
    ("upstream refused Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdW4iOiJ4In0.sig", "refused Bearer <redacted>"),
    ("Bearer authentication and Basic authentication are refused", None),
    ("Basic YWJjZGVmZ2g is not a pair", None),
])
def test_a_basic_or_bearer_credential_is_redacted_without_its_header_name(line, shown):
    """`Basic <base64 of a user:password pair>` and `Bearer <token>` as a server echoes them
    (without `Authorization:` before them) are redacted in log lines and errors alike; the words
    that follow the schemes in a sentence are not."""
    assert logs.redact(line) == (line if shown is None else line[:line.index(shown.split()[0])] + shown)
    assert str(SourceError(line)) == logs.redact(line)


def test_an_error_redacts_what_a_log_line_does():
    """Errors hid a URL's password and the hidden secrets only: a query's api_key, redacted in the
    log, was shown on stderr, in status and the API. One function redacts both."""
    error = SourceError("cannot read http://h:9/jobs?api_key=QueryKeySecret123&n=1", where="slurm",
                        hint="check Authorization: Basic c3ZjOmhvdW5kLWRvZzk=")
    assert str(error) == "slurm: cannot read http://h:9/jobs?api_key=<redacted>&n=1 — check Authorization: <redacted>"


def test_a_last_error_an_older_version_stored_unredacted_is_shown_redacted():
    """status, /api/v1/status and /readyz read a source's last error from the lake's state,
    where an older version stored an echoed `Basic` credential and a query's api_key as they came."""
    from service.ingest.freshness import current_error

    stored = "answered HTTP 500: A Basic YWxpY2U6SHVudGVyMlNlY3JldFBX B; GET /jobs?api_key=QueryKeySecret123"
    assert current_error({"last_run_failed": True, "last_error": stored}) == \
        "answered HTTP 500: A Basic <redacted> B; GET /jobs?api_key=<redacted>"
    assert current_error({"last_failure": "2026-12-01T00:00:00Z", "last_error": stored}).endswith("api_key=<redacted>")
    assert current_error({"last_run_failed": False, "last_error": stored}) is None


@pytest.mark.parametrize(("line", "shown"), [
    ("slurmrestd said: Authorization: token rejected; check url", None),
    ("Authorization: token-based login refused", None),
    ("the proxy wants a Bearer token.", None),
    ("a token 3 days old was refused", None),
    ("sent Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdW4iOiJ4In0.sig, refused",
     "sent Authorization: <redacted>, refused"),
    ("sent Authorization: Token 3f9a2b77c1d0 twice", "sent Authorization: <redacted> twice"),
    ("sent Authorization: 3f9a2b77c1d0 twice", "sent Authorization: <redacted> twice"),
    ("refused Token 3f9a2b77c1d0 (expired)", "refused Token <redacted> (expired)"),
    ("Authorization: Bearer qWeRtYuIoPaSdFgHjKlZxCvBnM expired", "Authorization: <redacted> expired"),
    ("refused Bearer qWeRtYuIoPaSdFgHjKlZxCvBnM", "refused Bearer <redacted>"),
    ("headers={'Authorization': b'AWS4-HMAC-SHA256 Credential=x/20261202, Signature=ab'}",
     "headers={'Authorization': b'<redacted>'}"),
])
def test_after_authorization_only_a_credential_is_redacted_not_the_words_that_follow(line, shown):
    """The Authorization pattern took all that followed `authorization:` up to a quote: a server's
    `Authorization: token rejected; check url` lost its words in the error, status and log, and
    `a Bearer token.` read `Bearer <redacted>`. A credential (a token holding a digit or a sign, with
    or without its scheme) or a quoted value is redacted; words are not."""
    assert logs.redact(line) == (shown or line)
    assert str(SourceError(line)) == logs.redact(line)


def test_serves_metrics_warning_keeps_its_advice_through_the_redaction():
    """serve's warning read `(Prometheus sends it with authorization: <redacted>` in its log."""
    from service.serve.exposure import exposure_warning

    warning = exposure_warning("0.0.0.0", "a-token")
    assert warning and logs.redact(warning) == warning and "authorization.credentials_file" in warning
