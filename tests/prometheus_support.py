"""A real Prometheus (Debian's binary) serving series backfilled with `promtool tsdb
create-blocks-from openmetrics`, for connector tests (gpu-metrics, k8s-pods)."""

from __future__ import annotations

import json
import socket
import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

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
def answering_prometheus(answer: dict, asked: list[dict]) -> Iterator[str]:
    """The URL of a stand-in Prometheus giving `answer` to every request (what a real one cannot
    be made to say on cue: Thanos's partial responses); each request's parameters go to `asked`."""

    class Answering(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            asked.append(parse_qs(urlsplit(self.path).query))
            body = json.dumps(answer).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Answering)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()
