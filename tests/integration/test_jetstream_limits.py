"""JetStream limits enforced by the engine (jetstream/quota.py): an account's limits
(streams, consumers per stream, `max_ack_pending`, `max_bytes` rules, memory and storage)
and the server's store limits, with nats-server's error codes and texts, reported in
`$JS.API.INFO` and `/varz`, and holding across a restart.

The account's limits are given to the engine as nats-server's `UpdateJetStreamLimits`
gives them (`JetStream.set_account_limits`); the config file's `accounts` blocks set them
the same way (tests/conformance/test_account_limits_conformance.py).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import nats
import pytest

import brook
from brook.config.conf import parse_conf, settings_from_conf
from brook.config.settings import JetStreamAccountLimits
from tests.support.monitor import varz

pytestmark = pytest.mark.timeout(60)


async def api(nc: Any, subject: str, body: Any = None) -> dict[str, Any]:
    data = b"" if body is None else json.dumps(body).encode()
    reply = await nc.request(f"$JS.API.{subject}", data, timeout=5)
    out: dict[str, Any] = json.loads(reply.data)
    return out


async def publish(nc: Any, subject: str, data: bytes) -> dict[str, Any]:
    out: dict[str, Any] = json.loads((await nc.request(subject, data, timeout=5)).data)
    return out


def error(reply: dict[str, Any]) -> tuple[int, int, str] | None:
    e = reply.get("error")
    return None if e is None else (e["code"], e["err_code"], e["description"])


async def test_stream_and_consumer_counts(tmp_path: Path) -> None:
    async with brook.serve(store_dir=str(tmp_path)) as server:
        server.jetstream.set_account_limits(JetStreamAccountLimits(max_streams=2, max_consumers=2))
        nc = await nats.connect(server.url)
        for name in ("A", "B"):
            assert "error" not in await api(nc, f"STREAM.CREATE.{name}", {"name": name})
        again = await api(nc, "STREAM.CREATE.A", {"name": "A"})  # the same: not counted
        assert "error" not in again
        third = await api(nc, "STREAM.CREATE.C", {"name": "C"})
        assert error(third) == (400, 10027, "maximum number of streams reached")
        above = await api(nc, "STREAM.UPDATE.A", {"name": "A", "max_consumers": 3})
        assert error(above) == (400, 10026, "maximum consumers limit reached")
        # The account's limit is per stream, and the lower of it and the stream's counts.
        for stream in ("A", "B"):
            for durable in ("d1", "d2"):
                body = {"stream_name": stream, "config": {"durable_name": durable}}
                reply = await api(nc, f"CONSUMER.CREATE.{stream}.{durable}", body)
                assert "error" not in reply
        body = {"stream_name": "A", "config": {"durable_name": "d3"}}
        over = await api(nc, "CONSUMER.CREATE.A.d3", body)
        assert error(over) == (400, 10026, "maximum consumers limit reached")
        await api(nc, "STREAM.DELETE.B")
        assert "error" not in await api(nc, "STREAM.CREATE.C", {"name": "C"})
        info = await api(nc, "INFO")
        assert (info["streams"], info["consumers"]) == (2, 2)
        assert info["limits"] == {
            "max_memory": -1,
            "max_storage": -1,
            "max_streams": 2,
            "max_consumers": 2,
            "max_ack_pending": -1,
            "memory_max_stream_bytes": -1,
            "storage_max_stream_bytes": -1,
            "max_bytes_required": False,
        }
        await nc.close()


async def test_max_ack_pending_bounds_and_defaults(tmp_path: Path) -> None:
    async with brook.serve(store_dir=str(tmp_path)) as server:
        server.jetstream.set_account_limits(JetStreamAccountLimits(max_ack_pending=50))
        nc = await nats.connect(server.url)
        await api(nc, "STREAM.CREATE.S", {"name": "S"})
        body = {"stream_name": "S", "config": {"durable_name": "big", "max_ack_pending": 51}}
        over = await api(nc, "CONSUMER.CREATE.S.big", body)
        assert error(over) == (400, 10121, "consumer max ack pending exceeds system limit of 50")
        body = {"stream_name": "S", "config": {"durable_name": "dflt", "ack_policy": "explicit"}}
        created = await api(nc, "CONSUMER.CREATE.S.dflt", body)
        assert created["config"]["max_ack_pending"] == 50  # nats-server's default, lowered
        await nc.close()


async def test_max_bytes_rules(tmp_path: Path) -> None:
    async with brook.serve(store_dir=str(tmp_path)) as server:
        limits = JetStreamAccountLimits(max_bytes_required=True, memory_max_stream_bytes=1000)
        server.jetstream.set_account_limits(limits)
        nc = await nats.connect(server.url)
        none = await api(nc, "STREAM.CREATE.S", {"name": "S", "storage": "memory"})
        assert error(none) == (400, 10113, "account requires a stream config to have max bytes set")
        body = {"name": "S", "storage": "memory", "max_bytes": 1001}
        big = await api(nc, "STREAM.CREATE.S", body)
        assert error(big) == (400, 10122, "stream max bytes exceeds account limit max stream bytes")
        assert "error" not in await api(nc, "STREAM.CREATE.S", {**body, "max_bytes": 1000})
        update = await api(nc, "STREAM.UPDATE.S", body)
        assert error(update) == (
            400,
            10122,
            "stream max bytes exceeds account limit max stream bytes",
        )
        file = await api(nc, "STREAM.CREATE.F", {"name": "F", "max_bytes": 10**9})
        assert "error" not in file  # the per-stream maximum here is memory's only
        await nc.close()


async def test_account_bytes_reserved_and_published(tmp_path: Path) -> None:
    async with brook.serve(store_dir=str(tmp_path), http_port=-1) as server:
        limits = JetStreamAccountLimits(max_memory=1000, max_storage=500)
        server.jetstream.set_account_limits(limits)
        nc = await nats.connect(server.url)
        body = {"name": "R", "subjects": ["r"], "storage": "memory", "max_bytes": 900}
        assert "error" not in await api(nc, "STREAM.CREATE.R", body)
        small = {"name": "M", "subjects": ["m"], "storage": "memory", "max_bytes": 101}
        assert error(await api(nc, "STREAM.CREATE.M", small)) == (
            500,
            10028,
            "insufficient memory resources available",
        )
        file = {"name": "F", "subjects": ["f"], "max_bytes": 501}
        assert error(await api(nc, "STREAM.CREATE.F", file)) == (
            500,
            10047,
            "insufficient storage resources available",
        )
        await api(nc, "STREAM.UPDATE.R", {**body, "max_bytes": -1})
        assert "error" not in await api(nc, "STREAM.CREATE.M", {**small, "max_bytes": -1})
        # Each message is 217 bytes in a memory store; the account's limit refuses the one
        # that would take the memory streams past 1000, and nothing is stored then.
        acks = [await publish(nc, "r" if i % 2 else "m", b"x" * 200) for i in range(5)]
        assert [a.get("seq") for a in acks[:4]] == [1, 1, 2, 2]
        assert error(acks[4]) == (400, 10002, "resource limits exceeded for account")
        info = await api(nc, "INFO")
        assert (info["memory"], info["reserved_memory"]) == (4 * 217, 0)
        await api(nc, "STREAM.PURGE.R")
        assert (await publish(nc, "m", b"x" * 200))["seq"] == 3
        account = (await varz(server))["jetstream"]["brook_accounts"]["$G"]
        assert account["memory"] == 3 * 217
        assert account["limits"]["max_memory"] == 1000
        await nc.close()


CONF = "jetstream { max_file_store: 1000 }\n"


async def test_server_store_limit_holds_across_a_restart(tmp_path: Path) -> None:
    settings = settings_from_conf(parse_conf(CONF))
    store = str(tmp_path / "store")
    async with brook.serve(store_dir=store, settings=settings, http_port=-1) as server:
        nc = await nats.connect(server.url)
        await api(nc, "STREAM.CREATE.F", {"name": "F", "subjects": ["f"], "max_bytes": 700})
        acks = [await publish(nc, "f", b"x" * 200) for _ in range(6)]  # 231 bytes each
        assert [a.get("seq") for a in acks[:5]] == [1, 2, 3, 4, 5]  # max_bytes discards old
        stats = (await varz(server))["jetstream"]["stats"]
        assert (stats["reserved_storage"], stats["storage"]) == (700, 693)
        await api(nc, "STREAM.UPDATE.F", {"name": "F", "subjects": ["f"], "max_bytes": -1})
        acks = [await publish(nc, "f", b"x" * 200) for _ in range(3)]
        assert [a.get("seq") for a in acks[:2]] == [7, 8]  # 693, then 924 held before
        assert error(acks[2]) == (503, 10023, "insufficient resources")  # 1155 > 1000
        await nc.close()
    async with brook.serve(store_dir=store, settings=settings) as server:
        nc = await nats.connect(server.url)
        again = await publish(nc, "f", b"x" * 200)
        assert error(again) == (503, 10023, "insufficient resources")
        await nc.close()


async def messages_of(nc: Any, stream: str, want: int) -> int:
    """The stream's message count once it reaches `want`, or after 5 s."""
    count = -1
    for _ in range(100):
        count = (await api(nc, f"STREAM.INFO.{stream}"))["state"]["messages"]
        if count >= want:
            break
        await asyncio.sleep(0.05)
    return int(count)


async def test_a_mirror_stops_at_the_limit_and_resumes_with_room(tmp_path: Path) -> None:
    settings = settings_from_conf(parse_conf("jetstream { max_memory_store: 1000 }\n"))
    async with brook.serve(store_dir=str(tmp_path), settings=settings) as server:
        nc = await nats.connect(server.url)
        await api(nc, "STREAM.CREATE.O", {"name": "O", "subjects": ["o"]})
        for _ in range(8):
            await publish(nc, "o", b"x" * 200)  # 217 bytes each in a memory store
        body = {"name": "M", "storage": "memory", "mirror": {"name": "O"}}
        assert "error" not in await api(nc, "STREAM.CREATE.M", body)
        assert await messages_of(nc, "M", 5) == 5  # 1085 > 1000: the 6th is refused
        await asyncio.sleep(0.3)
        assert (await api(nc, "STREAM.INFO.M"))["state"]["messages"] == 5
        await api(nc, "STREAM.PURGE.M")
        assert await messages_of(nc, "M", 3) == 3  # asked for again, stored now
        info = await api(nc, "STREAM.INFO.M")
        assert (info["state"]["first_seq"], info["state"]["last_seq"]) == (6, 8)
        await nc.close()


# nats.py's `AccountLimitsTest` config (nats/tests/conf/js-limits.conf).
NATSPY_CONF = """
jetstream: {
  domain: "test-domain"
}

no_auth_user: "foo"

accounts: {
  A {
    users: [{ user: "foo" }]
    jetstream: {
      max_mem: 64MB,
      max_file: 32MB,
      max_streams: 10,
      max_consumers: 20,
      max_ack_pending: 100,
      memory_max_stream_bytes: 2048,
      store_max_stream_bytes: 4096,
      max_stream_bytes: true
    }
  }
}
"""


async def test_natspy_account_limits_steps(tmp_path: Path) -> None:
    """The steps and assertions of nats.py's `AccountLimitsTest.test_account_limits`,
    through nats-py's JetStream API, as the account `A` its `no_auth_user` logs in to."""
    from nats.js.api import AccountLimits
    from nats.js.errors import BadRequestError

    settings = settings_from_conf(parse_conf(NATSPY_CONF))
    async with brook.serve(store_dir=str(tmp_path), settings=settings) as server:
        nc = await nats.connect(server.url)
        js = nc.jetstream()
        with pytest.raises(BadRequestError) as err:
            await js.add_stream(name="limits", subjects=["limits"])
        assert err.value.err_code == 10113
        assert err.value.description == "account requires a stream config to have max bytes set"
        with pytest.raises(BadRequestError) as err:
            await js.add_stream(name="limits", subjects=["limits"], max_bytes=65536)
        assert err.value.err_code == 10122
        assert err.value.description == "stream max bytes exceeds account limit max stream bytes"
        si = await js.add_stream(name="limits", subjects=["limits"], max_bytes=128)
        assert si.config.max_bytes == 128
        await js.publish("limits", b"A" * 55)
        assert (await js.stream_info("limits")).state.messages == 1
        for _ in range(5):
            await js.publish("limits", b"A")
        info = await js.account_info()
        assert (info.memory, info.storage, info.streams, info.consumers) == (0, 111, 1, 0)
        assert info.limits == AccountLimits(
            max_memory=67108864,
            max_storage=33554432,
            max_streams=10,
            max_consumers=20,
            max_ack_pending=100,
            memory_max_stream_bytes=2048,
            storage_max_stream_bytes=4096,
            max_bytes_required=True,
        )
        assert (info.api.total, info.api.errors) == (4, 2)
        assert info.domain == "test-domain"
        assert info.tiers is None
        js = nc.jetstream(domain="test-domain")
        assert (await js.stream_info("limits")).state.messages == 3
        await nc.close()
