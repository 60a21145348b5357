"""Reading typed values out of a parsed YAML document, recording every problem with where it is
(`sites[0].devices[3].hostname`) instead of stopping at the first: the fleet file reports them all."""

from __future__ import annotations

import math
import re
from typing import Any, Literal, overload

MISSING = object()


class Reader:
    """Reads typed values from nested YAML, recording problems instead of raising."""

    def __init__(self) -> None:
        self.problems: list[tuple[str, str]] = []

    def problem(self, where: str, message: str) -> None:
        self.problems.append((where, message))

    def has_problem_at(self, where: str) -> bool:
        """Whether `where` already has a problem (a value later checks should not judge again)."""
        return any(at == where for at, _ in self.problems)

    def mapping(self, value: Any, where: str, allowed: set[str]) -> dict[str, Any] | None:
        if not isinstance(value, dict):
            self.problem(where, f"must be a mapping, got {type_name(value)}")
            return None
        for key in value:
            if key not in allowed:
                self.problem(
                    f"{where}.{key}" if where else str(key), f"unknown key (allowed: {', '.join(sorted(allowed))})"
                )
        return value

    def items(self, parent: dict[str, Any], key: str, where: str, required: bool = False) -> list[tuple[str, Any]]:
        at = f"{where}.{key}" if where else key
        value = parent.get(key, MISSING)
        if value is MISSING or value is None:
            if required:
                self.problem(at, "is required")
            return []
        if not isinstance(value, list):
            self.problem(at, f"must be a list, got {type_name(value)}")
            return []
        return [(f"{at}[{index}]", item) for index, item in enumerate(value)]

    @overload
    def string(
        self,
        parent: dict[str, Any],
        key: str,
        where: str,
        *,
        required: Literal[True] = True,
        pattern: str | None = None,
        max_length: int | None = None,
        choices: list[str] | None = None,
    ) -> str: ...

    @overload
    def string(
        self,
        parent: dict[str, Any],
        key: str,
        where: str,
        *,
        required: Literal[False],
        default: str,
        pattern: str | None = None,
        max_length: int | None = None,
        choices: list[str] | None = None,
        non_blank: bool = False,
    ) -> str: ...

    @overload
    def string(
        self,
        parent: dict[str, Any],
        key: str,
        where: str,
        *,
        required: Literal[False],
        default: None = None,
        pattern: str | None = None,
        max_length: int | None = None,
        choices: list[str] | None = None,
        non_blank: bool = False,
    ) -> str | None: ...

    def string(
        self,
        parent: dict[str, Any],
        key: str,
        where: str,
        *,
        required: bool = True,
        default: str | None = None,
        pattern: str | None = None,
        max_length: int | None = None,
        choices: list[str] | None = None,
        non_blank: bool = False,
    ) -> str | None:
        """The string at `parent[key]`, or, after recording the problem, the default — `""` for a
        required one (the document is refused anyway; `""` keeps the declarations typed)."""
        at = f"{where}.{key}"
        fallback = "" if required else default
        value = parent.get(key, MISSING)
        if value is MISSING or value is None:
            if required:
                self.problem(at, "is required")
            return fallback
        if not isinstance(value, str):
            self.problem(at, f"must be a string, got {type_name(value)}")
            return fallback
        if (required or non_blank) and not value.strip():
            self.problem(at, "must not be empty")
            return fallback
        if max_length is not None and len(value) > max_length:
            self.problem(at, f"must be at most {max_length} characters, got {len(value)}")
        if pattern is not None and not re.match(pattern, value):
            self.problem(at, f"{value!r} does not match {pattern}")
        if choices is not None and value not in choices:
            self.problem(at, f"{value!r} is not one of: {', '.join(choices)}")
        return value

    def boolean(self, parent: dict[str, Any], key: str, where: str, default: bool) -> bool:
        value = parent.get(key, MISSING)
        if value is MISSING or value is None:
            return default
        if not isinstance(value, bool):
            self.problem(f"{where}.{key}", f"must be true or false, got {type_name(value)}")
            return default
        return value

    def integer(self, parent: dict[str, Any], key: str, where: str, *, default: int, low: int, high: int) -> int:
        value = parent.get(key, MISSING)
        if value is MISSING or value is None:
            return default
        if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
            self.problem(f"{where}.{key}", f"must be a whole number from {low} to {high}, got {value!r}")
            return default
        return value

    def positive_number(self, parent: dict[str, Any], key: str, where: str) -> float | None:
        value = parent.get(key, MISSING)
        if value is MISSING or value is None:
            return None
        if not is_number(value) or value <= 0:
            self.problem(f"{where}.{key}", f"must be a positive finite number, got {value!r}")
            return None
        return float(value)

    def object(self, parent: dict[str, Any], key: str, where: str) -> dict[str, Any]:
        value = parent.get(key, MISSING)
        if value is MISSING or value is None:
            return {}
        if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
            self.problem(f"{where}.{key}", f"must be a mapping with string keys, got {type_name(value)}")
            return {}
        for path, problem in not_json(value, f"{where}.{key}"):
            self.problem(path, problem)
        return value


def type_name(value: Any) -> str:
    return {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean", type(None): "nothing"}.get(
        type(value), type(value).__name__
    )


def not_json(value: Any, where: str):
    """Values YAML can express but JSON cannot store (dates, NaN, infinities, non-string keys)."""
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                yield f"{where}.{key}", "keys must be strings"
            else:
                yield from not_json(item, f"{where}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from not_json(item, f"{where}[{index}]")
    elif isinstance(value, float) and not math.isfinite(value):
        yield where, "must be a finite number"
    elif value is not None and not isinstance(value, (str, int, float, bool)):
        yield where, f"must be a string, number, boolean, list or mapping, got {type_name(value)} (quote it)"


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
