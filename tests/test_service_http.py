"""The HTTP server: probes, JSON errors, unknown parameters, the bearer token, the bind address."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from datetime import timedelta

import pytest
from prometheus_client import CollectorRegistry
from servicekit import MemoryConnector, make_config

from connectors.base import CONNECTORS
from service.app import Api, make_server, parse_listen
from service.core.config import ServiceConfig
from service.core.timewindow import utc_now
from service.ingest import ingest
from service.metrics import LakeCollector

TOKEN = "s3cret-token-0123456789"


@pytest.fixture
def serve_api():
    """Start a real server for an Api on 127.0.0.1, port chosen by the OS."""
    servers = []

    def start(api: Api) -> str:
        server = make_server(api, "127.0.0.1:0")
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return "http://127.0.0.1:%d" % server.server_address[1]

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def get(url: str, token: str | None = None, method: str = "GET") -> tuple[int, dict, bytes]:
    request = urllib.request.Request(url, method=method)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


def api_for(config, **kwargs) -> Api:
    registry = CollectorRegistry()
    registry.register(LakeCollector(config))
    return Api(config, registry, **kwargs)


def test_probes_metrics_and_status(tmp_path, serve_api, monkeypatch):
    monkeypatch.setitem(CONNECTORS, "focus", MemoryConnector)
    monkeypatch.setattr(MemoryConnector, "ROWS", [("2026-11-20 00:00:00", "2026-11-20 01:00:00", "USD", "2", {})])
    config = make_config(tmp_path)
    base = serve_api(api_for(config))

    assert get(base + "/healthz")[0] == 200
    status, _, body = get(base + "/readyz")
    assert status == 503 and json.loads(body)["reasons"] == ["source cur has not been ingested yet"]

    ingest(config)
    assert get(base + "/readyz")[0] == 200
    status, headers, body = get(base + "/metrics")
    assert status == 200 and headers["Content-Type"].startswith("text/plain; version=")
    assert b'spendlake_source_last_success_timestamp_seconds{source="cur"}' in body
    status, _, body = get(base + "/api/v1/status")
    data = json.loads(body)
    assert status == 200 and data["sources"][0]["source"] == "cur" and data["sources"][0]["fresh"]
    assert [(p["billing_period"], p["billed_cost"]) for p in data["periods"]] == [("2026-11", "2.000000000000")]


def test_readyz_names_a_stale_source(tmp_path, monkeypatch):
    monkeypatch.setitem(CONNECTORS, "focus", MemoryConnector)
    config = make_config(tmp_path)
    ingest(config)
    later = utc_now() + timedelta(hours=config.sources[0].freshness_hours + 1)
    response = api_for(config, clock=lambda: later).handle("/readyz", {}, None)
    assert response.status == 503
    [reason] = json.loads(response.body)["reasons"]
    assert reason.startswith("source cur last ingested at") and "freshness limit of 36h" in reason


def test_errors_are_json_and_unknown_parameters_are_rejected(tmp_path, serve_api):
    base = serve_api(api_for(make_config(tmp_path)))
    status, headers, body = get(base + "/api/v1/status?verbose=1&since=7d")
    assert status == 400 and headers["Content-Type"].startswith("application/json")
    assert json.loads(body)["error"]["message"] == "unknown parameter(s): since, verbose"
    status, _, body = get(base + "/nope")
    assert status == 404 and "/metrics" in json.loads(body)["error"]["hint"]
    status, _, body = get(base + "/api/v1/status", method="POST")
    assert status == 405 and json.loads(body)["error"]["message"].startswith("the API is read-only")


def test_bearer_token_protects_the_api_but_not_probes_or_metrics(tmp_path, serve_api):
    config = make_config(tmp_path, api_token=TOKEN)
    base = serve_api(api_for(config, token=TOKEN))
    status, headers, body = get(base + "/api/v1/status")
    assert status == 401 and headers["WWW-Authenticate"].startswith("Bearer")
    assert json.loads(body)["error"]["message"] == "missing or wrong bearer token"
    assert get(base + "/api/v1/status", token="wrong-token-0123456789")[0] == 401
    assert get(base + "/api/v1/status", token=TOKEN)[0] == 200
    assert get(base + "/metrics")[0] == 200 and get(base + "/healthz")[0] == 200


def test_token_from_the_environment_wins(tmp_path, monkeypatch):
    from service.app import api_token

    config = make_config(tmp_path, api_token=TOKEN)
    assert api_token(config) == TOKEN
    monkeypatch.setenv("SPENDLAKE_API_TOKEN", "from-env-0123456789")
    assert api_token(config) == "from-env-0123456789"


def test_binds_loopback_by_default(tmp_path):
    host, port = parse_listen(ServiceConfig().listen)
    assert (host, port) == ("127.0.0.1", 9464)
    server = make_server(api_for(make_config(tmp_path)), f"{host}:0")  # port 0: never clash with a real one
    try:
        assert server.server_address[0] == "127.0.0.1"
    finally:
        server.server_close()
