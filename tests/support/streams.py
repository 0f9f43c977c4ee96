"""A `Stream` over a memory store with a manual clock, for unit tests of ingest rules: no
sockets, no sleeping. PubAcks are collected as decoded JSON."""

from __future__ import annotations

import json
from typing import Any

from brook.jetstream.models import parse_stream_config
from brook.jetstream.models.stream_config import StreamConfig
from brook.jetstream.store.memory import MemoryStore
from brook.jetstream.stream import Stream
from brook.protocol import headers as hdrs

SECOND = 1_000_000_000


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000 * SECOND

    def __call__(self) -> int:
        return self.now


def stream_config(**config: Any) -> StreamConfig:
    """The configuration of stream "S" on `s.>` in memory, with `config` on top."""
    body = {"name": "S", "subjects": ["s.>"], "storage": "memory", **config}
    return parse_stream_config(body, subject_name=body["name"])


def make(**config: Any) -> tuple[Stream, Clock, list[dict[str, Any]]]:
    """Stream "S" on `s.>` with `config` on top; returns it, its clock and its PubAcks."""
    clock = Clock()
    acks: list[dict[str, Any]] = []
    cfg = stream_config(**config)
    stream = Stream(
        cfg,
        MemoryStore(first_seq=cfg.first_seq or 1),
        now_ns=clock,
        send_ack=lambda reply, ack: acks.append(json.loads(ack)),
        committer=None,
        created_ns=clock.now,
    )
    return stream, clock, acks


def reopen(stream: Stream, clock: Clock, acks: list[dict[str, Any]] | None = None) -> Stream:
    """A new Stream over `stream`'s configuration and store, as after a restart; its
    PubAcks are added to `acks` (dropped without)."""

    def send_ack(reply: bytes, ack: bytes) -> None:
        if acks is not None:
            acks.append(json.loads(ack))

    return Stream(
        stream.config,
        stream.store,
        now_ns=clock,
        send_ack=send_ack,
        committer=None,
        created_ns=stream.created_ns,
    )


def publish(stream: Stream, subject: str, data: bytes = b"x", **headers: str) -> None:
    """Ingest as a client's PUB with a reply; `Nats_Msg_Id="x"` becomes `Nats-Msg-Id: x`."""
    block = hdrs.encode([(k.replace("_", "-"), v) for k, v in headers.items()]) if headers else None
    stream.ingest(subject.encode(), b"_INBOX.r", block, data)
