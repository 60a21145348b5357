"""Serializer fields shared by the API.

JSON bodies are typed: DRF's stock fields coerce loose values (`"yes"` to True, `5` to `"5"`,
`"7"` to 7), which would let a buggy client's payload mean something it did not say. The
`Strict*` fields refuse a wrong JSON type with a 400 on that field. Form and multipart bodies
carry only strings, so there the stock (string-parsing) behaviour applies.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, ClassVar

from drf_spectacular.extensions import OpenApiSerializerFieldExtension
from drf_spectacular.plumbing import ResolvedComponent
from rest_framework import serializers
from rest_framework.request import Request

from fleet.core.parsers import storable_json_problem

if TYPE_CHECKING:
    from django.utils.functional import _StrOrPromise as StrOrPromise

FORM_MEDIA_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")


def is_form_request(request: Request | None) -> bool:
    return request is not None and (request.content_type or "").split(";")[0].strip() in FORM_MEDIA_TYPES


class _StrictJsonMixin(serializers.Field):
    json_types: tuple[type, ...] = ()
    default_error_messages: ClassVar[dict[str, StrOrPromise]] = {"wrong_type": "Expected {expected}, got {actual}."}
    expected = ""

    def _typed_body(self) -> bool:
        context = getattr(self, "context", {})
        return context.get("typed_body", not is_form_request(context.get("request")))

    def to_internal_value(self, data: Any) -> Any:
        if self._typed_body() and (
            isinstance(data, bool) != (bool in self.json_types) or not isinstance(data, self.json_types)
        ):
            self.fail("wrong_type", expected=self.expected, actual=_json_type(data))
        return super().to_internal_value(data)


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


class StrictBooleanField(_StrictJsonMixin, serializers.BooleanField):
    json_types = (bool,)
    expected = "a boolean"


class StrictCharField(_StrictJsonMixin, serializers.CharField):
    json_types = (str,)
    expected = "a string"


class StrictRegexField(_StrictJsonMixin, serializers.RegexField):
    json_types = (str,)
    expected = "a string"


class StrictChoiceField(_StrictJsonMixin, serializers.ChoiceField):
    json_types = (str,)
    expected = "a string"


class StrictUUIDField(_StrictJsonMixin, serializers.UUIDField):
    json_types = (str,)
    expected = "a string (uuid)"


class StrictDateTimeField(_StrictJsonMixin, serializers.DateTimeField):
    json_types = (str,)
    expected = "a string (date-time)"


class StrictIntegerField(_StrictJsonMixin, serializers.IntegerField):
    json_types = (int,)
    expected = "an integer"


def number_out_of_range(value: int | float) -> bool:
    """A number every field takes must be a finite double: what comparisons, statistics and JSON
    readers on every side can hold (a 400-digit integer is not one)."""
    try:
        return not math.isfinite(float(value))
    except OverflowError:
        return True


class StrictNumberField(_StrictJsonMixin, serializers.FloatField):
    json_types = (int, float)
    expected = "a number"
    default_error_messages: ClassVar[dict[str, StrOrPromise]] = {
        "out_of_range": "Expected a finite number within ±1.8e308."
    }

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, (int, float)) and not isinstance(data, bool) and number_out_of_range(data):
            self.fail("out_of_range")
        value = super().to_internal_value(data)
        return data if self._typed_body() else value  # keep 8 as 8, not 8.0


class StorableJSONField(serializers.JSONField):
    """JSON that PostgreSQL can store. A JSON body is checked by its parser
    (`fleet.core.parsers.StorableJSONParser`), but a form-encoded body carries the field as JSON
    text that the field decodes itself: NUL, lone surrogates and numbers out of range are refused
    here too, naming where."""

    default_error_messages = {"unstorable": "{problem}"}

    def to_internal_value(self, data: Any) -> Any:
        value = super().to_internal_value(data)
        problem = storable_json_problem(value, self.field_name or "")
        if problem:
            self.fail("unstorable", problem=problem)
        return value


class JSONObjectField(StorableJSONField):
    """A JSON object (not a list or a scalar)."""

    default_error_messages = {"not_object": "Expected an object, got {actual}."}

    def to_internal_value(self, data: Any) -> Any:
        value = super().to_internal_value(data)
        if not isinstance(value, dict):
            self.fail("not_object", actual=_json_type(value))
        return value


class MetricDisplayValueField(serializers.Field):
    """A number or a string (a threshold, or a metric's value). NaN and infinities are refused:
    JSON cannot carry them and a threshold must be comparable."""

    default_error_messages = {"invalid": "Expected a number or a string, got {actual}."}

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, bool) or not isinstance(data, (int, float, str)):
            self.fail("invalid", actual=_json_type(data))
        if not isinstance(data, str) and number_out_of_range(data):
            self.fail("invalid", actual="a number out of range (not a finite double)")
        return data

    def to_representation(self, value: Any) -> Any:
        return value


class MetricDisplayValueExtension(OpenApiSerializerFieldExtension):
    """Documents MetricDisplayValueField as the spec's `MetricDisplayValue` component."""

    target_class = MetricDisplayValueField
    match_subclasses = True

    def map_serializer_field(self, auto_schema, direction):
        component = ResolvedComponent(
            name="MetricDisplayValue",
            type=ResolvedComponent.SCHEMA,
            object="MetricDisplayValue",
            schema={"anyOf": [{"type": "number"}, {"type": "string"}], "nullable": True},
        )
        auto_schema.registry.register_on_missing(component)
        return component.ref
