"""What `brook stream` and `brook consumer` share on top of the CLI layer: paged JetStream
listings, configuration files, nanosecond durations, message headers and bodies for
people and for `--json`.

Both groups speak the JetStream API directly (`Ctx.api`) rather than through nats-py's
dataclasses, so `--json` prints the server's own documents and a field nats-py does not
know yet (a newer server's) is neither dropped nor refused.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
from pathlib import Path
from typing import Any

from brook.cli.base import CliError, Ctx

NS_PER_S = 1_000_000_000


async def paged(ctx: Ctx, subject: str, key: str, request: dict[str, Any]) -> list[Any]:
    """Every item of a paged listing (`STREAM.LIST`, `CONSUMER.NAMES`, ...): requests
    with a growing `offset` until `total` items have come (or a page is empty)."""
    items: list[Any] = []
    while True:
        reply = await ctx.api(subject, {**request, "offset": len(items)})
        page = reply.get(key) or []
        items.extend(page)
        if not page or len(items) >= int(reply.get("total") or 0):
            return items


def load_json_file(path: str, what: str) -> dict[str, Any]:
    """A `--config FILE`: one JSON object."""
    try:
        value = json.loads(Path(path).read_text())
    except OSError as exc:
        raise CliError(f"cannot read {path}: {exc.strerror}") from None
    except ValueError as exc:
        raise CliError(f"{path} is not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise CliError(f"{path}: a {what} configuration is a JSON object")
    return value


async def write_config(ctx: Ctx, path: str, config: dict[str, Any]) -> int:
    """`add --output FILE`: the configuration the flags describe, saved for a later
    `--config FILE` (as `nats ... add --output`); nothing is created."""
    text = json.dumps(config, indent=2) + "\n"
    try:
        await asyncio.to_thread(Path(path).write_text, text)
    except OSError as exc:
        raise CliError(f"cannot write {path}: {exc.strerror}") from None
    if ctx.out.json_mode:
        ctx.out.json(config)
    else:
        ctx.out.line(f"Configuration written to {path}")
    return 0


def metadata_arg(text: str) -> tuple[str, str]:
    """`--metadata KEY=VALUE`, as the `nats` CLI takes it."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"metadata is KEY=VALUE, not {text!r}")
    return key, value


def split_subjects(values: list[str] | None) -> list[str]:
    """`--subjects a b --subjects c,d`: the `nats` CLI splits on commas and spaces."""
    out: list[str] = []
    for value in values or []:
        out += [s for s in value.replace(",", " ").split() if s]
    return out


def ns(seconds: float) -> int:
    """The JetStream API's durations are nanoseconds."""
    return round(seconds * NS_PER_S)


def seconds(value: Any) -> float:
    return int(value or 0) / NS_PER_S


def without_type(reply: dict[str, Any]) -> dict[str, Any]:
    """An API response as the `nats` CLI prints it: the document without the response's
    `type` tag (`io.nats.jetstream.api.v1.stream_info_response`)."""
    return {k: v for k, v in reply.items() if k != "type"}


def parse_headers(block: bytes) -> list[tuple[str, str]]:
    """The `NATS/1.0` header block of a stored message: (name, value) pairs in order."""
    lines = block.decode("utf-8", "replace").split("\r\n")
    pairs: list[tuple[str, str]] = []
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep and name:
            pairs.append((name.strip(), value.strip()))
    return pairs


def body_json(data: bytes) -> dict[str, Any]:
    """A message body in `--json` output: as text when it is UTF-8, always as base64."""
    try:
        text: str | None = data.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    return {"data": text, "data_b64": base64.b64encode(data).decode()}


def b64(value: Any) -> bytes:
    return base64.b64decode(value) if value else b""
