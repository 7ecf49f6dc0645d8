"""The HTTP layer under service/serve/app.py: a standard-library request handler that a slow
or hostile client cannot take down (service/serve/listener.py binds the socket and bounds the
connections).

- Each connection gets `REQUEST_TIMEOUT_SECONDS` to send its request, all of it (a read's
  timeout alone would let a client sending a header line every few seconds hold its thread):
  an idle, half-open or trickling connection is dropped, it cannot hold its thread for as long
  as it likes. Bytes it sent before then are read even when the handler gets to them later (a
  process busy with its jobs on a loaded machine dropped requests sent at once).
- A connection past the server's cap (`probes_only`) is answered for `/healthz` and `/readyz`
  only, anything else a 503 once its request line is read, its headers left unread.
- At most the server's `max_queries` queries of the lake (the routes the app marks heavy: an
  answer may be megabytes, its making more) run and send at once; one that waits
  `QUERY_WAIT_SECONDS` for its turn is a 503 with `Retry-After`, so memory does not grow with
  the requests in parallel. A request the app refuses (`Api.refused`: Host, path, token) waits
  for no turn and holds none.
- Every error is JSON, the errors http.server produces itself included (400 bad request
  line, 414 URI too long, 431 headers too large, 501 unsupported method), and every answer
  carries an `X-Request-Id`; a handler that fails unexpectedly is a 500 naming that id, the
  traceback only in the service log.
- Every answer, the 503 of a full server included, tells a browser not to guess its type
  (a JSON error echoing `<script>` is never run as HTML), not to show it in a frame, and to
  load and run nothing for it; the pages under `/reports/` widen that last policy to exactly
  what they need (service/serve/reports.py).
- HEAD answers as GET without the body; an answer with an `ETag` or `Last-Modified` that the
  client already holds (If-None-Match, If-Modified-Since) is a 304; a file is sent in chunks.
"""

from __future__ import annotations

import io
import json
import logging
import socket
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qs, urlsplit

from service.core.output import to_json

log = logging.getLogger(__name__)

REQUEST_TIMEOUT_SECONDS = 10
PROBES = frozenset({"/healthz", "/readyz"})
QUERY_WAIT_SECONDS = 10.0  # for a query's turn, before a 503 (waiting holds a thread, not an answer)
MAX_QUERY_FIELDS = 50  # parameters per request (a repeatable one counts each time)
MAX_URL_BYTES = 8192
JSON = "application/json; charset=utf-8"
SECURITY_HEADERS = {"X-Content-Type-Options": "nosniff", "X-Frame-Options": "DENY",
                    "Content-Security-Policy": "default-src 'none'; frame-ancestors 'none'"}


MAX_ERROR_TEXT = 500  # characters of an error's message, where or hint: they may echo a hostile value


def capped(text: str | None) -> str | None:
    """`text` cut to MAX_ERROR_TEXT characters, saying how much was left out."""
    if text is None or len(text) <= MAX_ERROR_TEXT:
        return text
    return f"{text[:MAX_ERROR_TEXT]}... ({len(text) - MAX_ERROR_TEXT:,} more characters)"


@dataclass(frozen=True)
class Streamed:
    """A file sent in chunks (a report's CSV may be large): `length` bytes, then `close`."""

    chunks: Iterator[bytes]
    length: int
    close: Callable[[], None]


@dataclass
class Response:
    status: int
    body: bytes
    content_type: str = JSON
    headers: dict[str, str] = field(default_factory=dict)
    stream: Streamed | None = None  # sent in place of `body`


def json_response(status: int, data: object, **headers: str) -> Response:
    return Response(status, (to_json(data) + "\n").encode(), headers=headers)


def error_response(status: int, message: str, *, where: str | None = None, hint: str | None = None,
                   **headers: str) -> Response:
    error = {"message": capped(message), **({"where": capped(where)} if where else {}),
             **({"hint": capped(hint)} if hint else {})}
    return json_response(status, {"error": error}, **headers)


def not_modified(request: Mapping[str, str], headers: Mapping[str, str]) -> bool:
    """Whether the client's copy (If-None-Match, else If-Modified-Since) is the answer's
    (`ETag`, `Last-Modified`): then a 304 without the body does."""
    tags, since = request.get("If-None-Match"), request.get("If-Modified-Since")
    if tags is not None:
        etag = headers.get("ETag")
        return etag is not None and (tags.strip() == "*" or etag in (t.strip().removeprefix("W/") for t in tags.split(",")))
    if since is None or "Last-Modified" not in headers:
        return False
    try:
        return parsedate_to_datetime(headers["Last-Modified"]) <= parsedate_to_datetime(since)
    except (TypeError, ValueError):  # a date that does not parse is ignored (RFC 9110 13.1.3)
        return False


def json_body(status: int, message: str, request_id: str, **extra) -> bytes:
    return (to_json({"error": {"status": status, "message": capped(message),
                               **{k: capped(v) if isinstance(v, str) else v for k, v in extra.items()}},
                     "request_id": request_id}) + "\n").encode()


def busy_answer(message: str, request_id: str) -> bytes:
    """A whole 503 (JSON, `Retry-After`), written as it is: sent where no request was parsed."""
    body = json_body(503, message, request_id)
    head = {"Content-Type": JSON, "Retry-After": "1", "Content-Length": str(len(body)), **SECURITY_HEADERS}
    return (b"HTTP/1.0 503 Service Unavailable\r\n"
            + "".join(f"{name}: {value}\r\n" for name, value in head.items()).encode() + b"\r\n" + body)


def asks_for_a_probe(request_line: bytes) -> bool:
    """Whether a request line is a GET or HEAD of /healthz or /readyz."""
    method, _, rest = request_line.decode("latin-1").partition(" ")
    return method in ("GET", "HEAD") and urlsplit(rest.partition(" ")[0]).path.rstrip("/") in PROBES


class RequestReader(socket.SocketIO):
    """A connection's bytes, read by `deadline` (time.monotonic()) at the latest: each read
    waits only for what is left of it, then times out as an idle connection does."""

    def __init__(self, sock: socket.socket, deadline: float) -> None:
        super().__init__(sock, "rb")
        self.deadline = deadline

    def readinto(self, buffer) -> int | None:
        left = self.deadline - time.monotonic()
        if left > 0:
            self._sock.settimeout(left)
            return super().readinto(buffer)
        # past it, what the client sent in time is still read: this process was slow to get to it
        # (its jobs busy, the machine loaded), not the client; the first read that would wait ends it
        self._sock.settimeout(0)
        try:
            return self._sock.recv_into(buffer)
        except BlockingIOError:
            raise TimeoutError("the request was not sent within the request timeout") from None


class ServiceHandler(BaseHTTPRequestHandler):
    api = None  # the app (service.serve.app.Api), set on the subclass made by `make_server`
    server_version = "spendlake"
    sys_version = ""
    timeout = REQUEST_TIMEOUT_SECONDS  # socket timeout for reading the request
    protocol_version = "HTTP/1.0"  # one request per connection: no keep-alive to hold a thread
    probes_only = False  # a connection past the cap: served for /healthz and /readyz only

    def setup(self) -> None:
        self.request_id = uuid.uuid4().hex[:16]
        super().setup()
        self.rfile.close()  # its socket stays open: a deadline for the whole request reads it
        self.rfile = io.BufferedReader(RequestReader(self.connection, time.monotonic() + self.timeout))

    def parse_request(self) -> bool:
        if self.probes_only and not asks_for_a_probe(self.raw_requestline):  # its headers left unread
            self.connection.settimeout(self.timeout)
            self.wfile.write(busy_answer(f"more than {self.server.max_connections} connections at once; "
                                         "retry shortly", self.request_id))
            return False
        try:
            return super().parse_request()
        finally:  # the request is read: the answer's writes get the whole timeout each again
            self.connection.settimeout(self.timeout)

    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        url = urlsplit(self.path)
        try:  # the field count first: it is what makes a long query expensive
            query = parse_qs(url.query, keep_blank_values=True, strict_parsing=bool(url.query),
                             max_num_fields=MAX_QUERY_FIELDS)
        except ValueError as exc:
            too_many = "Max number of fields exceeded" in str(exc)
            self.send_error(400, f"more than {MAX_QUERY_FIELDS} parameters" if too_many else "malformed query string")
            return
        if len(self.path.encode()) > MAX_URL_BYTES:
            self.send_error(414, f"the URL is longer than {MAX_URL_BYTES} bytes")
            return
        route, authorization = self.api.route(url.path), self.headers.get("Authorization")
        refusal = self.api.refused(url.path, route, authorization, self.headers.get("Host"))
        slots = self.server.query_slots if refusal is None and route.heavy else None  # a refusal waits for none
        if slots is not None and not slots.acquire(timeout=QUERY_WAIT_SECONDS):
            self.send(503, json_body(503, f"{self.server.max_queries} queries of the lake are running, as many as run "
                                          "at once; retry shortly", self.request_id), JSON, {"Retry-After": "2"})
            return
        try:  # the slot is held until the answer is sent: its bytes are what a slow reader keeps
            self.answer(url.path, lambda: refusal if refusal is not None else
                        self.api.answer(url.path, route, query, authorization))
        finally:
            if slots is not None:
                slots.release()

    def answer(self, path: str, respond: Callable[[], Response]) -> None:
        try:
            response = respond()
            body = self.with_request_id(response)
        except Exception:  # a bug must not drop the connection: log it, answer 500 with the id
            log.exception("request %s %s failed", self.request_id, path)
            self.send_error(500, "internal error; the service log has the details under this request id")
            return
        stream = response.stream
        try:
            if response.status == 200 and not_modified(self.headers, response.headers):
                # the 200's headers too: a browser replaces its cached ones with a 304's (a page's
                # policy among them, so the default one would blank a report on reload)
                self.send(304, b"", response.content_type, response.headers)
            else:
                self.send(response.status, body, response.content_type, response.headers, stream)
        finally:
            if stream is not None:
                stream.close()

    do_HEAD = do_GET  # noqa: N815 (`send` writes no body for HEAD)

    def with_request_id(self, response) -> bytes:
        """An error answer's JSON with its status and this request's id (for the log)."""
        if response.status < 400 or response.content_type != JSON:
            return response.body
        data = json.loads(response.body)
        if not isinstance(data, dict) or not isinstance(data.get("error"), dict):
            return response.body  # a probe's answer (`/readyz` not ready), not an error report
        data["error"]["status"] = response.status
        return (to_json({**data, "request_id": self.request_id}) + "\n").encode()

    def do_POST(self) -> None:  # noqa: N802
        self.send_error(405, "the API is read-only: use GET")

    do_PUT = do_DELETE = do_PATCH = do_POST

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """http.server's own errors, as JSON like every other answer; one answered while the
        request is parsed is written with the whole timeout too, not what is left of the read's."""
        self.connection.settimeout(self.timeout)
        self.close_connection = True
        if getattr(self, "request_version", None) == "HTTP/0.9":  # a garbled request line: answer with headers
            self.request_version = "HTTP/1.0"
        headers = {"Allow": "GET, HEAD"} if code in (405, 501) else {}
        reason = message or self.responses.get(code, ("error",))[0]
        self.send(code, json_body(code, reason, self.request_id), JSON, headers)

    def send(self, status: int, body: bytes, content_type: str, headers: dict[str, str],
             stream: Streamed | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        if status != 304:  # a 304's length would be the body it does not send
            self.send_header("Content-Length", str(stream.length if stream else len(body)))
        for name, value in {"Cache-Control": "no-store", "X-Request-Id": self.request_id, **SECURITY_HEADERS,
                            **headers}.items():
            self.send_header(name, value)
        self.end_headers()
        if self.command == "HEAD" or status == 304:
            return
        if stream is None:
            self.wfile.write(body)
            return
        sent = 0
        for chunk in stream.chunks:
            self.wfile.write(chunk)
            sent += len(chunk)
        if sent != stream.length:  # the file shrank while it was sent: the client sees a short body
            log.warning("request %s: sent %d of the %d bytes announced (the file changed while it was sent)",
                        self.request_id, sent, stream.length)

    def log_message(self, format: str, *args) -> None:  # noqa: A002 (signature of the base class)
        log.debug("%s %s %s", self.request_id, self.address_string(), format % args)
