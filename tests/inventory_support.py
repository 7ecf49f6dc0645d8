"""Helpers for the inventory tests: injected AWS throttling and no-wait retries."""

from __future__ import annotations

import json

import pytest


class _Raw:
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
            return AWSResponse(request.url, 400, {"Content-Type": "application/x-amz-json-1.1"}, _Raw(body))
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
