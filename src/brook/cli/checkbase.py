"""What the `brook server check` checks share (servercheck.py, checkjs.py): a JetStream API
request, Go's way of printing durations, the age of a server timestamp, and a connection
whose failure becomes the check's CRITICAL verdict."""

from __future__ import annotations

import argparse
import datetime
from collections.abc import Callable, Coroutine
from typing import Any

from brook.cli.base import JS_API_PREFIX, CliError, connect, describe, request_json
from brook.cli.checkresult import CheckResult
from brook.durations import go_string

Check = Callable[[argparse.Namespace, CheckResult], Coroutine[Any, Any, None]]


async def js_api(
    nc: Any, args: argparse.Namespace, subject: str, request: dict[str, Any] | None = None
) -> dict[str, Any]:
    import json

    body = b"" if request is None else json.dumps(request).encode()
    return await request_json(nc, f"{JS_API_PREFIX}.{subject}", body, float(args.timeout))


def go_duration(seconds: float) -> str:
    """Seconds as Go prints a time.Duration ("1.5ms", "2s")."""
    return go_string(int(seconds * 1e9))


def seconds_since(stamp: str | None) -> float | None:
    if not stamp or stamp.startswith("0001-"):
        return None
    text = stamp.rstrip("Z")
    whole, _, fraction = text.partition(".")
    moment = datetime.datetime.fromisoformat(whole).replace(tzinfo=datetime.UTC)
    seconds = (datetime.datetime.now(datetime.UTC) - moment).total_seconds()
    return seconds - float(f"0.{fraction or '0'}")


class Connected:
    """`async with Connected(args, result, prefix) as nc`: a connection, or None after
    recording `prefix: <reason>` as critical; a server failure inside becomes critical."""

    def __init__(self, args: argparse.Namespace, result: CheckResult, prefix: str) -> None:
        self.args, self.result, self.prefix = args, result, prefix
        self.nc: Any = None

    async def __aenter__(self) -> Any:
        try:
            self.nc = await connect(self.args)
        except CliError as exc:
            self.result.critical(f"{self.prefix}: {str(exc).split(': ', 1)[-1]}")
        return self.nc

    async def __aexit__(self, kind: Any, exc: BaseException | None, tb: Any) -> bool:
        if self.nc is not None:
            await self.nc.close()
        if exc is not None and isinstance(exc, Exception):
            self.result.critical(f"{self.prefix}: {describe(exc)}")
            return True
        return False
