"""End to end: billing export and GPU utilisation → `spendlake serve` (ingest, rules, metrics) →
a real Prometheus with the shipped alert rules → a real Alertmanager with the shipped routing →
the team's webhook. Ports on 127.0.0.1 only; every wait bounded; everything stopped at the end."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from stackkit import alertmanager, demo_service, prometheus, query, wait_until

pytestmark = pytest.mark.slow  # spendlake serve, Prometheus and Alertmanager for real


class Receiver(BaseHTTPRequestHandler):
    received: list[tuple[str, dict]] = []

    def do_POST(self) -> None:  # noqa: N802
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.received.append((self.path, json.loads(body)))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args) -> None:
        pass


def test_an_idle_gpu_alert_reaches_the_owning_teams_receiver(tmp_path):
    server = ThreadingHTTPServer(("127.0.0.1", 0), type("Hook", (Receiver,), {"received": []}))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    received = server.RequestHandlerClass.received
    try:
        with demo_service(tmp_path) as spendlake, \
                alertmanager(tmp_path, f"http://127.0.0.1:{server.server_address[1]}") as am, \
                prometheus(tmp_path, spendlake, am) as prom:
            wait_until(lambda: any(alert["labels"]["alertname"] == "SpendlakeIdleGPUWaste"
                                   for _, note in received for alert in note["alerts"]), 40,
                       "SpendlakeIdleGPUWaste at the webhook")
            assert query(prom, 'ALERTS{alertname="SpendlakeDown"}')["result"] == []
    finally:
        server.shutdown()
        server.server_close()
    path, note = next((p, n) for p, n in received
                      if any(a["labels"]["alertname"] == "SpendlakeIdleGPUWaste" for a in n["alerts"]))
    assert path == "/team-nlp"  # routed on the team label to that team's receiver
    assert note["groupLabels"] == {"team": "nlp"} and note["status"] == "firing"
    [alert] = [a for a in note["alerts"] if a["labels"]["alertname"] == "SpendlakeIdleGPUWaste"]
    assert alert["labels"]["team"] == "nlp"
    assert alert["annotations"]["summary"].startswith("idle GPUs of team nlp waste about $")
    assert alert["annotations"]["runbook_url"].endswith("#spendlakeidlegpuwaste")
