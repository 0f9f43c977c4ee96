"""Counter streams (`allow_msg_counter`, `Nats-Incr`) and `persist_mode` side by side:
nats-server 2.15.1 and Brook, replies compared.

Each scenario runs the same steps on both servers and records, step by step: the stream
requests' replies (config and state as JSON, errors with their codes and texts), the
PubAcks as the bytes the server sent, and stored messages as bytes (headers and payload,
through STREAM.MSG.GET and direct get). The restart scenarios run their phases on one
store directory per server, the server stopped and started again in between. Volatile
values (times, server identity, stored byte counts) are masked.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import nats
import pytest

from tests.support.raw import Msg, RawClient, is_msg
from tests.support.sidebyside import across_restarts

pytestmark = [pytest.mark.conformance, pytest.mark.timeout(90)]

_VOLATILE = {"created", "ts", "time", "first_ts", "last_ts", "cluster", "bytes"}


def _mask(value: Any, key: str = "") -> Any:
    if isinstance(value, dict):
        return {
            k: "<volatile>" if k in _VOLATILE else _mask(v, k)
            for k, v in value.items()
            if k not in ("_nats.ver", "_nats.level")
        }
    if isinstance(value, list):
        return [_mask(v) for v in value]
    if key == "description" and isinstance(value, str) and value.startswith("invalid JSON: "):
        return "invalid JSON: <parser message>"  # Go's and Python's parser texts differ
    return value


class Run:
    """One scenario against one server: helpers that record what the server answers."""

    def __init__(self, nc: Any, raw: RawClient) -> None:
        self.nc = nc
        self.raw = raw
        self.steps: list[tuple[str, Any]] = []
        self._inbox = 0

    def record(self, label: str, value: Any) -> None:
        self.steps.append((label, value))

    async def api(self, subject: str, body: Any = None, *, keep: tuple[str, ...] = ()) -> Any:
        data = b"" if body is None else json.dumps(body).encode()
        reply = json.loads((await self.nc.request(subject, data, timeout=5)).data)
        shown = {k: reply[k] for k in keep if k in reply} if keep else reply
        self.record(f"{subject} {body}", _mask(shown))
        return reply

    async def create(self, name: str, **config: Any) -> Any:
        body = {"name": name, "subjects": [f"{name.lower()}.>"], **config}
        return await self.api(f"$JS.API.STREAM.CREATE.{name}", body, keep=("config", "error"))

    async def update(self, name: str, **config: Any) -> Any:
        body = {"name": name, "subjects": [f"{name.lower()}.>"], **config}
        return await self.api(f"$JS.API.STREAM.UPDATE.{name}", body, keep=("config", "error"))

    async def info(self, name: str) -> None:
        await self.api(f"$JS.API.STREAM.INFO.{name}", keep=("config", "state", "error"))

    async def pub(self, subject: str, payload: bytes = b"", **headers: str) -> None:
        """A publish through nats-py (which trims header values); its PubAck as bytes."""
        hdrs = {k.replace("_", "-"): v for k, v in headers.items()} or None
        reply = await self.nc.request(subject, payload, timeout=5, headers=hdrs)
        self.record(f"pub {subject} {headers} {payload!r}", reply.data)

    async def hpub(self, subject: str, header: bytes, payload: bytes = b"") -> None:
        """A publish with the header block's exact bytes; its PubAck as bytes."""
        self._inbox += 1
        inbox = b"raw.inbox.%d" % self._inbox
        await self.raw.send(b"SUB %s %d\r\n" % (inbox, self._inbox))
        frame = b"HPUB %s %s %d %d\r\n%s%s\r\n" % (
            subject.encode(),
            inbox,
            len(header),
            len(header) + len(payload),
            header,
            payload,
        )
        await self.raw.send(frame)
        ops = await self.raw.read_ops(until=is_msg, timeout=5)
        msg = ops[-1]
        assert isinstance(msg, Msg)
        self.record(f"hpub {subject} {header!r} {payload!r}", msg.payload)

    async def stored(self, stream: str, subject: str) -> None:
        """The subject's last message as STREAM.MSG.GET and direct get return it."""
        body = json.dumps({"last_by_subj": subject}).encode()
        reply = json.loads(
            (await self.nc.request(f"$JS.API.STREAM.MSG.GET.{stream}", body, timeout=5)).data
        )
        msg = reply.get("message")
        if msg is not None:
            value: Any = (
                msg["subject"],
                msg["seq"],
                base64.b64decode(msg.get("hdrs", "")),
                base64.b64decode(msg.get("data", "")),
            )
        else:
            value = reply.get("error")
        self.record(f"msg get {stream} {subject}", value)
        direct = await self.nc.request(f"$JS.API.DIRECT.GET.{stream}.{subject}", b"", timeout=5)
        headers = {k: v for k, v in (direct.headers or {}).items() if k != "Nats-Time-Stamp"}
        self.record(f"direct get {stream} {subject}", (headers, direct.data))


Scenario = Callable[[Run], Awaitable[None]]


@asynccontextmanager
async def _connected(url: str) -> AsyncIterator[Run]:
    nc = await nats.connect(url, allow_reconnect=False)
    try:
        async with RawClient.connect_url(url) as raw:
            await raw.handshake(headers=True)
            yield Run(nc, raw)
    finally:
        await nc.close()


async def _run_phases(url: str, phases: list[Scenario]) -> list[tuple[str, Any]]:
    async with _connected(url) as run:
        for phase in phases:
            await phase(run)
        return run.steps


async def _compare_across_restarts(tmp_path: Path, phases: list[Scenario]) -> None:
    """Each phase on a freshly started server over the same store, on both servers."""

    async def phase(url: str, scenario: Scenario) -> list[tuple[str, Any]]:
        return await _run_phases(url, [scenario])

    await across_restarts(tmp_path, phases, phase)


async def _compare_once(tmp_path: Path, scenario: Scenario) -> None:
    await _compare_across_restarts(tmp_path, [scenario])


# ---------------------------------------------------------------------------- configuration


async def counter_configs(r: Run) -> None:
    for config in (
        {"allow_msg_counter": True},
        {"allow_msg_counter": True, "storage": "memory", "max_msgs_per_subject": 1},
        {"allow_msg_counter": True, "discard": "new"},
        {"allow_msg_counter": True, "allow_msg_ttl": True},
        {"allow_msg_counter": True, "retention": "interest"},
        {"allow_msg_counter": True, "retention": "workqueue"},
        {"allow_msg_counter": True, "discard": "new", "allow_msg_ttl": True},
        {"allow_msg_counter": True, "subject_delete_marker_ttl": 2_000_000_000},
        {"allow_msg_counter": True, "deny_purge": True, "allow_rollup_hdrs": True},
        {"allow_msg_counter": None},
        {"allow_msg_counter": False},
        {"allow_msg_counter": "yes"},
    ):
        reply = await r.create("CFG", **config)
        if "error" not in reply:
            await r.api("$JS.API.STREAM.DELETE.CFG")
    await r.create("C", allow_msg_counter=True)
    await r.update("C", allow_msg_counter=False)
    await r.update("C", allow_msg_counter=True, max_msgs_per_subject=5)
    await r.create("N")
    await r.update("N", allow_msg_counter=True)
    # Idempotent create with the same configuration; a different counter setting is not.
    await r.create("N")
    await r.create("N", allow_msg_counter=True)


async def persist_configs(r: Run) -> None:
    for config in (
        {"persist_mode": "async"},
        {"persist_mode": "default"},
        {"persist_mode": ""},
        {"persist_mode": "async", "storage": "memory"},
        {"persist_mode": "async", "num_replicas": 3},
        {"persist_mode": None},
        {"persist_mode": "ASYNC"},
        {"persist_mode": 1},
        {"persist_mode": "async", "allow_msg_counter": True},
    ):
        reply = await r.create("CFG", **config)
        if "error" not in reply:
            await r.api("$JS.API.STREAM.DELETE.CFG")
    await r.create("A", persist_mode="async")
    await r.update("A")
    await r.update("A", persist_mode="default")
    await r.update("A", persist_mode="async", max_msgs=10)
    await r.create("D")
    await r.update("D", persist_mode="async")
    await r.update("D", persist_mode="default", max_msgs=10)
    for i in range(3):
        await r.pub("a.x", b"%d" % i)
    await r.info("A")


async def test_counter_configurations_match(tmp_path: Path) -> None:
    await _compare_once(tmp_path, counter_configs)


async def test_persist_mode_configurations_match(tmp_path: Path) -> None:
    await _compare_once(tmp_path, persist_configs)


# ---------------------------------------------------------------------------- increments


async def increments(r: Run) -> None:
    await r.create("C", allow_msg_counter=True, allow_direct=True)
    await r.pub("c.a", Nats_Incr="1")
    await r.pub("c.a", Nats_Incr="+5")
    await r.pub("c.a", Nats_Incr="-10")
    await r.pub("c.a", Nats_Incr="123456789012345678901234567890")
    await r.pub("c.a", Nats_Incr="-123456789012345678901234567890")
    await r.pub("c.b", Nats_Incr="0")
    await r.pub("c.b", Nats_Incr="-0")
    await r.pub("c.b", Nats_Incr="007")
    await r.stored("C", "c.a")
    await r.stored("C", "c.b")
    # Refused increments: no increment, a payload, values big.Int does not read.
    await r.pub("c.a")
    await r.pub("c.a", b"1")
    await r.pub("c.a", b"x", Nats_Incr="1")
    for bad in ("abc", "1.5", "0x10", "1_000", "1e3", "--1", "+", "½"):
        await r.pub("c.a", Nats_Incr=bad)
    await r.pub("c.a", Nats_Incr="")
    # Headers that cannot go with an increment, even when their check would pass.
    await r.pub("c.a", Nats_Incr="1", Nats_Expected_Stream="C")
    await r.pub("c.a", Nats_Incr="1", Nats_Expected_Last_Sequence="8")
    await r.pub("c.a", Nats_Incr="1", Nats_Expected_Last_Subject_Sequence="5")
    await r.pub("c.a", Nats_Incr="1", Nats_Expected_Last_Subject_Sequence_Subject="c.b")
    await r.pub("c.a", Nats_Incr="1", Nats_Expected_Last_Msg_Id="x")
    await r.pub("c.a", Nats_Incr="1", Nats_Rollup="sub")
    await r.pub("c.a", Nats_Incr="1", Nats_TTL="5s")
    await r.pub("c.a", Nats_Incr="abc", Nats_Expected_Stream="OTHER")
    await r.pub("c.a", b"x", Nats_Expected_Stream="OTHER")
    await r.pub("c.a", Nats_Rollup="sub")
    # De-duplication: a duplicate is answered as one (no `val`), before the other checks.
    await r.pub("c.a", Nats_Incr="2", Nats_Msg_Id="m1")
    await r.pub("c.a", Nats_Incr="2", Nats_Msg_Id="m1")
    await r.pub("c.a", Nats_Msg_Id="m1")
    await r.pub("c.a", b"payload", Nats_Msg_Id="m1")
    await r.pub("c.a", Nats_Incr="x", Nats_Msg_Id="m1")
    await r.pub("c.a", Nats_Msg_Id="m2")
    await r.pub("c.a", Nats_Incr="3", Nats_Msg_Id="m2", X_Other="kept")
    await r.stored("C", "c.a")
    # Exact header bytes: blanks around the value, a header name in other case.
    await r.hpub("c.r", b"NATS/1.0\r\nNats-Incr:5\r\n\r\n")
    await r.hpub("c.r", b"NATS/1.0\r\nNats-Incr:   6\r\n\r\n")
    await r.hpub("c.r", b"NATS/1.0\r\nNats-Incr: 7 \r\n\r\n")
    await r.hpub("c.r", b"NATS/1.0\r\nNats-Incr: 7\t\r\n\r\n")
    await r.hpub("c.r", b"NATS/1.0\r\nnats-incr: 1\r\n\r\n")
    await r.hpub("c.r", b"NATS/1.0\r\nNats-Incr: 1\r\nNats-Incr: 2\r\n\r\n")
    await r.hpub("c.r", b"NATS/1.0\r\nX-Note: Nats-Incr: 9\r\nNats-Incr: 2\r\n\r\n")
    await r.stored("C", "c.r")
    # Deleting a counter's last message steps it back; a purge resets it.
    await r.api("$JS.API.STREAM.MSG.DELETE.C", {"seq": 3})
    await r.api("$JS.API.STREAM.MSG.DELETE.C", {"seq": 5})
    await r.pub("c.a", Nats_Incr="1")
    await r.api("$JS.API.STREAM.PURGE.C", {"filter": "c.b"})
    await r.pub("c.b", Nats_Incr="2")
    await r.stored("C", "c.b")
    await r.info("C")


async def limits_and_other_streams(r: Run) -> None:
    # A counter per subject, its history kept to one message.
    await r.create(
        "K", allow_msg_counter=True, max_msgs_per_subject=1, storage="memory", allow_direct=True
    )
    for i in range(3):
        await r.pub("k.x", Nats_Incr=str(i + 1))
    await r.stored("K", "k.x")
    await r.info("K")
    # max_msg_size applies to the message stored, the total included.
    await r.create("S", allow_msg_counter=True, max_msg_size=37)
    await r.pub("s.x", Nats_Incr="1")
    await r.pub("s.x", Nats_Incr="100000")
    await r.pub("s.x", Nats_Incr="1")
    # A stream without counters refuses increments.
    await r.create("N")
    await r.pub("n.a", Nats_Incr="1")
    await r.pub("n.a", Nats_Incr="x")
    await r.pub("n.a", b"x", Nats_Incr="1", Nats_Expected_Stream="Q")
    await r.pub("n.a", Nats_Incr="")
    await r.pub("n.a", b"plain")
    await r.info("N")


async def test_counter_increments_match(tmp_path: Path) -> None:
    await _compare_once(tmp_path, increments)


async def test_counter_limits_and_plain_streams_match(tmp_path: Path) -> None:
    await _compare_once(tmp_path, limits_and_other_streams)


# ---------------------------------------------------------------------------- restarts


async def before_restart(r: Run) -> None:
    await r.create("C", allow_msg_counter=True, allow_direct=True)
    await r.create("A", persist_mode="async")
    await r.pub("c.a", Nats_Incr="40", Nats_Msg_Id="before")
    await r.pub("c.a", Nats_Incr="2")
    await r.pub("c.b", Nats_Incr="99999999999999999999999")
    await r.pub("a.x", b"kept")
    await r.info("C")


async def after_restart(r: Run) -> None:
    await r.info("C")
    await r.info("A")
    await r.stored("C", "c.a")
    await r.pub("c.a", Nats_Incr="1")
    await r.pub("c.a", Nats_Incr="1", Nats_Msg_Id="before")
    await r.pub("c.b", Nats_Incr="1")
    await r.pub("c.c", Nats_Incr="-1")
    await r.pub("a.x", b"more")
    await r.stored("C", "c.b")
    await r.update("C", allow_msg_counter=False)
    await r.update("A", persist_mode="default")


async def test_counters_continue_after_a_restart_as_in_nats_server(tmp_path: Path) -> None:
    await _compare_across_restarts(tmp_path, [before_restart, after_restart])


# ---------------------------------------------------------------------------- markers


async def _wait_state(r: Run, stream: str, messages: int, last_seq: int) -> None:
    """Poll (unrecorded) until the stream holds `messages` up to `last_seq`."""
    for _ in range(100):
        reply = await r.nc.request(f"$JS.API.STREAM.INFO.{stream}", b"", timeout=5)
        state = json.loads(reply.data)["state"]
        if (state["messages"], state["last_seq"]) == (messages, last_seq):
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"{stream} never reached {messages} messages up to {last_seq}")


async def counter_with_markers(r: Run) -> None:
    """max_age with subject delete markers: the marker that would replace a counter's
    last message is refused by the counter's own check (no `Nats-Incr`), so that message
    stays, with its total, until a newer one on its subject lets it expire."""
    second = 1_000_000_000
    await r.create(
        "M",
        allow_msg_counter=True,
        allow_direct=True,
        max_age=second,
        subject_delete_marker_ttl=second,
    )
    await r.pub("m.x", Nats_Incr="5")
    await r.pub("m.y", Nats_Incr="1")
    await asyncio.sleep(2.5)
    await r.info("M")
    await r.pub("m.x", Nats_Incr="1")
    await _wait_state(r, "M", 2, 3)  # the older message of m.x expired
    await r.stored("M", "m.x")
    await r.pub("m.x", Nats_Incr="1")
    # The same for a message's own TTL (markers turn TTLs on): kept while it is the last.
    await r.create("T", allow_msg_counter=True, subject_delete_marker_ttl=second)
    await r.pub("t.x", Nats_Incr="1", Nats_TTL="1s")
    await asyncio.sleep(2.5)
    await r.info("T")
    await r.pub("t.x", Nats_Incr="1")
    await _wait_state(r, "T", 1, 2)  # then it expires


async def test_markers_never_take_a_counters_place_as_in_nats_server(
    tmp_path: Path,
) -> None:
    await _compare_once(tmp_path, counter_with_markers)
