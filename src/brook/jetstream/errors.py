"""JetStream API errors, served from one catalogue kept as data (`errors.json`).

Each entry mirrors nats-server's `server/errors.json`: an HTTP-like `code`, the
`err_code` clients switch on, and a description template whose `{placeholders}` are
filled per error. On the wire an error is exactly `{"code","err_code","description"}`
(wire reference §2.2, §11 item 13). Brook-only errors use err_code 19000-19999.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any


@cache
def catalogue() -> dict[str, tuple[int, int, str]]:
    raw = json.loads(resources.files("brook.jetstream").joinpath("errors.json").read_text())
    return {name: (int(v[0]), int(v[1]), str(v[2])) for name, v in raw.items() if name[0] != "_"}


class ApiError(Exception):
    def __init__(self, name: str, code: int, err_code: int, description: str) -> None:
        super().__init__(description)
        self.name = name
        self.code = code
        self.err_code = err_code
        self.description = description

    def to_json(self) -> dict[str, Any]:
        return {"code": self.code, "err_code": self.err_code, "description": self.description}


def api_error(name: str, **fields: object) -> ApiError:
    """The catalogue entry `name` with its description's placeholders filled from `fields`."""
    code, err_code, template = catalogue()[name]
    try:
        description = template.format(**fields)
    except KeyError as missing:  # a bug in Brook: never send a template's raw placeholder
        raise ValueError(f"api_error({name!r}) needs the field {missing}") from None
    return ApiError(name, code, err_code, description)
