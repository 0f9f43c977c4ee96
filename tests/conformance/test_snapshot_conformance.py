"""STREAM.SNAPSHOT and STREAM.RESTORE against Brook and nats-server: the same requests, in the
order a client makes them, and the same answers where they can be compared (errors, response
shapes, chunk subjects and headers, flow control, the end of a snapshot, an abandoned
restore). The snapshot content differs by design (each server ships its own format,
docs/compatibility.md), so round trips are each server's own, and compared by their answers.

Steps that wait for nats-server's fixed 5-second timeouts run on both servers at once.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import nats
import pytest
from nats.errors import NoRespondersError

import brook
from tests.conformance.test_stream_api_conformance import delete_all_streams, normalise
from tests.support.snapshots import backup, restore, send_chunks, start_restore

pytestmark = [pytest.mark.conformance, pytest.mark.timeout(90)]

ACK = re.compile(
    r"^\$JS\.SNAPSHOT\.ACK\.(?P<stream>[^.]+)\.[A-Za-z0-9]+\.(?P<len>\d+)\.(?P<i>\d+)$"
)
DELIVER = re.compile(r"^\$JS\.SNAPSHOT\.RESTORE\.(?P<stream>[^.]+)\.[A-Za-z0-9]+$")


@pytest.fixture
async def urls(nats_server_url: str, tmp_path: Any) -> AsyncIterator[tuple[str, str]]:
    async with brook.serve(port=0, store_dir=str(tmp_path)) as server:
        yield nats_server_url, server.url


async def both(urls: tuple[str, str], run: Callable[[Any], Awaitable[Any]]) -> tuple[Any, Any]:
    """`run(nc)` on each server at once, from no streams; (nats-server's, Brook's)."""

    async def one(url: str) -> Any:
        nc = await nats.connect(url, allow_reconnect=False)
        try:
            await delete_all_streams(nc)
            return await run(nc)
        finally:
            await delete_all_streams(nc)
            await nc.close()

    expected, actual = await asyncio.gather(one(urls[0]), one(urls[1]))
    return expected, actual


async def api(nc: Any, subject: str, body: Any = b"") -> Any:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    reply = await nc.request("$JS.API." + subject, data, timeout=5)
    value = normalise(json.loads(reply.data))
    if isinstance(value.get("deliver_subject"), str) and DELIVER.match(value["deliver_subject"]):
        value["deliver_subject"] = "<restore inbox>"
    return value


async def stream(nc: Any, name: str = "S", count: int = 20, size: int = 100, **cfg: Any) -> None:
    js = nc.jetstream()
    await js.add_stream(name=name, subjects=[f"{name.lower()}.>"], **cfg)
    for i in range(count):
        await js.publish(f"{name.lower()}.{i % 3}", os.urandom(size), headers={"I": str(i)})
    create = {"stream_name": name, "config": {"durable_name": "C", "ack_policy": "explicit"}}
    await nc.request(f"$JS.API.CONSUMER.CREATE.{name}.C", json.dumps(create).encode(), timeout=5)


async def test_request_errors_match(urls: tuple[str, str]) -> None:
    async def run(nc: Any) -> list[Any]:
        await stream(nc)
        out = []
        bad_snapshots: list[Any] = [
            *(b"", b"{}", b"null", b"not json"),
            *({"deliver_subject": s} for s in ("", "a.*", "a.>")),
            {"deliver_subject": "x", "bogus": 1},
            {"deliver_subject": "x", "chunk_size": "big"},
        ]
        for body in bad_snapshots:
            out.append(await api(nc, "STREAM.SNAPSHOT.S", body))
        out.append(await api(nc, "STREAM.SNAPSHOT.NOPE", {"deliver_subject": "x"}))
        out.append(await api(nc, "STREAM.SNAPSHOT.NOPE", b""))
        for body in (b"", b"{}", b"not json", {"config": {"name": "X"}}, {"config": {"name": "S"}},
                     {"config": {"name": "R", "max_age": 5}}, {"config": {"name": "R"}, "bogus": 1},
                     {"config": {"name": "R", "subjects": ["a", "a"]}}):  # fmt: skip
            out.append(await api(nc, "STREAM.RESTORE.R" if body != {"config": {"name": "S"}}
                                 else "STREAM.RESTORE.S", body))  # fmt: skip
        out.append(await api(nc, "STREAM.RESTORE.S", {"state": {}}))  # name from the subject
        return out

    expected, actual = await both(urls, run)
    for i, (want, got) in enumerate(zip(expected, actual, strict=True)):
        assert got == want, i


async def test_snapshot_response_and_chunk_flow_match(urls: tuple[str, str]) -> None:
    """Full chunks carry `$JS.SNAPSHOT.ACK.<stream>.<token>.<bytes>.<index>`, the last shorter
    one no reply, and the empty message at the end `NATS/1.0 204`."""

    async def run(nc: Any) -> Any:
        await stream(nc, count=300, size=1000)  # incompressible: several 16 KiB chunks
        saved = await backup(nc, "S", chunk_size=16 * 1024)
        shape: list[tuple[Any, ...]] = []
        for index, (size, reply) in enumerate(saved.chunks, 1):
            if reply is None:
                shape.append(("last", size < 16 * 1024, index == len(saved.chunks)))
            else:
                m = ACK.match(reply)
                assert m is not None, reply
                shape.append(("full", size, m["stream"], int(m["len"]), int(m["i"]) == index))
        kinds = sorted(set(shape))
        return normalise(saved.response), kinds, saved.end_headers

    expected, actual = await both(urls, run)
    assert actual == expected


async def test_a_snapshot_in_one_chunk_ends_without_status(urls: tuple[str, str]) -> None:
    async def run(nc: Any) -> Any:
        await stream(nc, count=2, size=10)
        saved = await backup(nc, "S", chunk_size=1024 * 1024)
        return [reply for _, reply in saved.chunks], saved.end_headers

    expected, actual = await both(urls, run)
    assert actual == expected == ([None], None)


async def test_flow_control_window_and_no_flow_response(urls: tuple[str, str]) -> None:
    """Window 2048, chunks of 1024: two chunks, then nothing without an ack; an ack lets one
    more out; 5 s without one ends the snapshot with `408 No Flow Response`."""

    async def run(nc: Any) -> Any:
        await stream(nc, count=50, size=1000)
        inbox = nc.new_inbox()
        sub = await nc.subscribe(inbox)
        req = {"deliver_subject": inbox, "chunk_size": 1024, "window_size": 2048}
        await api(nc, "STREAM.SNAPSHOT.S", req)
        got = []
        while True:
            msg = await sub.next_msg(timeout=10)
            got.append((len(msg.data), bool(msg.reply), dict(msg.headers or {})))
            if not msg.data:
                break
            if len(got) == 2:
                await nc.publish(msg.reply, b"")  # one ack: one more chunk
        return got

    expected, actual = await both(urls, run)
    assert actual == expected
    assert actual[-1][2] == {"Status": "408", "Description": "No Flow Response"}
    assert len(actual) == 4


async def test_subscriber_gone_ends_with_no_interest(urls: tuple[str, str]) -> None:
    """The last subscriber on the deliver subject leaves mid-snapshot: `408 No Interest`.

    A wildcard subscriber sees that end: it receives the chunks but is no interest in the
    sense of nats-server's sublist notifications (a plain subscription on exactly the deliver
    subject), so it neither keeps the snapshot going nor misses the 408.
    """

    async def run(nc: Any) -> Any:
        await stream(nc, count=50, size=1000)
        deliver = "backup." + nc.new_inbox().rsplit(".", 1)[1]
        tap = await nc.subscribe("backup.*")
        sub = await nc.subscribe(deliver)
        req = {"deliver_subject": deliver, "chunk_size": 1024, "window_size": 1024}
        await api(nc, "STREAM.SNAPSHOT.S", req)
        first = await sub.next_msg(timeout=5)
        await sub.unsubscribe()
        seen = [await tap.next_msg(timeout=10)]
        while seen[-1].data:
            seen.append(await tap.next_msg(timeout=10))
        end = seen[-1]
        return bool(first.reply), len(seen), end.reply or None, dict(end.headers or {})

    expected, actual = await both(urls, run)
    assert actual == expected == (True, 2, None, {"Status": "408", "Description": "No Interest"})


async def test_late_first_subscriber_ends_with_no_interest(urls: tuple[str, str]) -> None:
    """Nobody subscribed to the deliver subject itself: after 2 s the chunks go out anyway (a
    wildcard subscriber gets them); a plain subscriber arriving then is a change of interest,
    and nats-server ends the snapshot with `408 No Interest`."""

    async def run(nc: Any) -> Any:
        await stream(nc, count=50, size=1000)
        deliver = "backup." + nc.new_inbox().rsplit(".", 1)[1]
        tap = await nc.subscribe("backup.*")
        req = {"deliver_subject": deliver, "chunk_size": 1024, "window_size": 1024}
        await api(nc, "STREAM.SNAPSHOT.S", req)
        first = await tap.next_msg(timeout=5)
        await nc.subscribe(deliver)
        end = await tap.next_msg(timeout=10)
        return bool(first.reply), len(end.data), dict(end.headers or {})

    expected, actual = await both(urls, run)
    assert actual == expected == (True, 0, {"Status": "408", "Description": "No Interest"})


async def test_restore_flow_matches(urls: tuple[str, str]) -> None:
    """Each server restores its own backup: the RESTORE answer, the chunk acks and the final
    answer match; a chunk without a reply subject, garbage, and a silence of 5 s end a
    restore as on nats-server."""

    async def run(nc: Any) -> Any:
        await stream(nc, count=100, size=500)
        saved = await backup(nc, "S")
        await nc.jetstream().delete_stream("S")
        out: list[Any] = []
        started = await start_restore(nc, "S", saved.meta)
        out.append(normalise({**started, "deliver_subject": "<inbox>"}))
        acks = []
        for i in range(0, len(saved.data), 4096):
            ack = await nc.request(started["deliver_subject"], saved.data[i : i + 4096], timeout=5)
            acks.append((ack.data, ack.headers))
        out.append(sorted(set(map(repr, acks))))
        final = await nc.request(started["deliver_subject"], b"", timeout=30)
        out.append(normalise(json.loads(final.data)))
        out.append(await api(nc, "CONSUMER.INFO.S.C"))
        # Garbage: the chunks are taken, the end is answered with 10062.
        started = await start_restore(nc, "G", {"config": {"name": "G"}})
        await send_chunks(
            nc, started["deliver_subject"], b"\xff\x06\x00\x00sNaPpY" + os.urandom(5000)
        )
        end = json.loads((await nc.request(started["deliver_subject"], b"", timeout=30)).data)
        out.append((end["type"], end["error"]["code"], end["error"]["err_code"]))
        out.append("G" in ((await api(nc, "STREAM.NAMES"))["streams"] or []))
        # A chunk without a reply subject abandons the restore: nobody listens afterwards.
        started = await start_restore(nc, "H", {"config": {"name": "H"}})
        await nc.publish(started["deliver_subject"], b"chunk")
        await nc.flush()
        await asyncio.sleep(0.2)
        try:
            await nc.request(started["deliver_subject"], b"", timeout=2)
            out.append("answered")
        except NoRespondersError:
            out.append("no responders")
        # Silence: after 5 s without a chunk the restore is gone.
        started = await start_restore(nc, "I", {"config": {"name": "I"}})
        await send_chunks(nc, started["deliver_subject"], saved.data[:100])
        await asyncio.sleep(6)
        try:
            await nc.request(started["deliver_subject"], b"more", timeout=2)
            out.append("answered")
        except NoRespondersError:
            out.append("no responders")
        out.append("I" in ((await api(nc, "STREAM.NAMES"))["streams"] or []))
        return out

    expected, actual = await both(urls, run)
    for i, (want, got) in enumerate(zip(expected, actual, strict=True)):
        assert got == want, i


async def test_memory_streams_round_trip_on_both(urls: tuple[str, str]) -> None:
    async def run(nc: Any) -> Any:
        await stream(nc, count=30, size=50, storage="memory")
        saved = await backup(nc, "S")
        await nc.jetstream().delete_stream("S")
        final = await restore(nc, "S", saved.meta, saved.data)
        return normalise(saved.response), normalise(final)

    expected, actual = await both(urls, run)
    assert actual == expected
