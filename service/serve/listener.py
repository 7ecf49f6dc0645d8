"""The listening side of the HTTP layer (service/serve/http.py answers each request): the
socket bound, a thread per connection, and the bounds that keep a flood of connections from
taking the service down.

- At most `MAX_CONNECTIONS` connections are served at once; beyond them `PROBE_SLOTS` more (at
  most `PROBE_SLOTS_PER_CLIENT` of one client address) are read as far as their request line and
  answered only for `/healthz` and `/readyz`, anything else a 503: a client holding every
  connection open (slow headers) cannot fail the orchestrator's probes and have the service
  restarted. A probe slot's request must arrive within `PROBE_REQUEST_TIMEOUT_SECONDS`. Past those the next connection is answered 503 at once (JSON, `Retry-After`)
  without reading it, so threads stay bounded.
- At most `QUERY_SLOTS` heavy queries run at once (the handler takes one of `query_slots`).
- A client that hangs up before its answer is written is one log line, not a traceback.
"""

from __future__ import annotations

import logging
import socket
import sys
import threading
import uuid
from collections import Counter
from collections.abc import Callable
from http.server import ThreadingHTTPServer
from pathlib import Path

from service.core.errors import ConfigError
from service.core.pinned_root import pin_root
from service.serve.http import ServiceHandler, busy_answer

log = logging.getLogger(__name__)

MAX_CONNECTIONS = 256
PROBE_SLOTS = 16  # connections past MAX_CONNECTIONS that may still ask for a probe
PROBE_SLOTS_PER_CLIENT = 4  # of them one client address may hold: the kubelet's are its own
# the time a connection on a probe slot has to send its request: a probe sends it at once (the
# kubelet's own timeout is 1 s by default), so a silent connection gives its slot back soon, not
# after the 10 s a query may take to arrive; its own address's probe then gets the slot
PROBE_REQUEST_TIMEOUT_SECONDS = 1
QUERY_SLOTS = 4  # heavy queries running and sending at once (ServiceHandler takes `query_slots`)


class ProbeSlots:
    """The connections past the cap that may still ask for a probe: `total` at once, at most `each`
    of one client address (one flooding client cannot hold them all)."""

    def __init__(self, total: int = PROBE_SLOTS, each: int = PROBE_SLOTS_PER_CLIENT) -> None:
        self.total, self.each = total, each
        self.held: Counter[str] = Counter()
        self.lock = threading.Lock()

    def take(self, client: str) -> bool:
        with self.lock:
            if self.held.total() >= self.total or self.held[client] >= self.each:
                return False
            self.held[client] += 1
            return True

    def give(self, client: str) -> None:
        with self.lock:
            self.held[client] -= 1
            if not self.held[client]:
                del self.held[client]


class BoundedServer(ThreadingHTTPServer):
    """A thread per connection, at most `max_connections` at once, then `ProbeSlots` for probes
    only; at most `max_queries` heavy queries at once."""

    daemon_threads = True
    max_connections = MAX_CONNECTIONS
    max_queries = QUERY_SLOTS

    def server_activate(self) -> None:
        self._slots = threading.BoundedSemaphore(self.max_connections)
        self._probe_slots = ProbeSlots()
        self.query_slots = threading.BoundedSemaphore(self.max_queries)
        # the handler of a connection past the cap (its `api`, set again on a reload, is inherited)
        self.probe_handler = type(f"{self.RequestHandlerClass.__name__}ForProbes", (self.RequestHandlerClass,),
                                  {"probes_only": True, "timeout": PROBE_REQUEST_TIMEOUT_SECONDS})
        super().server_activate()

    def process_request(self, request, client_address) -> None:
        client = client_address[0]
        if self._slots.acquire(blocking=False):
            self._start(request, client_address, self.RequestHandlerClass, self._slots.release)
        elif self._probe_slots.take(client):
            self._start(request, client_address, self.probe_handler, lambda: self._probe_slots.give(client))
        else:
            self._refuse(request)

    def _start(self, request, client_address, handler, release: Callable[[], None]) -> None:
        thread = threading.Thread(target=self._serve, args=(request, client_address, handler, release), daemon=True)
        try:
            thread.start()
        except Exception:
            release()
            self.shutdown_request(request)
            raise

    def _serve(self, request, client_address, handler, release: Callable[[], None]) -> None:
        """socketserver's process_request_thread, with the handler chosen and the slot given back."""
        try:
            handler(request, client_address, self)
        except Exception:
            self.handle_error(request, client_address)
        finally:
            self.shutdown_request(request)
            release()

    def handle_error(self, request, client_address) -> None:
        """A client that hung up before its answer was written (a scrape slower than Prometheus's
        `scrape_timeout`, a probe past its timeout) is one log line, not socketserver's traceback
        on stderr; any other failure keeps its traceback, in the service log."""
        error = sys.exc_info()[1]
        if isinstance(error, ConnectionError):  # BrokenPipeError, ConnectionResetError, ...
            log.warning("client %s went away before its answer was written (%s): if it is Prometheus, its "
                        "scrape_timeout is shorter than the scrape took", client_address[0], error)
        else:
            log.error("request from %s failed", client_address[0], exc_info=error)

    def _refuse(self, request) -> None:
        try:
            request.settimeout(1)
            request.sendall(busy_answer(f"more than {self.max_connections} connections at once; retry shortly",
                                        uuid.uuid4().hex[:16]))
        except OSError:
            pass
        finally:
            self.shutdown_request(request)


def parse_listen(listen: str) -> tuple[str, int]:
    host, _, port = listen.rpartition(":")
    return host.strip("[]"), int(port)


def make_server(api, listen: str, *, max_connections: int = MAX_CONNECTIONS, max_queries: int = QUERY_SLOTS,
                where: str = "service.listen",
                hint: str = "choose another address with --listen HOST:PORT") -> ThreadingHTTPServer:
    """Bind (nothing is served until `serve_forever`); `server_address` gives the real port. `hint`: what to do
    when the address is taken (a reload's is in the config file: --listen does not change with it)."""
    host, port = parse_listen(listen)
    handler = type("BoundServiceHandler", (ServiceHandler,), {"api": api})
    server_class = type("SpendlakeHTTPServer", (BoundedServer,), {
        "address_family": socket.AF_INET6 if ":" in host else socket.AF_INET,
        "max_connections": max_connections,
        "max_queries": max_queries,
        # the listen backlog (socketserver's default: 5): a burst of probes and scrapes beyond it
        # had its SYNs dropped and retried a second or more later, timing out; let as many wait
        # to be accepted as may be served at once (the kernel caps it at net.core.somaxconn)
        "request_queue_size": max_connections,
    })
    try:
        return server_class((host, port), handler)
    except OSError as exc:
        raise ConfigError(f"cannot listen on {listen}: {exc.strerror or exc}", where=where, hint=hint) from None


def pinned_after(server: ThreadingHTTPServer | None, root: Path) -> ThreadingHTTPServer | None:
    """`server`, once the lake folder `root` is pinned (made when missing): bound first, so that a taken port
    makes no lake folder (a new lake's _locks and _state were left behind); a folder that cannot be made lets
    the address go. A lake moved away while serving then fails, not comes back empty."""
    try:
        pin_root(root)
    except OSError:
        if server is not None:
            server.server_close()
        raise
    return server
