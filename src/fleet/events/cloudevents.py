"""An outbox row as the CloudEvents 1.0 JSON document a receiver gets (structured mode): the
links in `data.links` made absolute with `FLEET_PUBLIC_URL`, `source` the service's own URL."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any
from uuid import UUID

from django.conf import settings

SPEC_VERSION = "1.0"


def public_url() -> str:
    return str(getattr(settings, "FLEET_PUBLIC_URL", "http://127.0.0.1:8000")).rstrip("/")


def document(
    *, event_id: UUID, type: str, subject: str, time: datetime, data: Mapping[str, Any] | str
) -> dict[str, Any]:
    """The CloudEvents JSON of one event."""
    base = public_url()
    payload = dict(json.loads(data) if isinstance(data, str) else data)  # a raw cursor reads jsonb as text
    links = payload.get("links")
    if isinstance(links, Mapping):
        payload["links"] = {k: base + v if isinstance(v, str) and v.startswith("/") else v for k, v in links.items()}
    return {
        "specversion": SPEC_VERSION,
        "id": str(event_id),
        "source": base,
        "type": type,
        "subject": subject,
        "time": time.isoformat().replace("+00:00", "Z"),
        "datacontenttype": "application/json",
        "data": payload,
    }


def body(doc: Mapping[str, Any]) -> bytes:
    """The bytes sent and signed (compact, UTF-8)."""
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False, default=str).encode()
