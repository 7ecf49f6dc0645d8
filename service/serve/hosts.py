"""Which `Host` a request may name while no token guards the service.

A web page on another site can have its own name resolve to this machine (DNS rebinding): the
browser then sends the page's requests to the service as same-origin, with the page's name in
`Host`, and lets the page read the answers (every team's spend). So without a token a request
naming a host the service does not go by is refused: it goes by `localhost`, any IP address
(a page cannot be served from an address it does not own, so no page is same-origin with one:
this admits a Kubernetes probe or a scrape of the pod's IP), its `--listen`/`service.listen`
host, and the names of `service.allowed_hosts` (a Compose service's name, a reverse proxy's).
A request without `Host` is no browser's (they always send it) and passes.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from service.serve.http import Response, error_response

LOCAL_NAMES = frozenset({"localhost"})


def host_name(header: str) -> str:
    """The host of a `Host` value, without its port, IPv6 brackets or trailing dot, lowercase."""
    host = header.strip().lower()
    if is_address(host):  # an IPv6 address sent without its brackets
        return host
    if host.startswith("["):
        return host[1:].partition("]")[0]
    return host.rpartition(":")[0].rstrip(".") if ":" in host else host.rstrip(".")


def is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host.partition("%")[0])  # an IPv6 zone (`fe80::1%eth0`) is no part of it
    except ValueError:
        return False
    return True


@dataclass(frozen=True)
class Hosts:
    """The names the service goes by (addresses always pass)."""

    names: frozenset[str]

    @classmethod
    def of(cls, listen: str, allowed: tuple[str, ...] = ()) -> Hosts:
        return cls(LOCAL_NAMES | {host_name(listen)} | {host_name(name) for name in allowed})

    def allows(self, header: str | None) -> bool:
        if not header:
            return True
        host = host_name(header)
        return host in self.names or is_address(host)

    def refusal(self, header: str) -> Response:
        """421 Misdirected Request: this server does not answer for that name."""
        return error_response(
            421, f"this service does not answer to the host {host_name(header)!r} while no API token is set "
                 "(a web page on that site could read it)", where="service.allowed_hosts",
            hint="open it as localhost or by its IP address, add the name to service.allowed_hosts, "
                 "or set service.api_token (or $SPENDLAKE_API_TOKEN)")
