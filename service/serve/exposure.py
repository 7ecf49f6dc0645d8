"""What `serve` says at start of who can read it: a service reachable beyond this machine
with no token has its API, reports and metrics open to anyone who can reach its port; with a
token, /metrics (spend by team, project and experiment) stays open unless
`service.metrics_auth: token`."""

from __future__ import annotations

import ipaddress


def exposure_warning(host: str, token: str | None, metrics_auth: str = "open") -> str | None:
    """A line for a service reachable beyond this machine whose spend anyone reaching the port
    can read: every route with no token, /metrics with one unless metrics_auth is `token`."""
    try:
        address = ipaddress.ip_address(host.split("%")[0])
        if address.is_loopback or getattr(address, "ipv4_mapped", None) and address.ipv4_mapped.is_loopback:
            return None
    except ValueError:  # a host name: bound to whatever it resolves to, so counted as reachable
        if host == "localhost":
            return None
    if not token:
        return (f"warning: listening on {host} with no API token: /api, /reports and /metrics (every team's spend) "
                "are open to anyone who can reach this port; set service.api_token or $SPENDLAKE_API_TOKEN, or "
                "listen on 127.0.0.1")
    if metrics_auth == "open":
        return (f"warning: listening on {host}: /api and /reports need the API token, but /metrics (spend by team, "
                "project and experiment) is open to anyone who can reach this port; set service.metrics_auth: token "
                "to have it need the token too (Prometheus sends it from the file its scrape config's "
                "`authorization.credentials_file` names)")
    return None
