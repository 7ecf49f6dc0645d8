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


def test_20_a_token_in_the_query_string_is_not_in_the_access_log(tmp_path, api_server):
    config = load_config(one_line_config_file(tmp_path))
    registry = CollectorRegistry()
    registry.register(LakeCollector(config))
    port = api_server(Api(config, registry, token=SECRET))
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(RedactingFilter())
    logger = logging.getLogger("service.serve.http")
    logger.addHandler(handler)
    level, logger.level = logger.level, logging.DEBUG
    try:
        for query in (f"token={SECRET}", f"since=7d&access_token={SECRET}", f"password={SECRET}&by=team",
                      f"client_secret={SECRET}"):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/status?{query}", timeout=10).close()
            except urllib.error.HTTPError as error:
                assert error.code == 401
    finally:
        logger.removeHandler(handler)
        logger.level = level
    log = stream.getvalue()
    assert log.count("/api/v1/status?") == 4 and "since=7d" in log and "by=team" in log, log
    assert SECRET not in log, log
