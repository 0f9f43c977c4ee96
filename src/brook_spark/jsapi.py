"""The few JetStream API calls the connector makes, as plain JSON requests over nats-py.

Only public, long-standing endpoints are used, so any JetStream server answers them: stream
info (first and last sequence, `allow_direct`), message get by start time, consumer create
and delete for the fallback reader. Errors come back as `JetStreamError` with the server's
code and description, turned into messages that say what to change.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import nats.errors

from brook_spark.options import format_rfc3339_ns
from brook_spark.wire import RawClient

STREAM_NOT_FOUND = 10059
NO_MESSAGE_FOUND = 10037


class JetStreamError(RuntimeError):
    def __init__(self, code: int, err_code: int, description: str, context: str) -> None:
        super().__init__(f"{context}: {description} (code {code}, err_code {err_code})")
        self.code = code
        self.err_code = err_code
        self.description = description


@dataclass(frozen=True)
class StreamState:
    first_seq: int
    last_seq: int
    messages: int
    allow_direct: bool

    @property
    def first(self) -> int:
        """The lowest sequence that may still exist (an unused stream reports 0)."""
        return max(self.first_seq, 1)


async def request(nc: RawClient, subject: str, body: dict[str, Any], timeout_s: float) -> Any:
    payload = json.dumps(body).encode() if body else b""
    try:
        reply = await nc.request(subject, payload, timeout=timeout_s)
    except nats.errors.NoRespondersError:
        raise ConnectionError(
            f"no JetStream responded on {subject}: is JetStream enabled on the server?"
        ) from None
    except nats.errors.TimeoutError:
        raise TimeoutError(f"JetStream did not answer {subject} within {timeout_s}s") from None
    return json.loads(reply.data)


def _raise_for_error(answer: Any, context: str) -> None:
    error = answer.get("error") if isinstance(answer, dict) else None
    if error:
        raise JetStreamError(
            int(error.get("code", 0)),
            int(error.get("err_code", 0)),
            str(error.get("description", "unknown error")),
            context,
        )


async def stream_state(nc: RawClient, stream: str, timeout_s: float) -> StreamState:
    answer = await request(nc, f"$JS.API.STREAM.INFO.{stream}", {}, timeout_s)
    error = answer.get("error") if isinstance(answer, dict) else None
    if error and int(error.get("err_code", 0)) == STREAM_NOT_FOUND:
        raise JetStreamError(
            404, STREAM_NOT_FOUND, f"stream '{stream}' not found (option 'stream')", "stream info"
        )
    _raise_for_error(answer, f"stream info for '{stream}'")
    state = answer["state"]
    return StreamState(
        first_seq=int(state.get("first_seq", 0)),
        last_seq=int(state.get("last_seq", 0)),
        messages=int(state.get("messages", 0)),
        allow_direct=bool(answer["config"].get("allow_direct", False)),
    )


async def seq_at_time(nc: RawClient, stream: str, ts_ns: int, timeout_s: float) -> int | None:
    """The first sequence stored at or after `ts_ns`, or None when every message is older."""
    body = {"start_time": format_rfc3339_ns(ts_ns)}
    answer = await request(nc, f"$JS.API.STREAM.MSG.GET.{stream}", body, timeout_s)
    error = answer.get("error") if isinstance(answer, dict) else None
    if error and (int(error.get("err_code", 0)) == NO_MESSAGE_FOUND or error.get("code") == 404):
        return None
    _raise_for_error(answer, f"finding the first message after a time in '{stream}'")
    return int(answer["message"]["seq"])


async def create_consumer(
    nc: RawClient, stream: str, name: str, config: dict[str, Any], timeout_s: float
) -> int:
    """Create a named consumer; returns its initial `num_pending`."""
    body = {"stream_name": stream, "config": {"name": name, **config}, "action": "create"}
    answer = await request(nc, f"$JS.API.CONSUMER.CREATE.{stream}.{name}", body, timeout_s)
    _raise_for_error(answer, f"creating a reader consumer on '{stream}'")
    return int(answer.get("num_pending", 0))


async def delete_consumer(nc: RawClient, stream: str, name: str, timeout_s: float) -> None:
    answer = await request(nc, f"$JS.API.CONSUMER.DELETE.{stream}.{name}", {}, timeout_s)
    _raise_for_error(answer, f"deleting reader consumer '{name}'")
