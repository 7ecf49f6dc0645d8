"""connectors/http_json.py against real local HTTP servers, where a server misbehaves: a
Retry-After of a day, an answer dripped a few bytes a second, a redirect to another host
(the token must stay behind), a redirect under max_attempts: 1."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import urllib3.util.retry
from click.testing import CliRunner

from connectors import http_json
from service.cli.main import cli
from service.core.errors import SourceError

JOBS = json.dumps({"jobs": []}).encode()


class Handler(BaseHTTPRequestHandler):
    """Answers each GET with `route(self)`; keeps each request's path and headers."""

    route: Callable[[BaseHTTPRequestHandler], None]
    seen: list[tuple[str, dict]]

    def do_GET(self):  # noqa: N802 (http.server's name)
        self.seen.append((self.path, dict(self.headers)))
        try:
            self.route(self)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up, as it should

    def answer(self, status: int, body: bytes = JOBS, **headers: str) -> None:
        self.send_response(status)
        for name, value in {"Content-Length": str(len(body)), **headers}.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def serve():
    servers = []

    def start(route) -> tuple[str, list]:
        handler = type("H", (Handler,), {"route": staticmethod(route), "seen": []})
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}", handler.seen

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


@pytest.fixture
def sleeps(monkeypatch):
    """The retry policy's sleeps, recorded (and not slept): a test fails, never hangs a day."""
    slept: list[float] = []
    monkeypatch.setattr(urllib3.util.retry.time, "sleep", slept.append)
    return slept


# every status retried, and a 413 (urllib3 retries it when it says Retry-After): the same rule for each
RETRIED = sorted(http_json.RETRY_STATUSES | {413})


@pytest.mark.parametrize("status", RETRIED)
def test_a_retry_after_longer_than_the_timeout_fails_at_once_naming_the_wait(serve, sleeps, status):
    url, seen = serve(lambda h: h.answer(status, b'{"errors": [{"description": "slow down"}]}',
                                         **{"Retry-After": "86400"}))
    with pytest.raises(SourceError) as raised:
        http_json.get_json(url + "/slurmdb/v0.0.38/jobs?token=s3cret", attempts=5, timeout=10)
    assert str(raised.value).startswith(f"{url}/slurmdb/v0.0.38/jobs: answered HTTP {status} asking to wait 86400 s "
                                        "before trying again (Retry-After), longer than timeout_seconds (10 s)")
    assert sleeps == [] and len(seen) == 1


@pytest.mark.parametrize("status", RETRIED)
def test_a_retry_after_within_the_timeout_is_waited_then_tried_again(serve, sleeps, status):
    answers = [(status, {"Retry-After": "3"}), (200, {})]
    url, seen = serve(lambda h: h.answer(answers[0][0], **answers.pop(0)[1]))
    assert http_json.get_json(url, attempts=2, timeout=10) == {"jobs": []}
    assert sleeps == [3.0] and len(seen) == 2


def test_a_retry_after_date_past_six_hours_is_told_as_the_server_asked(serve, sleeps):
    url, _ = serve(lambda h: h.answer(503, **{"Retry-After": "Fri, 01 Jan 2100 00:00:00 GMT"}))
    with pytest.raises(SourceError) as raised:
        http_json.get_json(url, attempts=3, timeout=10)
    asked = int(str(raised.value).split("asking to wait ")[1].split(" s ")[0])
    assert 2_300_000_000 < asked < 4_102_444_800 - time.time() + 5  # urllib3's 6 h cap said 21600
    assert f"{asked} s (until Fri, 01 Jan 2100 00:00:00 GMT) before trying again" in str(raised.value)
    assert sleeps == []


def test_a_source_asked_to_wait_a_day_exits_3(tmp_path, serve, sleeps):
    url, _ = serve(lambda h: h.answer(429, b"slow down", **{"Retry-After": "86400"}))
    (tmp_path / "spendlake.yaml").write_text(json.dumps({"lake": str(tmp_path / "lake"), "inventory": [
        {"name": "slurm", "kind": "slurm-jobs", "url": url, "api_version": "v0.0.38"}]}))
    result = CliRunner().invoke(cli, ["--config", str(tmp_path / "spendlake.yaml"), "inventory"])
    assert result.exit_code == 3, result.output
    assert f"{url}/slurmdb/v0.0.38/jobs: answered HTTP 429 asking to wait 86400 s" in result.output
    assert "longer than inventory[0].timeout_seconds (30 s)" in result.output  # the source's setting, by its path
    assert sleeps == []


def drip(handler: Handler) -> None:
    """40 KB at about 4 KB a second: every read gets bytes well within the timeout."""
    body = b'{"jobs": [' + b" " * 40_000 + b"]}"
    handler.send_response(200)
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    for start in range(0, len(body), 400):
        handler.wfile.write(body[start:start + 400])
        handler.wfile.flush()
        time.sleep(0.1)


def test_a_slow_answer_is_given_up_after_timeout_seconds_in_all(serve):
    url, seen = serve(drip)
    began = time.monotonic()
    with pytest.raises(SourceError) as raised:
        http_json.get_json(url + "/api/v1/query_range", attempts=3, timeout=1)
    assert time.monotonic() - began < 3  # not the ~10 s the whole answer takes
    assert f"{url}/api/v1/query_range: the server was too slow" in str(raised.value)
    assert "raise timeout_seconds" in str(raised.value) and len(seen) == 1


def stall(handler: Handler) -> None:
    """The headers, a few bytes, then nothing for longer than the timeout."""
    handler.send_response(200)
    handler.send_header("Content-Length", "1000")
    handler.end_headers()
    handler.wfile.write(b'{"jobs": [')
    handler.wfile.flush()
    time.sleep(3)


def test_an_answer_that_stops_coming_is_too_slow_within_the_timeout(serve):
    url, _ = serve(stall)
    began = time.monotonic()
    with pytest.raises(SourceError) as raised:
        http_json.get_json(url, attempts=1, timeout=0.5)
    assert time.monotonic() - began < 2.5
    assert "the server was too slow: 10 bytes of its answer came in 0.5 s (timeout_seconds)" in str(raised.value)


def test_redirect_hops_share_the_attempts_timeout(serve):
    """Each hop answers in 1 s: the second is past the 1.5 s timeout (urllib3 gave each hop its own
    1.5 s, and the three hops took 3 s before the answer's read found the time gone)."""
    def hop(h: Handler) -> None:
        time.sleep(1)
        h.answer(302, b"", Location=f"/{int(h.path[1:]) + 1}") if h.path in ("/1", "/2") else h.answer(200)

    url, seen = serve(hop)
    began = time.monotonic()
    with pytest.raises(SourceError) as raised:
        http_json.get_json(url + "/1", attempts=1, timeout=1.5)
    assert time.monotonic() - began < 2.5
    assert [path for path, _ in seen] == ["/1", "/2"]
    assert f"{url}/1: the server was too slow: it took the connection, but its answer's status line and headers " \
           "had not come in 1.5 s" in str(raised.value)


def test_a_slow_answer_names_the_sources_setting(serve):
    url, _ = serve(stall)
    with pytest.raises(SourceError) as raised:
        http_json.get_json(url, attempts=1, timeout=0.5, config_path="inventory[1]")
    assert "came in 0.5 s (inventory[1].timeout_seconds)" in str(raised.value)
    assert "raise inventory[1].timeout_seconds, or" in str(raised.value)
    url, _ = serve(lambda h: h.answer(502))
    with pytest.raises(SourceError) as raised:
        http_json.get_json(url, attempts=1, timeout=0.5, config_path="inventory[1]")
    assert str(raised.value).startswith(f"{url}: answered HTTP 502: ")
    with pytest.raises(SourceError) as raised:
        http_json.get_json("http://127.0.0.1:9/", attempts=1, timeout=0.5, config_path="inventory[1]")
    assert "raise inventory[1].max_attempts / inventory[1].timeout_seconds" in str(raised.value)


def drip_headers(handler: Handler) -> None:
    """The status line and headers a byte every 0.05 s (about 4 s in all): no read waits long."""
    head = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(JOBS)}\r\n\r\n".encode()
    for byte in head:
        handler.wfile.write(bytes([byte]))
        handler.wfile.flush()
        time.sleep(0.05)
    handler.wfile.write(JOBS)


def test_headers_that_drip_are_given_up_at_the_timeout(serve):
    url, seen = serve(drip_headers)
    began = time.monotonic()
    with pytest.raises(SourceError) as raised:
        http_json.get_json(url, attempts=1, timeout=1)
    assert time.monotonic() - began < 2.5  # urllib3 waited for all of them: ~4 s, and the answer was taken
    assert str(raised.value).startswith(f"{url}: the server was too slow: it took the connection, but its answer's "
                                        "status line and headers had not come in 1 s (timeout_seconds)")
    assert len(seen) == 1
    assert http_json.get_json(url, attempts=1, timeout=8) == {"jobs": []}  # within the timeout: read


def test_a_server_that_takes_the_connection_and_says_nothing_is_too_slow_not_unreachable(serve):
    """A server whose status line and headers do not come within the timeout (a Prometheus busy
    with a long query; a stalled proxy) was said as 'cannot reach it ... Read timed out', as if
    the URL were wrong, where an answer slow after its headers was 'too slow'. Each attempt is
    tried again as before; a refused connection is still one the server cannot be reached on."""
    url, seen = serve(lambda handler: time.sleep(3))
    with pytest.raises(SourceError) as raised:
        http_json.get_json(url + "/api/v1/query_range", attempts=2, timeout=0.5, config_path="inventory[1]")
    assert str(raised.value) == (
        f"{url}/api/v1/query_range: the server was too slow: it took the connection, but its answer's status line "
        "and headers had not come in 0.5 s (inventory[1].timeout_seconds), in each of 2 attempts — raise "
        "inventory[1].timeout_seconds, or read a shorter window (inventory[1].lookback_hours)")
    assert len(seen) == 2
    with pytest.raises(SourceError) as raised:
        http_json.get_json("http://127.0.0.1:9/", attempts=1, timeout=0.5)
    assert "cannot reach it after 1 attempt(s)" in str(raised.value)


def test_the_token_does_not_follow_a_redirect_to_another_host(serve):
    elsewhere, seen_elsewhere = serve(lambda h: h.answer(200))
    url, seen = serve(lambda h: h.answer(302, b"", Location=elsewhere + "/slurmdb/v0.0.38/jobs"))
    secret = {"X-SLURM-USER-TOKEN": "tok3n", "X-SLURM-USER-NAME": "svc", "Accept": "application/json"}
    signed = {"Authorization": "AWS4-HMAC-SHA256 sig", "X-Amz-Security-Token": "sess1on", "X-Amz-Date": "20261202"}
    assert http_json.get_json(url + "/slurmdb/v0.0.38/jobs", headers=secret, sign=lambda _: signed) == {"jobs": []}
    [(_, first)] = seen
    assert first["X-SLURM-USER-TOKEN"] == "tok3n" and first["X-Amz-Security-Token"] == "sess1on"
    [(path, second)] = seen_elsewhere
    assert path == "/slurmdb/v0.0.38/jobs"
    assert "tok3n" not in json.dumps(second) and "sess1on" not in json.dumps(second) and "sig" not in json.dumps(second)


def test_a_redirect_on_the_same_server_keeps_the_token(serve):
    url, seen = serve(lambda h: h.answer(301, b"", Location="/v2") if h.path == "/v1" else h.answer(200))
    assert http_json.get_json(url + "/v1", headers={"X-SLURM-USER-TOKEN": "tok3n"}) == {"jobs": []}
    assert [(path, headers["X-SLURM-USER-TOKEN"]) for path, headers in seen] == [("/v1", "tok3n"), ("/v2", "tok3n")]


def test_one_attempt_still_follows_a_redirect_and_a_loop_is_named(serve):
    url, seen = serve(lambda h: h.answer(302, b"", Location="/jobs") if h.path == "/old" else h.answer(200))
    assert http_json.get_json(url + "/old", attempts=1) == {"jobs": []}
    assert [path for path, _ in seen] == ["/old", "/jobs"]
    loop, _ = serve(lambda h: h.answer(302, b"", Location="/again"))
    with pytest.raises(SourceError) as raised:
        http_json.get_json(loop + "/again", attempts=3, hint="check inventory[0].url")
    assert str(raised.value).startswith(f"{loop}/again: redirected more than {http_json.REDIRECTS} times")
    assert "check inventory[0].url, or give the URL the redirects end at" in str(raised.value)


def test_a_connect_the_deadline_cut_names_the_deadline_not_timeout_seconds():
    """review51 item 5: a server whose listen queue is full (the connect hangs) and a deadline sooner than
    timeout_seconds said 'cannot reach it ... raise max_attempts / timeout_seconds': raising it would not help."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(0)
        port = server.getsockname()[1]
        waiting = [socket.socket() for _ in range(4)]  # fill the queue: the next connect is not answered
        for client in waiting:
            client.setblocking(False)
            client.connect_ex(("127.0.0.1", port))
        time.sleep(0.2)
        try:
            with pytest.raises(SourceError) as raised:
                http_json.get_json(f"http://127.0.0.1:{port}/x", timeout=5, attempts=1, config_path="inventory[0]",
                                   deadline=http_json.Deadline.after(1, "inventory[0].deadline_seconds"))
        finally:
            for client in waiting:
                client.close()
    assert "not all answered within 1 s (inventory[0].deadline_seconds)" in raised.value.message, raised.value
    assert raised.value.hint.startswith("raise inventory[0].deadline_seconds"), raised.value.hint
