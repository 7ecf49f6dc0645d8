"""A real Prometheus (Debian's binary) serving series backfilled with `promtool tsdb
create-blocks-from openmetrics`, for connector tests (gpu-metrics, k8s-pods); a stand-in that
answers on cue; and a proxy checking SigV4 signatures as Amazon Managed Service for Prometheus does."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from datetime import datetime, timezone
from urllib.parse import parse_qs, parse_qsl, quote, urlencode, urlsplit

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from conftest import require_binary, stop


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def backfilled_prometheus(base: Path, openmetrics: str, flags: Sequence[str] = ()) -> Iterator[str]:
    """The URL of a Prometheus on 127.0.0.1 holding `openmetrics` (samples older than two
    hours: promtool writes them as blocks), started with `flags` too; stopped on exit."""
    server, promtool = require_binary("prometheus"), require_binary("promtool")
    (base / "series.om").write_text(openmetrics)
    (base / "prometheus.yml").write_text("global:\n  scrape_interval: 1h\n")
    subprocess.run([promtool, "tsdb", "create-blocks-from", "openmetrics", str(base / "series.om"), str(base / "data")],
                   check=True, capture_output=True, timeout=120)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = open(base / "prometheus.log", "wb")
    process = subprocess.Popen([server, f"--config.file={base / 'prometheus.yml'}",
                                f"--storage.tsdb.path={base / 'data'}", "--storage.tsdb.retention.time=100y",
                                f"--web.listen-address=127.0.0.1:{port}", *flags], stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"{url}/-/ready", timeout=1) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("prometheus did not become ready:\n" + (base / "prometheus.log").read_text()[-2000:])
            time.sleep(0.1)
        yield url
    finally:
        stop(process, timeout=10)
        log.close()


@contextmanager
def serving(answer: Callable[[str, Any], tuple[int, bytes]], path: str = "") -> Iterator[str]:
    """The URL (`path` under it) of an HTTP server on 127.0.0.1 answering each GET with the status
    and JSON body `answer` gives for its path and headers."""

    class Answering(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            status, body = answer(self.path, self.headers)
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Answering)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}{path}"
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def answering_prometheus(answer: dict, asked: list[dict]) -> Iterator[str]:
    """The URL of a stand-in Prometheus giving `answer` to every request (what a real one cannot
    be made to say on cue: Thanos's partial responses); each request's parameters go to `asked`."""

    def answering(path: str, headers) -> tuple[int, bytes]:
        asked.append(parse_qs(urlsplit(path).query))
        return 200, json.dumps(answer).encode()

    with serving(answering) as url:
        yield url


AUTHORIZATION = re.compile(r"AWS4-HMAC-SHA256 Credential=([^/]+)/(\d{8})/([^/]+)/([^/]+)/aws4_request, "
                           r"SignedHeaders=([a-z0-9;-]+), Signature=([0-9a-f]{64})")


def sigv4_problem(method: str, path: str, headers, credentials: Credentials, region: str) -> str | None:
    """What Amazon Managed Service for Prometheus says of a request whose signature is wrong,
    None when botocore, given the known `credentials`, computes the signature the request
    carries. The query is canonicalised as AWS does (decoded, then encoded per RFC 3986), so a
    client signing another spelling of it (`+` for a space) is refused."""
    found = AUTHORIZATION.fullmatch(headers.get("Authorization") or "")
    if not found:
        return "Missing Authentication Token"
    key, day, scope_region, service, signed, signature = found.groups()
    if key != credentials.access_key:
        return "The security token included in the request is invalid."
    if (scope_region, service) != (region, "aps"):
        return f"Credential should be scoped to a valid region and service: {scope_region}/{service}"
    stamp = headers.get("X-Amz-Date") or ""
    if stamp[:8] != day or abs(datetime.now(timezone.utc).timestamp() - datetime.strptime(
            stamp, "%Y%m%dT%H%M%SZ").replace(tzinfo=timezone.utc).timestamp()) > 300:
        return "Signature expired"
    if credentials.token and ("x-amz-security-token" not in signed.split(";")
                              or headers.get("X-Amz-Security-Token") != credentials.token):
        return "The security token included in the request is invalid."
    parts = urlsplit(path)
    query = urlencode(parse_qsl(parts.query, keep_blank_values=True), quote_via=quote, safe="")
    request = AWSRequest(method=method, url=f"http://{headers['Host']}{parts.path}?{query}",
                         headers={name: headers[name] for name in signed.split(";")})
    request.context["timestamp"] = stamp
    signer = SigV4Auth(credentials, "aps", region)
    expected = signer.signature(signer.string_to_sign(request, signer.canonical_request(request)), request)
    if expected != signature:
        return "The request signature we calculated does not match the signature you provided."
    return None


@contextmanager
def sigv4_proxy(upstream: str, credentials: Credentials, region: str) -> Iterator[str]:
    """The URL of a stand-in for an Amazon Managed Service for Prometheus workspace in front of
    the Prometheus at `upstream`: a request signed with `credentials` for `region` is forwarded,
    any other answered 403 with AMP's JSON `message`."""
    workspace = "/workspaces/ws-test"  # AMP's query API lies under the workspace's path

    def forward(path: str, headers) -> tuple[int, bytes]:
        problem = sigv4_problem("GET", path, headers, credentials, region)
        if not path.startswith(workspace + "/"):
            return 404, b'{"message": "Not Found"}'
        if problem:
            return 403, json.dumps({"message": problem}).encode()
        try:
            with urllib.request.urlopen(upstream + path[len(workspace):], timeout=30) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as answered:
            return answered.code, answered.read()

    with serving(forward, workspace) as url:
        yield url
