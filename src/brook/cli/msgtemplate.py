"""Message bodies and headers as the `nats` CLI builds them for `pub`, `req`, `reply` and
`bench`: `K:V` header arguments and the template functions of its bodies.

The `nats` CLI runs bodies (and header values) through Go's text/template with a few
functions; the forms people use are the bare calls, which are what Brook expands:

    {{Count}} {{Cnt}} {{.Count}}   the message number (1, 2, ...)
    {{Time}}                       the current time, Go's Kitchen layout (3:04PM)
    {{TimeStamp}}                  the current time, RFC 3339
    {{Unix}} {{UnixNano}}          seconds / nanoseconds since 1970
    {{ID}}                         a unique ID (a NUID, as nats.go's)
    {{Random 10 100}}              a random string of 10 to 100 letters and digits
    {{Request}} {{.Request}}       the request's body (`reply` only)

Anything else between `{{ }}` (pipelines, conditionals) is not Go template syntax Brook
knows: the text is left as written and `TemplateError` says which action, as the `nats`
CLI keeps the unparsed body and logs the parse error.
"""

from __future__ import annotations

import datetime
import random
import re
import string
import time
from collections.abc import Callable, Sequence

_ACTION = re.compile(r"{{-?\s*(.*?)\s*-?}}")
_RANDOM = re.compile(r"Random\s+(\d+)\s+(\d+)")
_LETTERS = string.ascii_letters + string.digits


class TemplateError(ValueError):
    """A `{{ }}` action that is not one of the template functions."""


def expand(text: str, count: int, request: str | None = None) -> str:
    """`text` with its template actions replaced for message number `count` (and the
    request's body, for replies). Raises `TemplateError` naming an unknown action; text
    without `{{` is returned as it is."""
    if "{{" not in text:
        return text
    now = time.time_ns()
    local = datetime.datetime.fromtimestamp(now / 1e9).astimezone()
    simple: dict[str, Callable[[], str]] = {
        "Count": lambda: str(count),
        "Cnt": lambda: str(count),
        "Unix": lambda: str(now // 1_000_000_000),
        "UnixNano": lambda: str(now),
        "TimeStamp": lambda: local.isoformat(timespec="seconds").replace("+00:00", "Z"),
        "Time": lambda: local.strftime("%I:%M%p").lstrip("0"),
        "ID": _nuid,
    }
    if request is not None:
        simple["Request"] = lambda: request

    def action(match: re.Match[str]) -> str:
        name = match.group(1)
        field = name[1:] if name.startswith(".") else name
        if field in simple:
            return simple[field]()
        random_call = _RANDOM.fullmatch(name)
        if random_call:
            low, high = int(random_call.group(1)), int(random_call.group(2))
            return random_string(low, high)
        raise TemplateError(f"unknown template action {{{{{name}}}}}")

    return _ACTION.sub(action, text)


def expand_or_keep(text: str, count: int, warn: Callable[[str], None], what: str) -> str:
    """`expand`, or `text` unchanged after `warn("could not parse <what> template: ...")`."""
    try:
        return expand(text, count)
    except TemplateError as exc:
        warn(f"could not parse {what} template: {exc}")
        return text


def random_string(low: int, high: int) -> str:
    """Letters and digits, `low` to `high` long (natscli's `Random`)."""
    if high < low:
        low, high = high, low
    return "".join(random.choices(_LETTERS, k=random.randint(low, high)))


def _nuid() -> str:
    from nats.nuid import NUID

    return NUID().next().decode()


def parse_headers(items: Sequence[str], count: int = 0) -> dict[str, str]:
    """`-H K:V` arguments as headers: split at the first colon, both sides trimmed, the
    value templated with message number `count`. A later value of a key replaces an
    earlier one (nats-py's headers hold one value per key). Raises ValueError on an item
    without a colon or with an empty key, as the `nats` CLI refuses it."""
    headers: dict[str, str] = {}
    for item in items:
        key, colon, value = item.partition(":")
        if not colon or not key.strip():
            raise ValueError(f"invalid header {item!r} (expected K:V)")
        try:
            headers[key.strip()] = expand(value.strip(), count)
        except TemplateError as exc:
            raise ValueError(f"failed to parse Header template for {key.strip()}: {exc}") from None
    return headers
