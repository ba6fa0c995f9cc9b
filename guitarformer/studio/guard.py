"""The studio answers only its own page: a request must name the host the studio serves (no DNS rebinding), and a
request that changes something must not come from another site's page (no cross-site form posts).

    Host    loopback names (127.0.0.1, localhost, [::1]) or the host the studio was asked to bind, with its port;
            on a wildcard bind (0.0.0.0, ::) also any IP address, never a name another site could point here
            -> otherwise 400
    Origin  (or, without one, Referer) of a POST, PUT, PATCH or DELETE: absent, or this very host and port
            -> otherwise 403

Written as a plain ASGI middleware, so the check runs before routing, on every path, static files included.
"""

from __future__ import annotations

import ipaddress
import json
from urllib.parse import urlsplit

LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "::1"})
WILDCARD_HOSTS = frozenset({"0.0.0.0", "::", ""})
CHANGING_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def split_host(value: str) -> tuple[str, int | None] | None:
    """'Host' header value -> (lower-case name without brackets, port or None); None when it does not parse."""
    try:
        parts = urlsplit(f"//{value.strip()}")
        return (parts.hostname or "").lower(), parts.port
    except ValueError:  # a port out of range or not a number
        return None


def is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
        return True
    except ValueError:
        return False


class HostGuard:
    """ASGI middleware: refuse requests for other hosts (400) and cross-site changes (403), as the module says.
    `host`: the address the studio binds; `port`: the port it serves (None: any port, as in-process test clients
    send none)."""

    def __init__(self, app, host: str = "127.0.0.1", port: int | None = None):
        self.app = app
        self.port = port
        self.names = LOOPBACK_NAMES | {host.strip("[]").lower()}
        self.any_ip = host.strip("[]") in WILDCARD_HOSTS

    def host_ok(self, value: str) -> bool:
        split = split_host(value)
        if split is None or not split[0]:
            return False
        name, port = split
        if self.port is not None and (port or 80) != self.port:  # a browser leaves out only port 80
            return False
        return name in self.names or (self.any_ip and is_ip(name))

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        host = headers.get("host", "")
        if not self.host_ok(host):
            return await refuse(send, 400, f"this studio does not serve the host {host!r}",
                                "open the address the studio printed, e.g. http://127.0.0.1:8000/")
        source = headers.get("origin") or headers.get("referer")
        if scope["method"] in CHANGING_METHODS and source and not same_site(source, host, scope.get("scheme", "http")):
            return await refuse(send, 403, f"a request from another site ({source[:100]}) was refused",
                                "use the studio's own page, or send the request without an Origin header")
        return await self.app(scope, receive, send)


def same_site(source: str, host: str, scheme: str) -> bool:
    """Whether an Origin or Referer URL names exactly this origin: `scheme`, `host` (a Host header value)."""
    try:
        url = urlsplit(source)
        theirs = (url.hostname or "").lower(), url.port or {"http": 80, "https": 443}.get(url.scheme)
    except ValueError:
        return False
    mine = split_host(host)
    if url.scheme != scheme or scheme not in ("http", "https") or mine is None:
        return False  # "null" (a sandboxed or file: page), or another scheme
    return theirs == (mine[0], mine[1] or {"http": 80, "https": 443}[url.scheme])


async def refuse(send, status: int, problem: str, fix: str) -> None:
    """The studio's error shape, {"error", "fix"}, sent without calling the app."""
    body = json.dumps({"error": problem, "fix": fix}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
