"""Where a webhook may go (SSRF): the host of a subscription's URL is resolved and every address
it names is checked by `fleet_rules.webhooks.refused_address` — loopback, link-local (cloud
metadata), private, shared and reserved addresses are refused unless an admin set the
subscription's `allow_private`. Checked when a subscription is saved (`url_refusal`, a clear 400)
and again **when connecting** (`CheckedBackend`): the worker's connections resolve the name once,
check every address it gives, and connect to a checked address — never to what a second lookup
answers — so a DNS server that answers an outside address to the check and an inside one to the
connection (rebinding) is refused too."""

from __future__ import annotations

import socket
from collections.abc import Iterable
from urllib.parse import urlsplit

import httpcore
import httpx

from fleet_rules.webhooks import first_refusal

SCHEMES = ("http", "https")


def url_refusal(url: str, *, allow_private: bool) -> str | None:
    """Why a delivery to `url` is refused (None: it may go)."""
    parts = urlsplit(url)
    if parts.scheme not in SCHEMES or not parts.hostname:
        return "the URL must be http(s)://host/…"
    if parts.username or parts.password:
        return "the URL must not carry credentials (the signature authenticates the sender)"
    if allow_private:
        return None
    try:
        infos = socket.getaddrinfo(parts.hostname, parts.port or 443, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        return f"{parts.hostname} does not resolve ({exc})"
    why = first_refusal(sorted({str(info[4][0]) for info in infos}))
    if why is not None:
        return f"{why}: refused unless an admin allows private targets for this subscription"
    return None


def resolved(host: str, port: int) -> list[str]:
    """Every address `host` resolves to (for TCP), in the resolver's order, without duplicates."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


class CheckedBackend(httpcore.NetworkBackend):
    """httpcore's network backend that connects only to addresses it resolved and checked itself:
    the name is resolved once per connection, a name with any refused address is refused whole
    (`httpcore.ConnectError`, so the try is recorded and retried like a refused connection), and
    the socket is opened to the checked address. TLS still verifies the certificate against the
    URL's host name (httpcore passes it as the server name, not the address)."""

    def __init__(self) -> None:
        self._inner = httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:
        try:
            addresses = resolved(host, port)
        except (OSError, UnicodeError) as exc:
            raise httpcore.ConnectError(f"{host} does not resolve ({exc})") from exc
        why = first_refusal(addresses)
        if why is not None:
            raise httpcore.ConnectError(f"refused when connecting to {host}: {why}")
        failure: httpcore.ConnectError | None = None
        for address in addresses:
            try:
                return self._inner.connect_tcp(address, port, timeout, local_address, socket_options)
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                failure = httpcore.ConnectError(f"{host} ({address}): {exc}")
        raise failure or httpcore.ConnectError(f"{host} has no address")

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None
    ) -> httpcore.NetworkStream:
        raise httpcore.ConnectError("a webhook goes to an http(s) URL, not a unix socket")

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


def checked_transport(limits: httpx.Limits) -> httpx.HTTPTransport:
    """An httpx transport whose connections go through `CheckedBackend` (no proxy, no environment)."""
    transport = httpx.HTTPTransport(trust_env=False, limits=limits)
    transport._pool = httpcore.ConnectionPool(
        ssl_context=httpx.create_ssl_context(trust_env=False),
        max_connections=limits.max_connections,
        max_keepalive_connections=limits.max_keepalive_connections,
        keepalive_expiry=limits.keepalive_expiry,
        network_backend=CheckedBackend(),
    )
    return transport
