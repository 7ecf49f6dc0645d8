"""What `serve` says at start of who can read it: a service reachable beyond this machine
with no token has its API and reports open to anyone who can reach its port."""

from __future__ import annotations

import ipaddress


def exposure_warning(host: str, token: str | None) -> str | None:
    """A line for a service reachable beyond this machine with no token: its API and reports
    (every team's spend) are then open to anyone who can reach the port."""
    if token:
        return None
    try:
        address = ipaddress.ip_address(host.split("%")[0])
        if address.is_loopback or getattr(address, "ipv4_mapped", None) and address.ipv4_mapped.is_loopback:
            return None
    except ValueError:  # a host name: bound to whatever it resolves to, so counted as reachable
        if host == "localhost":
            return None
    return (f"warning: listening on {host} with no API token: /api and /reports (every team's spend) are open "
            "to anyone who can reach this port; set service.api_token or $SPENDLAKE_API_TOKEN, or listen on "
            "127.0.0.1")
