"""Synchronous JetStream helpers for Spark tests: set up streams, publish, inspect.

Spark tests are synchronous (PySpark blocks), so each helper opens a nats-py connection in a
short `asyncio.run`. They deliberately use nats-py's public API and plain API requests, not
the connector, so that what the connector wrote is checked by an independent path.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import nats

T = TypeVar("T")


@dataclass(frozen=True)
class Stored:
    seq: int
    subject: str
    data: bytes
    header: bytes  # the raw stored header block, b"" when none


@dataclass(frozen=True)
class JetStream:
    """A server under test: its URL and what it is ('brook' or 'nats-server')."""

    url: str
    kind: str

    def run(self, fn: Callable[[Any], Awaitable[T]]) -> T:
        async def go() -> T:
            nc = await nats.connect(self.url, allow_reconnect=False)
            try:
                return await fn(nc)
            finally:
                await nc.close()

        return asyncio.run(go())

    def add_stream(self, name: str, subjects: Sequence[str], **config: Any) -> None:
        config.setdefault("allow_direct", True)

        async def go(nc: Any) -> None:
            await nc.jetstream().add_stream(name=name, subjects=list(subjects), **config)

        self.run(go)

    def publish(
        self,
        messages: Sequence[tuple[str, bytes] | tuple[str, bytes, dict[str, str]]],
    ) -> list[int]:
        """Publish in order, acknowledged; returns the sequences."""

        async def go(nc: Any) -> list[int]:
            js = nc.jetstream()
            seqs: list[int] = []
            for start in range(0, len(messages), 200):
                chunk = messages[start : start + 200]
                acks = await asyncio.gather(
                    *(js.publish(m[0], m[1], headers=m[2] if len(m) > 2 else None) for m in chunk)
                )
                seqs.extend(a.seq for a in acks)
            return seqs

        return self.run(go)

    def fill(self, subject: str, count: int, start: int = 1) -> list[int]:
        return self.publish([(subject, f"m{i}".encode()) for i in range(start, start + count)])

    def api(self, subject: str, body: dict[str, Any] | None = None) -> Any:
        async def go(nc: Any) -> Any:
            payload = json.dumps(body).encode() if body is not None else b""
            reply = await nc.request(subject, payload, timeout=10)
            return json.loads(reply.data)

        return self.run(go)

    def state(self, stream: str) -> dict[str, Any]:
        return dict(self.api(f"$JS.API.STREAM.INFO.{stream}")["state"])

    def purge(self, stream: str, **body: Any) -> None:
        answer = self.api(f"$JS.API.STREAM.PURGE.{stream}", body or None)
        assert answer.get("success"), answer

    def delete(self, stream: str, seq: int) -> None:
        answer = self.api(f"$JS.API.STREAM.MSG.DELETE.{stream}", {"seq": seq})
        assert answer.get("success"), answer

    def stored(self, stream: str) -> list[Stored]:
        """Every message of the stream, via the JSON message-get API."""
        state = self.state(stream)
        out = []
        seq = max(int(state["first_seq"]), 1)
        while seq <= int(state["last_seq"]):
            answer = self.api(f"$JS.API.STREAM.MSG.GET.{stream}", {"seq": seq, "next_by_subj": ">"})
            if "error" in answer:
                break
            msg = answer["message"]
            out.append(
                Stored(
                    seq=int(msg["seq"]),
                    subject=msg["subject"],
                    data=base64.b64decode(msg.get("data", "")),
                    header=base64.b64decode(msg.get("hdrs", "")),
                )
            )
            seq = int(msg["seq"]) + 1
        return out
