"""Interest and workqueue retention side by side: nats-server 2.15.1 and Brook.

Each scenario drives one server through the raw JetStream API (consumer creates, pull
requests, ack verbs sent as requests so that the answer means the ack was processed) and
records the stream state (messages, first and last sequence), PubAcks and API errors after
every step; the two recordings must be equal. Every scenario uses streams of its own, so the
scenarios can share one nats-server. Ack floors are not recorded: Brook derives them from
the pending set, nats-server does not move them past a message given up on (a known
difference of consumer info, not of retention).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import nats
import pytest

import brook

pytestmark = [pytest.mark.conformance, pytest.mark.timeout(60)]


class Run:
    """One scenario against one server: API helpers that record what they see."""

    def __init__(self, nc: Any) -> None:
        self.nc = nc
        self.steps: list[tuple[str, Any]] = []

    def record(self, label: str, value: Any) -> None:
        self.steps.append((label, value))

    async def api(self, subject: str, body: Any = None) -> Any:
        data = b"" if body is None else json.dumps(body).encode()
        return json.loads((await self.nc.request(subject, data, timeout=5)).data)

    async def stream(self, name: str, subjects: list[str], **config: Any) -> None:
        body = {"name": name, "subjects": subjects, "storage": "file", **config}
        reply = await self.api(f"$JS.API.STREAM.CREATE.{name}", body)
        assert "error" not in reply, reply

    async def update(self, name: str, subjects: list[str], **config: Any) -> None:
        body = {"name": name, "subjects": subjects, "storage": "file", **config}
        reply = await self.api(f"$JS.API.STREAM.UPDATE.{name}", body)
        self.record(f"update {name} {config}", reply.get("error"))

    async def consumer(self, stream: str, name: str, **config: Any) -> None:
        body = {"stream_name": stream, "config": {"durable_name": name, **config}}
        reply = await self.api(f"$JS.API.CONSUMER.CREATE.{stream}.{name}", body)
        self.record(f"consumer {name} {config}", reply.get("error"))

    async def delete(self, stream: str, name: str) -> None:
        reply = await self.api(f"$JS.API.CONSUMER.DELETE.{stream}.{name}")
        self.record(f"delete {name}", reply)

    async def publish(self, subject: str, headers: dict[str, str] | None = None) -> None:
        msg = await self.nc.request(subject, b"x", headers=headers, timeout=5)
        self.record(f"publish {subject} {headers}", json.loads(msg.data))

    async def state(self, stream: str) -> None:
        s = (await self.api(f"$JS.API.STREAM.INFO.{stream}"))["state"]
        self.record(f"state {stream}", (s["messages"], s["first_seq"], s["last_seq"]))

    async def fetch(self, stream: str, name: str, n: int) -> list[str]:
        """Pull `n` messages; returns their ack subjects (what the acks are sent to)."""
        inbox = self.nc.new_inbox()
        sub = await self.nc.subscribe(inbox)
        request = json.dumps({"batch": n, "expires": 1_000_000_000}).encode()
        await self.nc.publish(f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{name}", request, inbox)
        acks: list[str] = []
        while len(acks) < n:
            msg = await sub.next_msg(timeout=2)
            if msg.reply and msg.reply.startswith("$JS.ACK."):
                acks.append(msg.reply)
        await sub.unsubscribe()
        self.record(f"fetched {name}", [a.split(".")[5] for a in acks])  # stream seqs
        return acks

    async def poke(self, stream: str, name: str) -> None:
        """A `no_wait` pull request, answered with whatever status: nats-server notices
        messages past max_deliver when it looks for the next message to send."""
        request = json.dumps({"batch": 1, "no_wait": True}).encode()
        await self.nc.request(f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{name}", request, timeout=5)

    async def ack(self, reply: str, verb: bytes = b"+ACK") -> None:
        await self.nc.request(reply, verb, timeout=5)


Scenario = Callable[[Run], Awaitable[None]]


async def no_consumers(r: Run) -> None:
    await r.stream("RC1", ["rc1.>"], retention="interest")
    await r.publish("rc1.a")
    await r.publish("rc1.a", {"Nats-Msg-Id": "m"})
    await r.publish("rc1.a", {"Nats-Msg-Id": "m"})
    await r.state("RC1")


async def every_consumer_acks(r: Run) -> None:
    await r.stream("RC2", ["rc2.>"], retention="interest")
    await r.consumer("RC2", "c1", ack_policy="explicit")
    await r.consumer("RC2", "c2", ack_policy="explicit")
    for _ in range(4):
        await r.publish("rc2.a")
    for reply in await r.fetch("RC2", "c1", 4):
        await r.ack(reply)
    await r.state("RC2")
    c2 = await r.fetch("RC2", "c2", 4)
    await r.ack(c2[1])
    await r.state("RC2")
    await r.ack(c2[0], b"+TERM")
    await r.ack(c2[2], b"-NAK")
    await r.state("RC2")
    await r.delete("RC2", "c2")
    await r.state("RC2")


async def ack_none_and_all(r: Run) -> None:
    await r.stream("RC3", ["rc3.>"], retention="interest")
    await r.consumer("RC3", "none", ack_policy="none")
    await r.consumer("RC3", "all", ack_policy="all")
    for _ in range(4):
        await r.publish("rc3.a")
    await r.fetch("RC3", "none", 4)
    await asyncio.sleep(0.1)  # nats-server releases ack-none deliveries after sending them
    await r.state("RC3")
    replies = await r.fetch("RC3", "all", 4)
    await r.ack(replies[2])
    await r.state("RC3")


async def deletes_and_filters(r: Run) -> None:
    await r.stream("RC4", ["rc4.>"], retention="interest")
    await r.consumer("RC4", "all", ack_policy="explicit")
    await r.consumer("RC4", "fa", ack_policy="explicit", filter_subject="rc4.a")
    await r.consumer("RC4", "fb", ack_policy="explicit", filter_subject="rc4.b")
    for subject in ("rc4.a", "rc4.b", "rc4.a", "rc4.c"):
        await r.publish(subject)
    await r.delete("RC4", "all")
    await r.publish("rc4.c")  # no consumer's filter matches it any more
    await r.state("RC4")
    for reply in await r.fetch("RC4", "fa", 2):
        await r.ack(reply)
    await r.state("RC4")
    await r.consumer("RC4", "fb", ack_policy="explicit", filter_subject="rc4.c")
    await r.state("RC4")
    await r.consumer("RC4", "new", ack_policy="explicit", deliver_policy="new")
    await r.publish("rc4.d")
    await r.delete("RC4", "fa")
    await r.delete("RC4", "fb")
    await r.state("RC4")
    await r.delete("RC4", "new")
    await r.state("RC4")


async def push_without_subscriber(r: Run) -> None:
    await r.stream("RC5", ["rc5.>"], retention="interest")
    await r.consumer("RC5", "p", ack_policy="explicit", deliver_subject="rc5nobody")
    await r.publish("rc5.a")
    await r.state("RC5")


async def publish_rules(r: Run) -> None:
    await r.stream(
        "RC6", ["rc6.>"], retention="interest", max_msgs=1, discard="new", allow_rollup_hdrs=True
    )
    await r.consumer("RC6", "fa", ack_policy="explicit", filter_subject="rc6.a")
    await r.publish("rc6.a")
    await r.publish("rc6.b")
    await r.publish("rc6.a")
    await r.publish("rc6.b", {"Nats-Expected-Last-Sequence": "2"})
    await r.publish("rc6.b", {"Nats-Rollup": "all"})
    await r.state("RC6")


async def dead_letters(r: Run) -> None:
    for stream, retention in (("RC7I", "interest"), ("RC7W", "workqueue")):
        subject = stream.lower() + ".a"
        await r.stream(stream, [stream.lower() + ".>"], retention=retention)
        await r.consumer(stream, "a", ack_policy="explicit", max_deliver=1)
        if retention == "interest":
            await r.consumer(stream, "b", ack_policy="explicit")
        for _ in range(3):
            await r.publish(subject)
        a = await r.fetch(stream, "a", 3)
        await r.ack(a[0], b"-NAK")
        await r.ack(a[1], b"-NAK")
        await r.poke(stream, "a")
        if retention == "interest":
            for reply in await r.fetch(stream, "b", 3):
                await r.ack(reply)
        await r.state(stream)
        await r.ack(a[0])  # a late ack
        await r.state(stream)
        if retention == "interest":
            await r.delete(stream, "b")
            await r.state(stream)
        await r.delete(stream, "a")
        await r.state(stream)


async def workqueue(r: Run) -> None:
    await r.stream("RC8", ["rc8.>"], retention="workqueue")
    for subject in ("rc8.a", "rc8.b", "rc8.a"):
        await r.publish(subject)
    await r.state("RC8")
    await r.consumer("RC8", "x", ack_policy="none")
    await r.consumer("RC8", "x", ack_policy="all")
    await r.consumer("RC8", "x", ack_policy="none", deliver_subject="rc8push")
    await r.consumer("RC8", "x", ack_policy="explicit", deliver_policy="last")
    await r.consumer("RC8", "a", ack_policy="explicit", filter_subject="rc8.a")
    for reply in await r.fetch("RC8", "a", 2):
        await r.ack(reply)
    await r.state("RC8")
    await r.consumer("RC8", "x", ack_policy="explicit")
    await r.consumer("RC8", "x", ack_policy="explicit", filter_subject="rc8.*")
    await r.consumer("RC8", "b", ack_policy="explicit", filter_subjects=["rc8.b", "rc8.c"])
    await r.consumer("RC8", "a", ack_policy="explicit", filter_subject="rc8.c")
    await r.consumer("RC8", "a", ack_policy="all", filter_subject="rc8.c")
    await r.consumer("RC8", "a", ack_policy="explicit")  # to no filter: allowed
    await r.consumer("RC8", "d", ack_policy="explicit", filter_subject="rc8.d")
    await r.delete("RC8", "a")
    await r.delete("RC8", "b")
    await r.state("RC8")


async def retention_updates(r: Run) -> None:
    await r.stream("RC9", ["rc9.>"])
    for _ in range(2):
        await r.publish("rc9.a")
    await r.update("RC9", ["rc9.>"], retention="interest")
    await r.state("RC9")
    await r.update("RC9", ["rc9.>"], retention="limits")
    await r.consumer("RC9", "c", ack_policy="explicit", filter_subject="rc9.a")
    await r.consumer("RC9", "late", ack_policy="explicit", deliver_policy="by_start_sequence",
                     opt_start_seq=7)  # fmt: skip
    for subject in ("rc9.a", "rc9.b", "rc9.a", "rc9.a", "rc9.a"):
        await r.publish(subject)
    replies = await r.fetch("RC9", "c", 3)
    await r.ack(replies[1])
    await r.ack(replies[2])
    await r.state("RC9")
    await r.update("RC9", ["rc9.>"], retention="interest")
    await r.state("RC9")
    await r.ack(replies[0])
    await r.state("RC9")
    await r.update("RC9", ["rc9.>"], retention="workqueue")


SCENARIOS: list[Scenario] = [
    no_consumers,
    every_consumer_acks,
    ack_none_and_all,
    deletes_and_filters,
    push_without_subscriber,
    publish_rules,
    dead_letters,
    workqueue,
    retention_updates,
]


async def record(url: str, scenario: Scenario) -> list[tuple[str, Any]]:
    nc = await nats.connect(url, allow_reconnect=False)
    try:
        run = Run(nc)
        await scenario(run)
        return run.steps
    finally:
        await nc.close()


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.__name__ for s in SCENARIOS])
async def test_retention_matches_nats_server(
    scenario: Scenario, nats_server_url: str, tmp_path: Path
) -> None:
    expected = await record(nats_server_url, scenario)
    async with brook.serve(port=0, store_dir=str(tmp_path / "store")) as server:
        got = await record(server.url, scenario)
    assert got == expected
