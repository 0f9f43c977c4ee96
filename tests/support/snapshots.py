"""A stream backup and restore client that follows the protocol as the nats CLI (jsm.go) does.

Backup: `$JS.API.STREAM.SNAPSHOT.<stream>` with a deliver subject, then every chunk is
acknowledged (an empty message to its reply subject) as it arrives, until the empty message
that ends the snapshot. Restore: `$JS.API.STREAM.RESTORE.<stream>` with the backup's
`config` and `state`, then the data in chunks, each a request that waits for its ack, then an
empty request whose reply is the final `stream_create_response`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

RESTORE_CHUNK_BYTES = 64 * 1024  # jsm.go's


@dataclass
class Backup:
    response: dict[str, Any]  # the SNAPSHOT response (config and state, or an error)
    data: bytes = b""
    chunks: list[tuple[int, str | None]] = field(default_factory=list)  # (bytes, reply)
    end_headers: dict[str, str] | None = None  # of the empty message that ended it

    @property
    def meta(self) -> dict[str, Any]:
        """What jsm.go writes to backup.json."""
        return {"config": self.response["config"], "state": self.response["state"]}


async def backup(
    nc: Any, stream: str, *, ack: bool = True, timeout: float = 10.0, **request: Any
) -> Backup:
    inbox = nc.new_inbox()
    sub = await nc.subscribe(inbox)
    try:
        body = json.dumps({"deliver_subject": inbox, **request}).encode()
        reply = await nc.request(f"$JS.API.STREAM.SNAPSHOT.{stream}", body, timeout=timeout)
        out = Backup(json.loads(reply.data))
        if "error" in out.response:
            return out
        data = bytearray()
        while True:
            msg = await sub.next_msg(timeout=timeout)
            if not msg.data:
                out.end_headers = dict(msg.headers) if msg.headers else None
                break
            out.chunks.append((len(msg.data), msg.reply or None))
            data += msg.data
            if ack and msg.reply:
                await nc.publish(msg.reply, b"")
        out.data = bytes(data)
        return out
    finally:
        await sub.unsubscribe()


async def start_restore(nc: Any, stream: str, meta: dict[str, Any]) -> dict[str, Any]:
    reply = await nc.request(
        f"$JS.API.STREAM.RESTORE.{stream}", json.dumps(meta).encode(), timeout=5
    )
    response: dict[str, Any] = json.loads(reply.data)
    return response


async def send_chunks(nc: Any, deliver: str, data: bytes, chunk: int = RESTORE_CHUNK_BYTES) -> None:
    for i in range(0, len(data), chunk):
        ack = await nc.request(deliver, data[i : i + chunk], timeout=5)
        assert ack.data == b"", f"chunk at {i} answered {ack.data!r}"


async def restore(
    nc: Any, stream: str, meta: dict[str, Any], data: bytes, *, chunk: int = RESTORE_CHUNK_BYTES
) -> dict[str, Any]:
    """The final answer of a whole restore (or the RESTORE request's error)."""
    started = await start_restore(nc, stream, meta)
    if "error" in started:
        return started
    await send_chunks(nc, started["deliver_subject"], data, chunk)
    final = await nc.request(started["deliver_subject"], b"", timeout=60)
    result: dict[str, Any] = json.loads(final.data)
    return result
