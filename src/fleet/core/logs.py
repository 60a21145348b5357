"""Log lines: JSON, one object per line (python-json-logger), or plain text for a person at a
terminal (`FLEET_LOG_FORMAT=json|text|auto`; `auto`, the default, is text when stderr is a
terminal). Every record logged while a request is served carries that request's id, operation
and principal (`request_context`, installed as the log record factory by `CoreConfig.ready`).

Imported by the logging configuration, before the apps are loaded: it imports nothing of Django.
"""

from __future__ import annotations

import logging
import sys
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from pythonjsonlogger.json import JsonFormatter

#: The request attributes a record carries while a request is served.
REQUEST_FIELDS = ("request_id", "operation", "principal")


@dataclass
class RequestContext:
    """What every log line of one request says about it."""

    request_id: str
    operation: str | None = None
    principal: str | None = None
    error_code: str | None = None


request_context: ContextVar[RequestContext | None] = ContextVar("fleet_request", default=None)


def install_record_factory() -> None:
    """Make every log record created during a request carry its id, operation and principal —
    whichever logger or handler (pytest's included) it goes to. Installed once."""
    previous = logging.getLogRecordFactory()
    if getattr(previous, "fleet_request_context", False):
        return

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        context = request_context.get()
        if context is not None:
            record.request_id = context.request_id
            record.operation = context.operation
            record.principal = context.principal
        return record

    factory.fleet_request_context = True  # type: ignore[attr-defined]
    logging.setLogRecordFactory(factory)


def log_format(requested: str) -> str:
    """`json` or `text` for `FLEET_LOG_FORMAT` (`auto`: text when stderr is a terminal)."""
    requested = (requested or "auto").strip().lower()
    if requested not in {"json", "text", "auto"}:
        raise ValueError(f"FLEET_LOG_FORMAT must be json, text or auto, not {requested!r}")
    if requested == "auto":
        return "text" if sys.stderr.isatty() else "json"
    return requested


class JsonLines(JsonFormatter):
    """`{"time", "level", "logger", "message", "request_id", …}`; a traceback is `exc_info`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("fmt", ["levelname", "name", "message"])
        kwargs.setdefault("rename_fields", {"levelname": "level", "name": "logger"})
        kwargs.setdefault("timestamp", "time")
        super().__init__(*args, **kwargs)


class TextLines(logging.Formatter):
    """`time LEVEL logger [request id] message` for people."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s%(request)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        request_id = getattr(record, "request_id", None)
        record.request = f" [{request_id}]" if request_id else ""
        return super().format(record)
