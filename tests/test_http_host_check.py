"""DNS rebinding (break53 item 12): with no token set, the default on loopback, a web page whose
name its owner resolves to 127.0.0.1 was same-origin with the service and read every team's
spend. Without a token a request naming a host the service does not go by is a 421."""

from __future__ import annotations

import pytest
import yaml
from click.testing import CliRunner
from prometheus_client import CollectorRegistry

from service.cli.main import cli
from service.core.config import load_config
from service.serve.app import Api
from tests.conftest import REPO
from tests.servicekit import make_config, write_config
from tests.test_http_hardening import raw

TOKEN = "s3cret-token-0123456789"
TARGETS = ["/api/v1/attribute?since=7d", "/api/v1/status", "/metrics", "/reports/", "/readyz"]


def asked(port: int, target: str, host: str, token: str | None = None) -> tuple[int, dict]:
    auth = f"Authorization: Bearer {token}\r\n" if token else ""
    status, _, body = raw(port, f"GET {target} HTTP/1.1\r\nHost: {host}\r\n{auth}\r\n".encode())
    return status, body


@pytest.mark.parametrize("target", TARGETS)
def test_a_host_the_service_does_not_go_by_is_421_naming_the_setting(tmp_path, api_server, target):
    port = api_server(Api(make_config(tmp_path), CollectorRegistry()))
    status, body = asked(port, target, f"attacker.example:{port}")
    assert status == 421, body
    assert body["error"]["where"] == "service.allowed_hosts" and "'attacker.example'" in body["error"]["message"]
    assert "service.api_token" in body["error"]["hint"]


@pytest.mark.parametrize("host", ["localhost:{port}", "LOCALHOST.:{port}", "127.0.0.1:{port}", "[::1]:{port}",
                                  "10.1.2.3:9464", "spendlake:9464", "spendlake.monitoring.example", "spend_lake:9464",
                                  "", None])
def test_localhost_an_address_an_allowed_name_or_no_host_is_answered(tmp_path, api_server, host):
    """A Kubernetes probe or scrape names the pod's IP, a Compose scrape the service's name (allowed
    here, as deploy/spendlake.yaml does; Compose allows `_` in one: review54 item 10); a client without Host
    is no browser."""
    config = make_config(tmp_path, allowed_hosts=["spendlake", "spendlake.monitoring.example", "spend_lake"])
    port = api_server(Api(config, CollectorRegistry()))
    head = "" if host is None else f"Host: {host.format(port=port)}\r\n"
    status, _, body = raw(port, f"GET /api/v1/status HTTP/1.1\r\n{head}\r\n".encode())
    assert status == 200, body


def test_the_name_the_service_listens_on_is_allowed(tmp_path):
    api = Api(make_config(tmp_path), CollectorRegistry(), listen="spendlake.internal:9464")
    assert api.handle("/healthz", {}, None, "spendlake.internal:9464").status == 200
    assert api.handle("/healthz", {}, None, "other.internal:9464").status == 421


def test_with_a_token_any_host_gets_the_token_check(tmp_path, api_server):
    """A rebinding page has no token: with one set, the Host is not what guards the data."""
    port = api_server(Api(make_config(tmp_path), CollectorRegistry(), token=TOKEN))
    assert asked(port, "/api/v1/status", "attacker.example")[0] == 401
    assert asked(port, "/api/v1/status", "spendlake.example", TOKEN)[0] == 200


def test_with_a_token_the_routes_it_does_not_guard_still_check_the_host(tmp_path, api_server):
    """/metrics open beside a token (metrics_auth: open, the default) serves spend by team and
    project: a rebinding page must not read it because a token guards /api (review54 item 1)."""
    port = api_server(Api(make_config(tmp_path), CollectorRegistry(), token=TOKEN))
    assert asked(port, "/metrics", "attacker.example")[0] == 421
    assert asked(port, "/healthz", "attacker.example")[0] == 421
    assert asked(port, "/healthz", "127.0.0.1")[0] == 200


@pytest.mark.parametrize("name", ["spendlake:9464", "http://spendlake", "spend lake", "spendlake/"])
def test_an_allowed_host_that_is_no_host_name_is_exit_2_naming_it(tmp_path, name):
    path = write_config(tmp_path, {"lake": str(tmp_path / "lake"), "service": {"allowed_hosts": ["ok", name]}})
    done = CliRunner().invoke(cli, ["--config", str(path), "config", "validate"])
    assert done.exit_code == 2 and "service.allowed_hosts" in done.output and repr(name) in done.output, done.output


def test_the_compose_prometheus_scrape_names_a_host_the_compose_config_allows():
    """deploy/prometheus.yml scrapes `spendlake:9464`, a name: the Compose config must allow it,
    or every scrape of a service without a token is a 421 (SpendlakeDown)."""
    config = load_config(REPO / "deploy" / "spendlake.yaml")
    api = Api(config, CollectorRegistry())
    scrape = yaml.safe_load((REPO / "deploy" / "prometheus" / "prometheus.yml").read_text())
    targets = [t for job in scrape["scrape_configs"] for c in job["static_configs"] for t in c["targets"]]
    assert targets and all(api.hosts.allows(target) for target in targets), targets
