"""Input handling shared by the thin API views."""

from __future__ import annotations

from typing import Any

from rest_framework.request import Request


def validated(serializer_class: type, request: Request, *, data: Any = None, **context: Any) -> Any:
    """Validate the request body (or `data`) with an input serializer; 400 on any problem."""
    if data is request.query_params:
        context.setdefault("typed_body", False)  # query strings carry only strings
    serializer = serializer_class(data=request.data if data is None else data, context={"request": request, **context})
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data
