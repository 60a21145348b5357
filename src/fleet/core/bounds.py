"""Request bounds: what the service refuses before reading a request, and how long it waits for
one.

Two layers apply the same rule (`head_refusal`):

* `BoundedASGIApplication` wraps the ASGI application `fleet serve` runs. It reads the whole body
  itself, within `BODY_READ_TIMEOUT` seconds and `MAX_BODY_BYTES` bytes, before any of Django's
  code (or a thread) is involved, so a client that trickles its body holds no worker; a chunked
  body is read like any other and handed on with its real length.
* `RequestBoundsMiddleware` is the first Django middleware, for every other way in (the test
  client, a WSGI server): a WSGI server cannot hand over a chunked body with a length, so there
  it is refused with 411.

Every refusal is an `ErrorResponse` (code `invalid`): 408 (body too slow), 411 (no length), 413
(body too large, refused without reading it), 414 (URL too long). Header read timeouts belong to
the HTTP server (granian's `header_read_timeout`, see `fleet serve`).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse

from fleet.core import requestlog
from fleet.core.error_schema import ErrorCode
from fleet.core.errors import error_body

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


def limit(name: str) -> Any:
    return settings.REQUEST_BOUNDS[name]


def head_refusal(
    *, path: str, query: str, content_length: str | None, chunked: bool, body_buffered: bool
) -> tuple[int, str] | None:
    """(status, detail) when a request must be refused on its request line and headers alone."""
    url_bytes = len(path.encode("utf-8", "surrogateescape")) + (len(query) + 1 if query else 0)
    if url_bytes > limit("MAX_URL_BYTES"):
        return 414, f"The URL is {url_bytes} bytes long; at most {limit('MAX_URL_BYTES')} are accepted."
    if content_length not in (None, ""):
        try:
            length = int(content_length)
        except ValueError:
            return 400, "Content-Length is not a number."
        if length < 0:
            return 400, "Content-Length is not a number."
        if length > limit("MAX_BODY_BYTES"):
            return 413, _too_large(length)
    elif chunked and not body_buffered:
        return 411, "Send the request body with a Content-Length (chunked bodies are not read here)."
    return None


def _too_large(length: int | str) -> str:
    return f"The request body is {length} bytes; at most {limit('MAX_BODY_BYTES')} are accepted."


def refusal_response(status: int, detail: str) -> JsonResponse:
    return JsonResponse(error_body(detail, ErrorCode.INVALID), status=status)


class RequestBoundsMiddleware:
    """The first middleware: applies `head_refusal` to requests that did not come through
    `BoundedASGIApplication` (which has already applied it)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        meta = request.META
        refusal = head_refusal(
            path=request.path,
            query=meta.get("QUERY_STRING", ""),
            content_length=meta.get("CONTENT_LENGTH"),
            chunked="chunked" in meta.get("HTTP_TRANSFER_ENCODING", "").lower(),
            body_buffered=False,
        )
        if refusal is not None:
            return refusal_response(*refusal)
        return self.get_response(request)


class BoundedASGIApplication:
    """ASGI middleware: refuse what `head_refusal` refuses, then read the body whole (bounded in
    size and time) before handing the request to Django."""

    def __init__(self, app: Any) -> None:  # an ASGI application
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        headers = {name.lower(): value for name, value in scope["headers"]}
        request_id = requestlog.request_id_of(headers.get(b"x-request-id", b"").decode("latin-1"))

        async def refuse(status: int, detail: str) -> None:
            await _send_error(send, status, detail, request_id)
            requestlog.refusal_observed(
                request_id=request_id,
                method=scope.get("method", ""),
                path=scope.get("path", ""),
                status=status,
                seconds=time.perf_counter() - started,
                code=ErrorCode.INVALID,
            )

        chunked = b"chunked" in headers.get(b"transfer-encoding", b"").lower()
        content_length = None if chunked else headers.get(b"content-length", b"").decode("latin-1") or None
        refusal = head_refusal(
            path=scope.get("path", ""),
            query=scope.get("query_string", b"").decode("latin-1"),
            content_length=content_length,
            chunked=chunked,
            body_buffered=True,
        )
        if refusal is not None:
            await refuse(*refusal)
            return
        body = bytearray()
        try:
            async with asyncio.timeout(limit("BODY_READ_TIMEOUT")):
                more = True
                while more:
                    message = await receive()
                    if message["type"] == "http.disconnect":
                        return
                    body += message.get("body", b"")
                    if len(body) > limit("MAX_BODY_BYTES"):
                        await refuse(413, _too_large(f"more than {len(body)}"))
                        return
                    more = message.get("more_body", False)
        except TimeoutError:
            seconds = limit("BODY_READ_TIMEOUT")
            await refuse(408, f"The request body did not arrive within {seconds:g} s.")
            return
        if chunked:
            scope = dict(scope)
            scope["headers"] = [
                *((n, v) for n, v in scope["headers"] if n.lower() not in (b"transfer-encoding", b"content-length")),
                (b"content-length", str(len(body)).encode()),
            ]
        await self.app(scope, _replay(bytes(body), receive), send)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A `receive` that hands over the buffered body once, then waits on the connection (for the
    disconnect Django listens for)."""
    delivered = False

    async def replayed() -> Message:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed


async def _send_error(send: Send, status: int, detail: str, request_id: str) -> None:
    content = json.dumps(error_body(detail, ErrorCode.INVALID)).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(content)).encode()),
                (b"connection", b"close"),
                (requestlog.HEADER.lower().encode(), request_id.encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": content})
