"""A live Brook server under hostile raw connections keeps serving a well-behaved client.

Hypothesis generates garbage and mutated protocol streams; each is sent over a raw TCP
connection (open, write the chunks, then half-close and read to EOF, abort with a reset,
or just close). After every example the well-behaved nats-py client still completes a
request/reply round trip, the server still accepts and serves a new connection, no
connection or subscription is left behind, and Brook logged no internal error.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import nats
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import brook
from brook.protocol import encoder

SERVICE = "fuzz.svc.echo"
GOOD_NAME = "good-client"
IO_TIMEOUT_S = 5.0
# Long enough for CONNECT options nested deeper than the recursion limit under Hypothesis
# (the current depth + 2000); the default 1000 applies in production.
LONG_CONTROL_LINE = 32 * 1024


@dataclass
class Env:
    server: Any
    good: Any  # nats.aio.client.Client
    errors: list[Exception]
    internal_subs: int  # the server's own subscriptions (the system services' imports)


@pytest.fixture
async def env() -> AsyncIterator[Env]:
    async with brook.serve(
        port=0, max_payload_bytes=4096, max_control_line_bytes=LONG_CONTROL_LINE
    ) as srv:
        errors: list[Exception] = []
        internal_subs = srv.router.sublist.count

        async def on_error(exc: Exception) -> None:
            errors.append(exc)

        good = await nats.connect(
            srv.url,
            name=GOOD_NAME,
            allow_reconnect=False,
            error_cb=on_error,
            connect_timeout=IO_TIMEOUT_S,
        )

        async def respond(msg: Any) -> None:
            if msg.reply:
                await msg.respond(b"echo:" + msg.data)

        await good.subscribe(SERVICE, cb=respond)
        await good.flush(timeout=int(IO_TIMEOUT_S))
        try:
            yield Env(srv, good, errors, internal_subs)
        finally:
            if not good.is_closed:
                await good.close()


# ---------------------------------------------------------------------------- hostile streams

tokens = st.sampled_from(
    [b"foo", b"foo.bar", b"*", b">", b"foo.*", b"fuzz.>", b"_INBOX.x", b"a.b.c", b"1", b"q"]
)
payload = st.binary(max_size=64) | st.sampled_from([b"", b"\r\n", b"PING\r\n", b"x" * 5000])
CONNECT_OPTIONS: list[dict[str, Any]] = [
    {"verbose": False, "pedantic": False, "headers": True},
    {"verbose": True, "pedantic": True},
    {"protocol": 1, "headers": True, "no_responders": True, "verbose": False},
    {"echo": False, "headers": True},
    {"no_responders": True},  # without headers: refused
    {"protocol": 2},
    {"verbose": "yes"},
    {"name": 7},
    {"user": "u", "pass": "p"},
    {},
]
connect_options = st.sampled_from(CONNECT_OPTIONS)


@st.composite
def valid_frame(draw: st.DrawFn) -> bytes:
    kind = draw(st.sampled_from(["connect", "pub", "hpub", "sub", "unsub", "ping", "pong"]))
    if kind == "connect":
        return encoder.connect(draw(connect_options))
    if kind == "pub":
        return encoder.pub(draw(tokens), draw(payload), draw(st.none() | tokens))
    if kind == "hpub":
        header = draw(st.sampled_from([b"NATS/1.0\r\nA: b\r\n\r\n", b"NATS/1.0\r\n\r\n", b"junk"]))
        return encoder.hpub(draw(tokens), header, draw(payload), draw(st.none() | tokens))
    if kind == "sub":
        return encoder.sub(draw(tokens), draw(tokens), draw(st.none() | tokens))
    if kind == "unsub":
        return encoder.unsub(draw(tokens), draw(st.none() | st.integers(0, 3)))
    return encoder.PING if kind == "ping" else encoder.PONG


FRAGMENTS = [
    b"PUB", b"HPUB", b"SUB", b"UNSUB", b"PING", b"PONG", b"CONNECT", b"INFO", b"+OK", b"-ERR",
    b" ", b"\t", b"\r\n", b"\n", b"\r", b"0", b"5", b"4097", b"-1", b"99999999999", b"foo",
    b"*", b">", b"{", b"}", b"[" * 5000, b'{"verbose":false}', b"\x00", b"\xff", b"x" * 40000,
]  # fmt: skip

garbage = st.binary(max_size=512) | st.lists(
    st.sampled_from(FRAGMENTS) | st.binary(max_size=8), max_size=40
).map(b"".join)


ODD_ARGS = [
    b"-1", b"x", b"0", b"3", b"4097", b"999999999", b"1234567890", b"1e3", b"{}", b"null",
    b"[]", b'{"a":', b"[" * 5000, b'{"verbose":1}', b'{"protocol":1.5}', b'"\xff"',
]  # fmt: skip


# Arities around the legal ones, so a single malformed argument is often the first error.
ARITIES = {
    b"PUB": (1, 2, 3, 4), b"HPUB": (2, 3, 4, 5), b"SUB": (1, 2, 3, 4), b"UNSUB": (0, 1, 2, 3),
    b"CONNECT": (0, 1, 2), b"INFO": (0, 1), b"-ERR": (0, 1), b"PING": (0, 1), b"ping": (0,),
    b"PINGX": (0,), b"+OK": (0, 1), b"sub": (2,),
}  # fmt: skip


@st.composite
def bad_line(draw: st.DrawFn) -> bytes:
    """A real op word with plausible, often malformed, arguments."""
    op = draw(st.sampled_from(sorted(ARITIES)))
    arity = draw(st.sampled_from(ARITIES[op]))
    args = draw(st.lists(tokens | st.sampled_from(ODD_ARGS), min_size=arity, max_size=arity))
    tail = draw(st.sampled_from([b"\r\n", b"\r\n", b"\n", b"", b"\r\nabc\r\n"]))
    return b" ".join([op, *args]) + tail


OPTION_KEYS = [
    "verbose", "pedantic", "echo", "headers", "no_responders", "tls_required", "name", "lang",
    "version", "user", "pass", "auth_token", "protocol", "sig", "jwt", "nkey",
]  # fmt: skip
json_value = st.recursive(
    st.none() | st.booleans() | st.integers(-2, 3) | st.floats() | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner),
    max_leaves=4,
)
odd_connect = st.dictionaries(st.sampled_from(OPTION_KEYS), json_value, max_size=4).map(
    encoder.connect
)


@st.composite
def deep_json_line(draw: st.DrawFn) -> bytes:
    """CONNECT or INFO with JSON nested deeper than Python's recursion limit allows."""
    opener = draw(st.sampled_from([b"[", b'{"a":', b"[{},"]))
    nested = opener * draw(st.integers(4000, 6000))
    return draw(st.sampled_from([b"CONNECT ", b"INFO "])) + nested + b"\r\n"


@st.composite
def mutated_stream(draw: st.DrawFn) -> bytes:
    frame = valid_frame() | bad_line() | odd_connect | deep_json_line()
    stream = bytearray(b"".join(draw(st.lists(frame, min_size=1, max_size=12))))
    for _ in range(draw(st.integers(0, 4))):
        kind = draw(st.sampled_from(["flip", "insert", "delete", "truncate"]))
        at = draw(st.integers(0, len(stream)))
        if kind == "flip" and at < len(stream):
            stream[at] ^= 1 << draw(st.integers(0, 7))
        elif kind == "insert":
            stream[at:at] = draw(st.sampled_from(FRAGMENTS) | st.binary(min_size=1, max_size=8))
        elif kind == "delete":
            del stream[at : at + draw(st.integers(1, 8))]
        elif kind == "truncate":
            del stream[at:]
    return bytes(stream)


@dataclass
class Script:
    chunks: list[bytes]
    read_info_first: bool
    ending: str  # "eof": half-close, read to EOF; "abort": reset; "close": close at once


@st.composite
def script(draw: st.DrawFn) -> Script:
    data = draw(garbage | mutated_stream())
    cuts = sorted(set(draw(st.lists(st.integers(0, len(data)), max_size=6))))
    chunks, start = [], 0
    for cut in [*cuts, len(data)]:
        chunks.append(data[start:cut])
        start = cut
    return Script(
        [c for c in chunks if c],
        draw(st.booleans()),
        draw(st.sampled_from(["eof", "eof", "abort", "close"])),
    )


# ---------------------------------------------------------------------------- driving it


async def run_script(port: int, s: Script) -> None:
    reader, writer = await asyncio.wait_for(
        asyncio.open_connection("127.0.0.1", port), IO_TIMEOUT_S
    )
    try:
        if s.read_info_first:
            info = await asyncio.wait_for(reader.readline(), IO_TIMEOUT_S)
            assert info.startswith(b"INFO {"), info
        with contextlib.suppress(ConnectionError):
            for chunk in s.chunks:
                writer.write(chunk)
                await writer.drain()
            if s.ending == "eof":
                writer.write_eof()
                await asyncio.wait_for(reader.read(-1), IO_TIMEOUT_S)
    finally:
        if s.ending == "abort":
            writer.transport.abort()
        else:
            writer.close()
        with contextlib.suppress(ConnectionError):
            await asyncio.wait_for(writer.wait_closed(), IO_TIMEOUT_S)


async def fresh_connection_works(port: int) -> None:
    reader, writer = await asyncio.wait_for(
        asyncio.open_connection("127.0.0.1", port), IO_TIMEOUT_S
    )
    try:
        info = await asyncio.wait_for(reader.readline(), IO_TIMEOUT_S)
        assert info.startswith(b"INFO ")
        assert json.loads(info[5:])["max_payload"] == 4096
        writer.write(b'CONNECT {"verbose":false}\r\nSUB probe 1\r\nPUB probe 2\r\nok\r\nPING\r\n')
        assert await asyncio.wait_for(reader.readline(), IO_TIMEOUT_S) == b"MSG probe 1 2\r\n"
        assert await asyncio.wait_for(reader.readline(), IO_TIMEOUT_S) == b"ok\r\n"
        assert await asyncio.wait_for(reader.readline(), IO_TIMEOUT_S) == b"PONG\r\n"
    finally:
        writer.close()
        await asyncio.wait_for(writer.wait_closed(), IO_TIMEOUT_S)


async def only_the_good_client_is_left(env: Env) -> None:
    """Wait (bounded) for the server to finish tearing down closed connections."""
    server = env.server
    loop = asyncio.get_running_loop()
    deadline = loop.time() + IO_TIMEOUT_S
    while True:
        names = [c.name for c in server.clients.values()]
        if names == [GOOD_NAME]:
            break
        assert loop.time() < deadline, f"connections left behind: {server.clients}"
        await asyncio.sleep(0.005)
    (good_conn,) = server.clients.values()
    assert not good_conn.closed
    # Every client subscription in the index belongs to the good client: none leaked.
    assert server.router.sublist.count == env.internal_subs + len(good_conn.subs)


async def good_client_round_trip(env: Env, n: int) -> None:
    body = b"%d" % n
    reply = await env.good.request(SERVICE, body, timeout=IO_TIMEOUT_S)
    assert reply.data == b"echo:" + body
    assert env.good.is_connected
    assert env.errors == []


_example_counter = [0]


@settings(
    max_examples=60,
    deadline=None,
    derandomize=True,  # a network test: the same examples on every run
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,  # one server for every example, on purpose
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)
@given(scripts=st.lists(script(), min_size=1, max_size=3))
async def test_hostile_connections_do_not_disturb_a_good_client(
    env: Env, caplog: pytest.LogCaptureFixture, scripts: list[Script]
) -> None:
    caplog.set_level(logging.ERROR, logger="brook")
    _example_counter[0] += 1
    port = env.server.port
    async with asyncio.timeout(30):
        await asyncio.gather(*(run_script(port, s) for s in scripts))
        await good_client_round_trip(env, _example_counter[0])
        await fresh_connection_works(port)
        await only_the_good_client_is_left(env)
        await good_client_round_trip(env, -_example_counter[0])
    internal = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert internal == [], internal


async def test_server_survives_a_burst_of_hostile_connections(
    env: Env, caplog: pytest.LogCaptureFixture
) -> None:
    """Everything at once: many concurrent hostile connections, then the same checks."""
    caplog.set_level(logging.ERROR, logger="brook")
    streams = [
        b"PUB foo 4097\r\n",
        b"CONNECT " + b"[" * 5000 + b"\r\n",
        b"SUB " + b"x" * 40000,
        b"\x00\xff" * 300,
        b"HPUB foo 5 3\r\nabc\r\n",
        b'CONNECT {"headers":true}\r\nSUB > 1\r\nPUB a 3\r\nabc\r\nPUB b 2\r\nxyz\r\n',
        b"PING\r\n" * 500,
        b"SUB foo 1\r\n" + b"PUB foo 5000\r\n",
        b"INFO {}\r\n+OK\r\n-ERR 'x'\r\n",
        b"PUB foo 3\r\nabc",
        b"PUB foo x\r\n",
        b"HPUB foo 1 -2\r\n",
        b"UNSUB 1 2 3\r\n",
        b'CONNECT {"protocol":1.5,"verbose":null}\r\n',
        b'CONNECT {"no_responders":true}\r\n',
        b'CONNECT {"headers":true,"no_responders":true}\r\nPUB nobody reply 0\r\n\r\n',
    ]
    scripts = [
        Script([data[i : i + 7] for i in range(0, len(data), 7)], i % 2 == 0, ending)
        for i, data in enumerate(streams)
        for ending in ("eof", "abort", "close")
    ]
    async with asyncio.timeout(30):
        await asyncio.gather(*(run_script(env.server.port, s) for s in scripts))
        await good_client_round_trip(env, 1)
        await fresh_connection_works(env.server.port)
        await only_the_good_client_is_left(env)
    internal = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert internal == [], internal
