"""Typed access to the fields of a JSON request body.

JetStream requests arrive as JSON objects whose fields may be missing, `null` ("not set")
or of the wrong type; a wrong type must become an error reply, never an exception
escaping a handler. Each caller says how to report a wrong type (an API error 10025 for
the JSON API, a `408 Bad Request` status for direct get).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from brook.jetstream.errors import ApiError, api_error

T = TypeVar("T")
ErrorFactory = Callable[[str], Exception]

_KIND_NAMES = {
    int: "an integer",
    str: "a string",
    bool: "a boolean",
    list: "an array",
    dict: "an object",
}


def invalid_json(reason: str) -> ApiError:
    return api_error("INVALID_JSON", err=reason)


def get_field(body: dict[str, Any], key: str, kind: type[T], default: T, error: ErrorFactory) -> T:
    """`body[key]` if it has type `kind` (bools are not integers), `default` if absent or null."""
    value = body.get(key)
    if value is None:
        return default
    ok = (
        isinstance(value, int) and not isinstance(value, bool)
        if kind is int
        else isinstance(value, kind)
    )
    if not ok:
        expected = _KIND_NAMES.get(kind, kind.__name__)
        raise error(f"{key}: expected {expected}, got {type(value).__name__}")
    return value  # type: ignore[no-any-return]
