"""Where a webhook may go (SSRF): the host of a subscription's URL is resolved and every address
it names is checked by `fleet_rules.webhooks.refused_address` — loopback, link-local (cloud
metadata), private, shared and reserved addresses are refused unless an admin set the
subscription's `allow_private`. Checked when a subscription is saved and before every try (a name
may resolve elsewhere by then).

Known limit: the check resolves the name, then httpx resolves it again to connect; a DNS server
answering differently between the two (rebinding) could slip through. Deployments that need more
send webhooks through an egress proxy that enforces the same rule."""

from __future__ import annotations

import socket
from urllib.parse import urlsplit

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
