"""The HTTP server: probes, JSON errors, unknown parameters, the bearer token, the bind address."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from datetime import timedelta
from decimal import Decimal
from urllib.parse import parse_qs

import pytest
from prometheus_client import CollectorRegistry
from click.testing import CliRunner
from servicekit import MemoryConnector, commit, make_config, write_config

from rules.base import Finding
from service.serve.app import Api
from service.serve.listener import make_server, parse_listen
from service.cli.main import cli as cli_group
from service.core.config import ServiceConfig
from service.core.lake import Lake
from service.core.registry import CONNECTORS
from service.core.timewindow import utc_now
from service.findings.store import store_findings
from service.ingest.billing import ingest
from service.serve.metrics import LakeCollector

TOKEN = "s3cret-token-0123456789"


@pytest.fixture
def serve_api(api_server):
    """Start a real server for an Api on 127.0.0.1, port chosen by the OS; its base URL."""
    return lambda api: "http://127.0.0.1:%d" % api_server(api)


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


def hours_ago(hours: float) -> str:
    return f"{utc_now().replace(tzinfo=None) - timedelta(hours=hours):%Y-%m-%d %H:%M:%S}"


def test_probes_metrics_and_status(tmp_path, serve_api, monkeypatch):
    monkeypatch.setitem(CONNECTORS.added, "focus", MemoryConnector)
    monkeypatch.setattr(MemoryConnector, "ROWS", [(hours_ago(3), hours_ago(2), "USD", "2", {})])
    config = make_config(tmp_path)
    base = serve_api(api_for(config))

    assert get(base + "/healthz")[0] == 200
    status, _, body = get(base + "/readyz")  # no token set: the reasons too, open as /api/v1/status is
    assert status == 503 and json.loads(body) == {"status": "not ready", "not_ready": ["cur"],
                                                  "reasons": ["source cur has not been ingested yet"]}

    ingest(config)
    assert get(base + "/readyz")[0] == 200
    status, headers, body = get(base + "/metrics")
    assert status == 200 and headers["Content-Type"].startswith("text/plain; version=")
    assert b'spendlake_source_last_success_timestamp_seconds{source="cur"}' in body
    status, _, body = get(base + "/api/v1/status")
    data = json.loads(body)
    assert status == 200 and data["sources"][0]["source"] == "cur" and data["sources"][0]["fresh"]
    assert [p["billed_cost"] for p in data["periods"]] == ["2.000000000000"]


def test_readyz_names_a_stale_source(tmp_path, monkeypatch):
    monkeypatch.setitem(CONNECTORS.added, "focus", MemoryConnector)
    hours = 36  # the default freshness_hours
    # data running a day into the future, so only the last success grows old
    monkeypatch.setattr(MemoryConnector, "ROWS", [(hours_ago(1), hours_ago(-hours - 2), "USD", "2", {})])
    config = make_config(tmp_path)
    ingest(config)
    later = utc_now() + timedelta(hours=hours + 1)
    api = api_for(config, clock=lambda: later, token=TOKEN)
    response = api.handle("/readyz", {}, None)
    assert response.status == 503 and json.loads(response.body) == {"status": "not ready", "not_ready": ["cur"]}
    response = api.handle("/readyz", {}, f"Bearer {TOKEN}")  # the reasons only to a token holder
    [reason] = json.loads(response.body)["reasons"]
    assert reason.startswith("source cur last ingested at") and "freshness limit of 36h" in reason


def test_a_lake_moved_away_while_serving_is_not_read_as_a_new_empty_one(tmp_path, monkeypatch):
    """A lake moved or deleted under `spendlake serve`: the service's next state write made a new
    empty folder at its path, and the metrics read it as readable with no spend, the API as a
    lake without periods. The service pins the folder it started on, once it runs (review54 item 4:
    a run that did not pin it passed every test): gone or replaced, every read and write fails
    naming it, and nothing is made there."""
    import threading

    from stackkit import wait_until

    from service.core.errors import DataError
    from service.serve.scheduler import Tasks
    from service.serve.service import Requests, Service

    monkeypatch.setitem(CONNECTORS.added, "focus", MemoryConnector)
    monkeypatch.setattr(MemoryConnector, "ROWS", [(hours_ago(3), hours_ago(2), "USD", "2", {})])
    config = make_config(tmp_path)
    ingest(config)
    lake = Lake.of(config)
    requests, said = Requests(), []
    running = threading.Thread(target=Service(config, tasks=Tasks(ingest=lambda: None, rules=None,
                                                                  daily=lambda day: None), requests=requests).run,
                               args=(said.append,))
    running.start()
    try:
        wait_until(lambda: any(line.startswith("spendlake serving") for line in said), 10, "the service serving")
        [url] = [line.split()[2] for line in said if line.startswith("spendlake serving")]
        assert get(f"{url}/readyz")[0] == 200
        config.lake.rename(tmp_path / "moved")
        status, _, body = get(f"{url}/readyz")
        assert status == 503 and "the lake folder is gone" in json.loads(body)["reasons"][0]
        with pytest.raises(DataError, match="the lake folder is gone") as gone:
            lake.write_state("jobs", {})  # what the scheduler writes after each job
    finally:
        requests.stop = True
        running.join(30)
    assert str(config.lake) in str(gone.value)
    assert not config.lake.exists()
    api = api_for(config, token=TOKEN)
    response = api.handle("/readyz", {}, f"Bearer {TOKEN}")
    assert response.status == 503 and "is gone" in json.loads(response.body)["reasons"][0]
    assert b"spendlake_lake_readable 0.0" in api.handle("/metrics", {}, None).body
    assert api.handle("/api/v1/status", {}, f"Bearer {TOKEN}").status >= 500
    assert api.handle("/api/v1/findings", {}, f"Bearer {TOKEN}").status == 503  # not a lake without findings

    config.lake.mkdir()  # an empty folder put in its place is not the lake either
    assert b"spendlake_lake_readable 0.0" in api.handle("/metrics", {}, None).body
    with pytest.raises(DataError, match="another folder than the one it started on"):
        lake.lock().__enter__()


def test_readyz_and_status_flag_data_that_stopped_advancing_though_ingest_succeeds(tmp_path, monkeypatch):
    """Freshness means data (issue 15.5): an export whose newest usage ends 40 h ago is
    stale even though every ingest succeeds and finds it unchanged."""
    monkeypatch.setitem(CONNECTORS.added, "focus", MemoryConnector)
    monkeypatch.setattr(MemoryConnector, "ROWS", [(hours_ago(41), hours_ago(40), "USD", "2", {})])
    config = make_config(tmp_path)
    assert not ingest(config).failed
    [outcome] = ingest(config).outcomes
    assert outcome.status == "unchanged"
    api = api_for(config, token=TOKEN)
    response = api.handle("/readyz", {}, f"Bearer {TOKEN}")
    [reason] = json.loads(response.body)["reasons"]
    assert response.status == 503 and reason.startswith("source cur has data through ")
    assert "40h behind, older than its freshness limit of 36h" in reason
    [source] = json.loads(api.handle("/api/v1/status", {}, f"Bearer {TOKEN}").body)["sources"]
    assert (source["state"], source["fresh"], source["hours_behind"]) == ("stale", False, 40)
    path = write_config(tmp_path, {"lake": str(config.lake),
                                   "sources": [{"name": "cur", "kind": "focus", "location": str(tmp_path / "export")}]})
    shown = CliRunner().invoke(cli_group, ["--config", str(path), "status", "--sources", "--format", "json"])
    assert shown.exit_code == 0 and json.loads(shown.output)[0]["state"] == "stale"
    # with a limit of two days the same data is fresh
    relaxed = config.model_copy(update={"sources": (config.sources[0].model_copy(update={"freshness_hours": 48}),)})
    assert api_for(relaxed).handle("/readyz", {}, None).status == 200


def test_a_control_character_in_a_tag_is_an_escape_in_the_metrics_labels(tmp_path, serve_api):
    """A team tag holding NUL went raw into /metrics' labels (prometheus_client escapes \\, " and
    a line feed only)."""
    config = make_config(tmp_path)
    commit(Lake(config.lake), "cur", [(hours_ago(3), hours_ago(2), "USD", "2", {"team": "nul\x00team\x1b"})])
    status, _, body = get(serve_api(api_for(config)) + "/metrics")
    assert status == 200 and b"\x00" not in body and b"\x1b" not in body
    assert b'team="nul\\\\x00team\\\\x1b"' in body


def test_errors_are_json_and_unknown_parameters_are_rejected(tmp_path, serve_api):
    base = serve_api(api_for(make_config(tmp_path)))
    status, headers, body = get(base + "/api/v1/status?verbose=1&since=7d")
    assert status == 400 and headers["Content-Type"].startswith("application/json")
    assert json.loads(body)["error"]["message"] == "unknown parameter(s): since, verbose"
    status, _, body = get(base + "/nope")
    assert status == 404 and "/metrics" in json.loads(body)["error"]["hint"]
    status, _, body = get(base + "/api/v1/status", method="POST")
    assert status == 405 and json.loads(body)["error"]["message"].startswith("the API is read-only")


def test_head_answers_like_get_without_the_body(tmp_path, serve_api):
    """`curl -I` and uptime checkers ask with HEAD; http.server answered 501 to it."""
    base = serve_api(api_for(make_config(tmp_path)))
    for path in ("/healthz", "/metrics", "/nope"):
        got, head = get(base + path), get(base + path, method="HEAD")
        assert head[0] == got[0] and head[2] == b"", path
        assert head[1]["Content-Length"] == str(len(got[2])) and head[1]["Content-Type"] == got[1]["Content-Type"]
    status, headers, _ = get(base + "/healthz", method="DELETE")
    assert status == 405 and headers["Allow"] == "GET, HEAD"


def test_bearer_token_protects_the_api_but_not_probes_or_metrics(tmp_path, serve_api):
    config = make_config(tmp_path, api_token=TOKEN)
    base = serve_api(api_for(config, token=TOKEN))
    status, headers, body = get(base + "/api/v1/status")
    assert status == 401 and headers["WWW-Authenticate"].startswith("Bearer")
    assert json.loads(body)["error"]["message"] == "missing or wrong token"
    assert get(base + "/api/v1/status", token="wrong-token-0123456789")[0] == 401
    assert get(base + "/api/v1/status", token=TOKEN)[0] == 200
    assert get(base + "/metrics")[0] == 200 and get(base + "/healthz")[0] == 200


def test_token_from_the_environment_wins(tmp_path, monkeypatch):
    from service.serve.app import api_token

    config = make_config(tmp_path, api_token=TOKEN)
    assert api_token(config) == TOKEN
    monkeypatch.setenv("SPENDLAKE_API_TOKEN", "from-env-0123456789")
    assert api_token(config) == "from-env-0123456789"


def test_a_token_ending_in_a_newline_is_the_token_without_it(tmp_path, monkeypatch):
    """A Secret made from a file (`kubectl create secret --from-file`, `echo > token`) ends in a
    newline no client sends: every request, a browser's login included, was a 401."""
    from service.core.errors import ConfigError
    from service.serve.app import api_token

    monkeypatch.setenv("SPENDLAKE_API_TOKEN", TOKEN + "\n")
    assert api_token(make_config(tmp_path)) == TOKEN
    monkeypatch.setenv("SPENDLAKE_API_TOKEN", " short-token \n")
    with pytest.raises(ConfigError, match=r"\$SPENDLAKE_API_TOKEN is 11 characters"):
        api_token(make_config(tmp_path))


def test_binds_loopback_by_default(tmp_path):
    host, port = parse_listen(ServiceConfig().listen)
    assert (host, port) == ("127.0.0.1", 9464)
    server = make_server(api_for(make_config(tmp_path)), f"{host}:0")  # port 0: never clash with a real one
    try:
        assert server.server_address[0] == "127.0.0.1"
    finally:
        server.server_close()


def test_listening_beyond_loopback_without_a_token_warns_that_api_and_reports_are_open():
    from service.serve.exposure import exposure_warning

    for host in ("0.0.0.0", "::", "10.0.3.7", "fe80::1%eth0", "::ffff:10.0.3.7"):
        warning = exposure_warning(host, None)
        assert warning and f"listening on {host} with no API token" in warning and "service.api_token" in warning
        assert "/metrics" in warning
    for host, token in (("127.0.0.1", None), ("::1", None), ("::ffff:127.0.0.1", None), ("127.0.0.5", None),
                        ("127.0.0.1", TOKEN)):
        assert exposure_warning(host, token) is None
    assert exposure_warning("0.0.0.0", TOKEN, "token") is None


def test_listening_beyond_loopback_with_a_token_warns_that_metrics_stay_open():
    """With api_token set, /api and /reports need it but /metrics (spend by team, project and
    experiment) answered anyone, and serve said nothing of it."""
    from service.serve.exposure import exposure_warning

    warning = exposure_warning("0.0.0.0", TOKEN)
    assert warning and "/metrics (spend by team, project and experiment) is open" in warning
    assert "service.metrics_auth: token" in warning


def test_metrics_auth_token_makes_metrics_need_the_token(tmp_path, serve_api):
    config = make_config(tmp_path, api_token=TOKEN, metrics_auth="token")
    base = serve_api(api_for(config, token=TOKEN))
    status, headers, _ = get(base + "/metrics")
    assert status == 401 and headers["WWW-Authenticate"].startswith("Bearer")
    assert get(base + "/metrics", token="wrong-token-0123456789")[0] == 401
    status, _, body = get(base + "/metrics", token=TOKEN)
    assert status == 200 and b"spendlake_" in body
    assert get(base + "/healthz")[0] == 200 and get(base + "/readyz")[0] in (200, 503)


def test_metrics_auth_token_without_a_token_is_a_config_error(tmp_path, monkeypatch):
    from service.core.errors import ConfigError
    from service.serve.app import api_token

    monkeypatch.delenv("SPENDLAKE_API_TOKEN", raising=False)
    with pytest.raises(ConfigError) as raised:
        api_token(make_config(tmp_path, metrics_auth="token"))
    assert raised.value.where == "service.metrics_auth" and "service.api_token" in raised.value.hint
    monkeypatch.setenv("SPENDLAKE_API_TOKEN", TOKEN)
    assert api_token(make_config(tmp_path, metrics_auth="token")) == TOKEN


def test_attribute_gives_the_cli_json_contract(tmp_path, serve_api):
    config = make_config(tmp_path)
    commit(Lake(config.lake), "cur", [
        ("2026-11-03 05:00:00", "2026-11-03 06:00:00", "USD", "4.25", {"team": "nlp", "project": "llm"}),
        ("2026-11-04 05:00:00", "2026-11-04 06:00:00", "USD", "1", {"team": "vision"}),
    ])
    base = serve_api(api_for(config))
    query = "since=2026-11-01&until=2026-12-01&by=team,project&where=team=nlp&where=team=vision"
    status, _, body = get(base + "/api/v1/attribute?" + query)
    assert status == 200
    cli = CliRunner().invoke(cli_group, ["--config", str(write_config(tmp_path, {
        "lake": str(config.lake), "sources": [{"name": "cur", "kind": "focus", "location": str(tmp_path / "export")}]})),
        "attribute", "--since", "2026-11-01", "--until", "2026-12-01", "--by", "team,project",
        "--where", "team=nlp", "--where", "team=vision", "--format", "json"])
    assert cli.exit_code == 0, cli.output
    assert json.loads(body) == json.loads(cli.output)
    assert json.loads(body)["totals"] == [{"currency": "USD", "cost": "5.250000000000"}]


def test_a_where_value_no_line_carries_is_named_in_the_json_with_the_closest_values(tmp_path, serve_api):
    """`/api/v1/attribute?where=team=nlpp` answered 200 with no rows and nothing saying why, while
    `spendlake attribute` warns on stderr with the closest values; the JSON (of both) now says it in
    `notes`, as the runs' JSON does."""
    config = make_config(tmp_path)
    commit(Lake(config.lake), "cur", [("2026-11-03 05:00:00", "2026-11-03 06:00:00", "USD", "4.25", {"team": "nlp"})])
    base = serve_api(api_for(config))
    status, _, body = get(base + "/api/v1/attribute?since=2026-11-01&until=2026-12-01&where=team=nlpp")
    answer = json.loads(body)
    assert status == 200 and answer["rows"] == []
    assert answer["notes"] == ["team=nlpp matches nothing in the lake; closest team values: nlp"]
    status, _, body = get(base + "/api/v1/attribute?since=2026-11-01&until=2026-12-01&where=team=nlp")
    # nothing to say but the days past the data (the rows' cost is not all in; the answer without rows says none)
    assert json.loads(body)["notes"] == [
        "the window's last 666.0 h have no data yet (the data runs through 2026-11-03T06:00:00Z)"]


def test_a_parameter_left_blank_is_one_not_given(tmp_path, serve_api):
    """A form or a URL template (README's `/api/v1/findings?team=&rule=&status=&category=`) sends
    blanks: `where=` and `top=` answered 400 where a blank `cost=` already meant the default
    (the findings' blanks: tests/test_finding_categories.py)."""
    config = make_config(tmp_path)
    commit(Lake(config.lake), "cur", [
        ("2026-11-03 05:00:00", "2026-11-03 06:00:00", "USD", "4.25", {"team": "nlp"}),
        ("2026-11-04 05:00:00", "2026-11-04 06:00:00", "USD", "1", {"team": "vision"}),
    ])
    base = serve_api(api_for(config))
    window = "since=2026-11-01&until=2026-12-01&by=team"
    status, _, given = get(f"{base}/api/v1/attribute?{window}")
    assert status == 200
    status, _, blank = get(f"{base}/api/v1/attribute?{window}&where=&top=&cost=&granularity=")
    assert status == 200 and json.loads(blank) == json.loads(given)


@pytest.mark.parametrize("path, query", [
    ("/api/v1/attribute", "since=&until=2026-12-01"),
    ("/api/v1/attribute", "since=2026-11-01&until="),
    ("/api/v1/runs", "since=%20&run=r1"),
    ("/api/v1/plans", "as_of="),
])
def test_a_day_or_time_parameter_left_blank_is_a_400_naming_it(tmp_path, path, query):
    """`since=$SINCE` with SINCE unset answered the default window (`as_of=`: the report's day, `since=`
    beside `run=`: the run's span) where the CLI's empty `--since` is exit 2: a blank day or time is a
    400 naming the parameter, as the CLI names the option, a blank `team=` still one not given."""
    name = next(key for key, (value,) in parse_qs(query, keep_blank_values=True).items() if not value.strip())
    response = api_for(make_config(tmp_path)).handle(path, parse_qs(query, keep_blank_values=True), None)
    assert response.status == 400
    error = json.loads(response.body)["error"]
    assert error["where"] == name and error["message"] == f"{name} is empty, naming no day or time"


@pytest.mark.parametrize("query, message", [
    ("by=team", "the window needs a start"),
    ("since=yesterday-ish", "cannot read 'yesterday-ish' as a time"),
    ("since=7d&by=team,nope", "unknown dimension 'nope'"),
    ("since=7d&top=ten", "top must be a whole number of at least 1, not 'ten'"),
    ("since=7d&top=²", "top must be a whole number of at least 1, not '²'"),
    ("since=7d&top=-1", "top must be a whole number of at least 1, not '-1'"),
    ("since=7d&compare=true&granularity=day", "compare needs granularity total"),
    ("since=7d&compare=maybe", "compare must be true or false, not 'maybe'"),
    ("since=7d&cost=list&cost=billed", "parameter(s) given more than once: cost"),
])
def test_attribute_rejects_bad_parameters_with_a_json_400(tmp_path, query, message):
    response = api_for(make_config(tmp_path)).handle("/api/v1/attribute", parse_qs(query), None)
    assert response.status == 400
    error = json.loads(response.body)["error"]
    assert error["message"] == message
    assert not error.get("where", "").startswith("-"), "the API names its parameters, not CLI flags"


def test_findings_lists_what_the_cli_lists(tmp_path, serve_api):
    config = make_config(tmp_path)
    store_findings(Lake(config.lake), [
        Finding(id="a1", rule="idle-gpu", severity="warning", resource_id="i-1", team="nlp",
                category="waste", impact_usd=Decimal("120.50"), monthly_waste_usd=Decimal("120.50"), summary="idle for 6 hours"),
        Finding(id="b2", rule="idle-gpu", severity="critical", resource_id="i-2", team="vision",
                category="waste", impact_usd=Decimal("900"), monthly_waste_usd=Decimal("900"), summary="idle all week", status="resolved"),
    ])
    base = serve_api(api_for(config))
    status, _, body = get(base + "/api/v1/findings?team=nlp")
    [finding] = json.loads(body)
    assert status == 200 and finding["id"] == "a1" and finding["monthly_waste_usd"] == "120.50"
    assert [f["id"] for f in json.loads(get(base + "/api/v1/findings?status=all")[2])] == ["b2", "a1"]
    status, _, body = get(base + "/api/v1/findings?status=gone")
    assert status == 400 and "use one of open, acknowledged, resolved, all" in json.loads(body)["error"]["hint"]


def test_readyz_stays_ready_when_only_the_findings_table_is_damaged(tmp_path, monkeypatch):
    """/readyz probes the bill (`costs`); it opened views over every table, so a truncated findings
    file (which only /api/v1/findings reads, and which fails there naming it) took the whole service
    out of its Kubernetes Service's endpoints (tidy42)."""
    monkeypatch.setitem(CONNECTORS.added, "focus", MemoryConnector)
    monkeypatch.setattr(MemoryConnector, "ROWS", [(hours_ago(3), hours_ago(2), "USD", "2", {})])
    config = make_config(tmp_path)
    ingest(config)
    lake = Lake.of(config)
    store_findings(lake, [Finding(id="a1", rule="idle-gpu", severity="warning", resource_id="i-1", category="waste",
                                  impact_usd=Decimal("1"), monthly_waste_usd=Decimal("1"), summary="idle")])
    api = api_for(config, token=TOKEN)
    assert api.handle("/readyz", {}, None).status == 200
    [findings] = (lake.root / "findings").rglob("*.parquet")
    findings.write_bytes(findings.read_bytes()[:40])
    assert api.handle("/readyz", {}, None).status == 200
    assert api.handle("/api/v1/findings", {}, f"Bearer {TOKEN}").status >= 500
