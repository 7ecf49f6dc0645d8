"""Helpers for the inventory tests: injected AWS throttling and no-wait retries."""

from __future__ import annotations

import json

import pytest


class RawBody:
    """The raw body botocore reads from an AWSResponse."""

    def __init__(self, body: bytes):
        self._body = body

    def stream(self, **_kwargs):
        yield self._body

    def read(self, *_args, **_kwargs):
        body, self._body = self._body, b""
        return body


def throttle_first(module, monkeypatch, operation: str, times: int) -> list[str]:
    """Patch `module.make_client` so that `operation` (e.g. 'GetResources') answers
    ThrottlingException `times` times before reaching moto. Returns the log of calls."""
    from botocore.awsrequest import AWSResponse

    original = module.make_client
    calls: list[str] = []

    def before_send(request, **_kwargs):
        calls.append("sent")
        if len(calls) <= times:
            body = json.dumps({"__type": "ThrottlingException", "message": "Rate exceeded"}).encode()
            return AWSResponse(request.url, 400, {"Content-Type": "application/x-amz-json-1.1"}, RawBody(body))
        return None

    def make_client(service, **kwargs):
        client = original(service, **kwargs)
        client.meta.events.register_first(f"before-send.*.{operation}", before_send)
        return client

    monkeypatch.setattr(module, "make_client", make_client)
    return calls


@pytest.fixture
def no_retry_wait(monkeypatch):
    """Standard-mode retries without their backoff sleep, so the tests stay fast."""
    from botocore.retries import standard

    monkeypatch.setattr(standard.ExponentialBackoff, "delay_amount", lambda self, context: 0)


def stored_jobs(source: dict, lake_dir, now) -> list[dict]:
    """One job source run into a fresh lake at `now`: its `jobs` rows as stored, as dicts."""
    from service.core.config import parse_config
    from service.core.lake import Lake
    from service.ingest.inventory import run_inventory

    [outcome] = run_inventory(parse_config({"lake": str(lake_dir), "inventory": [source]}), now=now)
    assert outcome.error is None, outcome.error
    with Lake(lake_dir).query() as con:
        cursor = con.execute("SELECT * FROM jobs")
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, values)) for values in cursor.fetchall()]


def traced_peak(call):
    """`call()`'s result and the peak bytes of Python objects held while it ran (tracemalloc)."""
    import tracemalloc

    tracemalloc.start()
    try:
        return call(), tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
