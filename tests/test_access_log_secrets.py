"""The service's DEBUG access log never shows a secret a client sent (RELIABILITY 20): a
token, password or secret in the query string (a dashboard that passes the API token as
`?token=`, a mistyped URL) is redacted; the path and the other parameters stay readable."""

from __future__ import annotations

import io
import logging
import urllib.error
import urllib.request

from prometheus_client import CollectorRegistry

from service.core.config import load_config
from service.core.logs import RedactingFilter
from service.serve.app import Api
from service.serve.metrics import LakeCollector
from tests.attribution_helpers import one_line_config_file

SECRET = "SuperSecretToken0123456789"


def access_log(port: int, paths: list[str], refused: tuple[int, ...]) -> str:
    """What the service's DEBUG access log says of a GET of each path (each answered `refused`)."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(RedactingFilter())
    logger = logging.getLogger("service.serve.http")
    logger.addHandler(handler)
    level = logger.level
    logger.setLevel(logging.DEBUG)  # setLevel clears the loggers' cached levels; assigning .level does not
    try:
        for path in paths:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10).close()
            except urllib.error.HTTPError as error:
                assert error.code in refused
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    return stream.getvalue()


def test_20_a_token_in_the_query_string_is_not_in_the_access_log(tmp_path, api_server):
    config = load_config(one_line_config_file(tmp_path))
    registry = CollectorRegistry()
    registry.register(LakeCollector(config))
    port = api_server(Api(config, registry, token=SECRET))
    log = access_log(port, [f"/api/v1/status?{query}" for query in (
        f"token={SECRET}", f"since=7d&access_token={SECRET}", f"password={SECRET}&by=team", f"client_secret={SECRET}")],
        (401,))
    assert log.count("/api/v1/status?") == 4 and "since=7d" in log and "by=team" in log, log
    assert SECRET not in log, log


def test_the_api_token_a_client_puts_in_a_path_or_an_unknown_parameter_is_not_in_the_access_log(tmp_path,
                                                                                               api_server, monkeypatch):
    """The token from $SPENDLAKE_API_TOKEN (or service.api_token) is hidden when the service starts,
    as a slurmrestd JWT is: a client that sends it as a path segment or under another parameter's name
    (a dashboard's variable in the wrong place) does not get it logged (break53 item 8)."""
    from service.serve.scheduler import Tasks
    from service.serve.service import Service

    monkeypatch.setenv("SPENDLAKE_API_TOKEN", SECRET)
    config = load_config(one_line_config_file(tmp_path))
    service = Service(config, tasks=Tasks(ingest=lambda: None, rules=None, daily=lambda _day: None))
    port = api_server(Api(config, CollectorRegistry(), token=service.token))
    log = access_log(port, [f"/api/v1/attribute?since=7d&by={SECRET}", f"/nope/{SECRET}"], (401, 404))
    assert "by=<redacted>" in log and "/nope/<redacted>" in log and SECRET not in log, log
