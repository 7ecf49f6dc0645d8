"""A credential header's value is never in the log, whatever its length or shape: the service's
DEBUG access log (`spendlake -vv serve`) writes the request line a client sent, and a client
ending its lines with a bare CR sends its headers in it; a server or proxy may echo the headers
it was sent in an error. `Authorization: hunter` (letters under 24, no scheme) was shown, as was
any `X-Api-Key` or `Cookie` value (RELIABILITY 20); a server's words after the header's name
(`Authorization: token rejected`) are kept."""

from __future__ import annotations

import socket

import pytest

from service.core import logs
from tests.conftest import stop
from tests.servicekit import start_serve, write_config

VALUES = {"Authorization": "hunter", "Proxy-Authorization": "proxypass", "X-Api-Key": "kyvalue",
          "Cookie": "sid=cookieval; theme=darkmode"}


@pytest.mark.parametrize(("line", "shown"), [
    ("Authorization: hunter", "Authorization: <redacted>"),
    ("Authorization: ab\r\nHost: x", "Authorization: <redacted>\r\nHost: x"),
    ("'GET / HTTP/1.1\\rAuthorization: hunter\\rX-Api-Key: k\\r'",
     "'GET / HTTP/1.1\\rAuthorization: <redacted>\\rX-Api-Key: <redacted>\\r'"),
    ("Proxy-Authorization: pw, retry", "Proxy-Authorization: <redacted>, retry"),
    ("sent Authorization: Bearer abc twice", "sent Authorization: <redacted> twice"),
    ("headers={'X-Api-Key': 'short', 'Cookie': 'sid=1; a=2'}", "headers={'X-Api-Key': '<redacted>', 'Cookie': '<redacted>'}"),
    ("Cookie: sid=abc; theme=dark", "Cookie: <redacted>"),
    ("Set-Cookie: sid=abc; Path=/; HttpOnly", "Set-Cookie: <redacted>"),
    # a quoted cookie value (RFC 6265), a key's value ended by `&` without a `?`, the `Token` scheme's short value
    ('Cookie: sid="abcdef123"', "Cookie: <redacted>"),
    ('Cookie: sid="ab cd"; theme=dark\r\nHost: x', "Cookie: <redacted>\r\nHost: x"),
    ("x-api-key=kyvalue&n=1", "x-api-key=<redacted>&n=1"),
    ("Authorization: Token abcdef", "Authorization: <redacted>"),
    # an access log's request line keeps its protocol after a query parameter's redacted value
    ('"GET /x?x-api-key=kyvalue HTTP/1.1" 200', '"GET /x?x-api-key=<redacted> HTTP/1.1" 200'),
    ("GET /x?n=1&X-Api-Key=kyvalue HTTP/1.1", "GET /x?n=1&X-Api-Key=<redacted> HTTP/1.1"),
    ("authorization: required", None),
    ("slurmrestd said: Authorization: token rejected; check url", None),
    ("Authorization: missing", None),
    ("the Cookie: header was missing", None),
    ("send 'Authorization: Bearer <token>', or the token as the password", None),
])
def test_a_credential_headers_value_is_redacted_whatever_its_length(line, shown):
    assert logs.redact(line) == (shown or line)


def test_the_debug_access_log_of_serve_shows_no_credential_header_a_client_sent(tmp_path):
    config = write_config(tmp_path, {"lake": str(tmp_path / "lake"),
                                     "service": {"listen": "127.0.0.1:0", "read_only": True}})
    proc, url = start_serve(config, options=("-vv",))
    try:
        host, port = url.removeprefix("http://").split(":")
        headers = "".join(f"{name}: {value}\r" for name, value in VALUES.items())
        with socket.create_connection((host, int(port)), timeout=10) as sock:  # lines ended by a bare CR
            sock.sendall(f"GET /api/v1/status HTTP/1.1\rHost: x\r{headers}\r".encode())
            sock.shutdown(socket.SHUT_WR)
            answer = sock.recv(65536)
    finally:
        stop(proc)
    log = "".join(proc.output)
    assert answer.startswith(b"HTTP/1.0 400"), answer
    [line] = [line for line in log.splitlines() if "GET /api/v1/status" in line]
    assert " DEBUG service.serve.http: " in line and '" 400 ' in line, line
    assert all(f"{name}: <redacted>" in line for name in VALUES), line
    assert not [secret for secret in ("hunter", "proxypass", "kyvalue", "cookieval", "darkmode") if secret in log], log
