"""The client commands `brook` dispatches to (ADR 0043): `brook NAME ARGS...` runs
`MODULE.FUNCTION(ARGS)`, whose exit status is the process's. A command's module is
imported only when it runs, so `brook serve` never loads nats-py or rich.

A new command group is one line here (and one in main.py's USAGE).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import cast

CLIENT_COMMANDS: dict[str, tuple[str, str]] = {
    "pub": ("brook.cli.pubsub", "pub_command"),
    "publish": ("brook.cli.pubsub", "pub_command"),
    "sub": ("brook.cli.pubsub", "sub_command"),
    "subscribe": ("brook.cli.pubsub", "sub_command"),
    "req": ("brook.cli.pubsub", "req_command"),
    "request": ("brook.cli.pubsub", "req_command"),
    "reply": ("brook.cli.pubsub", "reply_command"),
    "bench": ("brook.cli.bench", "bench_command"),
    "server": ("brook.cli.servercmd", "server_command"),
    "kv": ("brook.cli.kv", "kv_command"),
    "object": ("brook.cli.objects", "object_command"),
    "obj": ("brook.cli.objects", "object_command"),
    "stream": ("brook.cli.stream", "stream_command"),
    "str": ("brook.cli.stream", "stream_command"),
    "consumer": ("brook.cli.consumer", "consumer_command"),
    "con": ("brook.cli.consumer", "consumer_command"),
}


def client_command(name: str) -> Callable[[list[str]], int] | None:
    """The entry function of client command `name`, or None when there is no such one."""
    target = CLIENT_COMMANDS.get(name)
    if target is None:
        return None
    module, function = target
    return cast(Callable[[list[str]], int], getattr(importlib.import_module(module), function))
