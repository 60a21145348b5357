"""Request parsers: JSON that PostgreSQL can store, or a 400.

Python's JSON reader accepts what PostgreSQL will not keep: NUL characters, lone UTF-16
surrogates, and numbers too large for a double (`1e999` becomes infinity). Caught here, such a
body is a `parse_error` naming where it is wrong, instead of a database error on write.
"""

from __future__ import annotations

import math
from typing import Any

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser


def storable_json_problem(value: Any, path: str = "") -> str | None:
    """Where (dotted path) and why `value` cannot be stored as jsonb/text, or None."""
    if isinstance(value, str):
        return _text_problem(value, path)
    if isinstance(value, float) and not math.isfinite(value):
        return f"{path or 'body'}: number out of range"
    if isinstance(value, dict):
        for key, item in value.items():
            child = f"{path}.{key}" if path else str(key)
            problem = _text_problem(key, f"{path or 'body'} (a key)") or storable_json_problem(item, child)
            if problem:
                return problem
    if isinstance(value, list):
        for index, item in enumerate(value):
            problem = storable_json_problem(item, f"{path}.{index}" if path else str(index))
            if problem:
                return problem
    return None


def _text_problem(text: str, path: str) -> str | None:
    if "\x00" in text:
        return f"{path or 'body'}: NUL characters are not allowed"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return f"{path or 'body'}: invalid Unicode (a lone surrogate)"
    return None


class StorableJSONParser(JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        data = super().parse(stream, media_type, parser_context)
        problem = storable_json_problem(data)
        if problem:
            raise ParseError(f"JSON parse error - {problem}")
        return data
