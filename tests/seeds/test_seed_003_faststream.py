"""Seed 003, FastStream's NATS JetStream page: its app run as a process against the server.

The app (examples/s003_faststream.py) declares stream "stream", subscribes to `js-subject` on it
with deliver policy `new`, and after start-up publishes "Hi!" twice (once plain, once with the
stream verified by a JetStream publish); the handler logs each message. It runs until Ctrl+C.
Checked: FastStream's log (both messages received, logged and processed; a graceful shutdown),
and the stream and consumer state. A second run of the same app finds the stream it declared
already there (FastStream then updates it, as the page says) and handles only its own messages.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import nats
import pytest
from nats.js.api import DeliverPolicy

from tests.seeds.conftest import Examples, Script, wait_until

pytest.importorskip("faststream.nats", reason="needs faststream[nats] (the dev extra)")

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
async def js(server_url: str) -> AsyncIterator[Any]:
    nc = await nats.connect(server_url, allow_reconnect=False)
    yield nc.jetstream()
    await nc.close()


def logged(app: Script, text: str) -> int:
    return sum(line.endswith(f" - {text}") for line in app.lines)


async def run_app_once(examples: Examples, js: Any, last_seq: int) -> Script:
    """Start the app and wait until it has handled both of its messages and its consumer (the
    one with a subscriber) has seen both acknowledged."""
    app = await examples.start("s003_faststream")
    await app.wait_for("FastStream app started successfully!", timeout=20)
    await wait_until(lambda: logged(app, "Processed") == 2)
    assert logged(app, "Received") == 2
    assert logged(app, "Hi!") == 2
    for _ in range(100):
        (consumer,) = [c for c in await js.consumers_info("stream") if c.push_bound]
        if consumer.ack_floor.stream_seq == last_seq:
            break
        await asyncio.sleep(0.05)
    assert consumer.config.deliver_policy == DeliverPolicy.NEW
    assert consumer.delivered.consumer_seq == 2
    assert consumer.ack_floor.stream_seq == last_seq  # FastStream acks after the handler
    assert consumer.num_ack_pending == 0
    return app


async def test_faststream_jetstream_app(examples: Examples, js: Any) -> None:
    app = await run_app_once(examples, js, last_seq=2)
    info = await js.stream_info("stream")
    assert info.config.subjects == ["js-subject"]
    assert (info.state.messages, info.state.last_seq) == (2, 2)
    assert await app.interrupt() == 0
    assert "FastStream app shut down gracefully." in app.output
    assert "Error" not in app.output
    assert "Traceback" not in app.output

    again = await run_app_once(examples, js, last_seq=4)  # policy "new": only its own two
    assert await again.interrupt() == 0
    assert "Error" not in again.output
    assert "Traceback" not in again.output
