"""The value readers of the config format: each checks one parsed value's type and shape
and says what was expected where (the dotted key path, the file's line), so every block's
reader (`conf_*.py`) reports a wrong value the same way; and `block_entries`, which walks a
block's keys and refuses those it does not know."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Collection, Iterator, Mapping

from brook.config.conf_syntax import SuffixedInt, parse_size
from brook.config.settings import ConfigError
from brook.durations import parse_seconds

_KINDS = ((bool, "boolean"), (int, "integer"), (float, "number"), (str, "string"))


def describe(v: object) -> str:
    if isinstance(v, list | dict):
        return "an array" if isinstance(v, list) else "a block"
    kind = next((name for t, name in _KINDS if isinstance(v, t)), type(v).__name__)
    return f"{kind} {v!r}"


def bad(where: str, expected: str, v: object) -> ConfigError:
    return ConfigError(f"{where}: expected {expected}, got {describe(v)}")


def read_int(where: str, v: object) -> int:
    if isinstance(v, int) and not isinstance(v, bool):
        return int(v)
    raise bad(where, "an integer", v)


def read_str(where: str, v: object) -> str:
    if isinstance(v, str):
        return v
    raise bad(where, "a string", v)


def read_bool(where: str, v: object) -> bool:
    if isinstance(v, bool):
        return v
    raise bad(where, "a boolean (true or false)", v)


def read_size(where: str, v: object) -> int:
    if isinstance(v, str):
        with contextlib.suppress(ValueError):
            return parse_size(v)
    elif isinstance(v, int) and not isinstance(v, bool):
        return int(v)
    raise bad(where, "a size (bytes, or like 64KB, 1MB, 1G)", v)


def read_duration(where: str, v: object) -> float:
    text = v.text if isinstance(v, SuffixedInt) else v
    if isinstance(text, str):
        with contextlib.suppress(ValueError):
            return parse_seconds(text)
    elif isinstance(text, int | float) and not isinstance(text, bool):
        return float(text)
    raise bad(where, "a duration (seconds, or like 2s, 500ms, 1m)", v)


def read_block(where: str, v: object) -> Mapping[str, object]:
    if isinstance(v, dict):
        return v
    raise bad(where, "a block { ... }", v)


def block_entries(
    block: Mapping[str, object], path: str, known: Collection[str]
) -> Iterator[tuple[str, str, object]]:
    """Yield (key, dotted path, value) for known keys; reject any other by its full path
    and, for parsed text, the file and line it is on."""
    used: Collection[str] = getattr(block, "used_vars", ())
    for raw_key, value in block.items():
        key = str(raw_key).lower()
        where = f"{path}.{key}" if path else key
        if key in known:
            yield key, where, value
        elif key not in used:
            raise ConfigError(f"unknown configuration key {where!r}{on_line(block, key)}")


def on_line(block: Mapping[str, object], key: str) -> str:
    """' (line N)' where the parsed text put `key`; '' for blocks not read from text."""
    line = getattr(block, "lines", {}).get(key)
    return f" (line {line})" if line else ""


def host_port(where: str, v: object) -> tuple[str | None, int]:
    if isinstance(v, int) and not isinstance(v, bool):
        return None, int(v)
    if isinstance(v, str):
        host, _, port = v.rpartition(":")
        if re.fullmatch(r"-?[0-9]+", port, re.ASCII):  # -1: any free port, as nats-server
            host = host.removeprefix("[").removesuffix("]")  # [::1]:4222
            return host or None, int(port)
    raise bad(where, "'host:port', ':port' or a port number", v)


def go_type(v: object) -> str:
    """Go's name for the type of a parsed value (nats-server's `%T`)."""
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int):
        return "int64"
    if isinstance(v, float):
        return "float64"
    if isinstance(v, str):
        return "string"
    return "[]interface {}" if isinstance(v, list) else "map[string]interface {}"


def read_array(where: str, kind: str, v: object) -> list[object]:
    if not isinstance(v, list):
        raise ConfigError(f"{where}: {kind} should be an array, got {go_type(v)}")
    return v
