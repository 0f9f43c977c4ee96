"""Accounts across restarts: each account's streams in its own directory, reopened in
their account; the store of a server without accounts (`<store_dir>/streams/<name>`, `$G`)
opens unchanged once accounts are configured (ADR 0027)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.aio.client import Client

import brook
from brook.config.conf import load_conf_file
from brook.config.settings import Settings

pytestmark = pytest.mark.timeout(60)

ACCOUNTS = """
authorization { users: [{user: g, password: g}] }
accounts {
  A: { users: [{user: a, password: a}], jetstream: enabled }
  B: { users: [{user: b, password: b}], jetstream: enabled }
}
"""
SYSTEM_ONLY = """
authorization { users: [{user: g, password: g}] }
accounts { $SYS: { users: [{user: s, password: s}] } }
"""


def settings(tmp_path: Path, config: str) -> Settings:
    path = tmp_path / "brook.conf"
    path.write_text(config + f'jetstream {{ store_dir: "{tmp_path / "store"}" }}\n')
    return load_conf_file(str(path))


async def connect(url: str, user: str | None = None) -> Client:
    if user is None:
        return await nats.connect(url, allow_reconnect=False)
    return await nats.connect(url, user=user, password=user, allow_reconnect=False)


async def api(nc: Client, subject: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    payload = b"" if body is None else json.dumps(body).encode()
    answer: dict[str, Any] = json.loads((await nc.request(subject, payload, timeout=2)).data)
    return answer


async def stored(nc: Client, stream: str) -> list[str]:
    """The payloads of `stream`'s messages (base64, as the API gives them), in order."""
    info = await api(nc, f"$JS.API.STREAM.INFO.{stream}")
    out = []
    for seq in range(1, info["state"]["messages"] + 1):
        msg = await api(nc, f"$JS.API.STREAM.MSG.GET.{stream}", {"seq": seq})
        out.append(msg["message"]["data"])
    return out


async def test_streams_of_several_accounts_reopen_in_their_accounts(tmp_path: Path) -> None:
    """Stream S in A and in B, each with its own messages, each in its account's
    directory; after a restart each account has its own S back, nothing mixed."""
    config = settings(tmp_path, ACCOUNTS)
    async with brook.serve(port=0, settings=config) as srv:
        a, b = await connect(srv.url, "a"), await connect(srv.url, "b")
        for nc, payloads in ((a, [b"a1", b"a2"]), (b, [b"b1"])):
            created = await api(nc, "$JS.API.STREAM.CREATE.S", {"name": "S", "subjects": ["x"]})
            assert "error" not in created
            for payload in payloads:
                await nc.request("x", payload, timeout=2)
        await a.close()
        await b.close()
    store = tmp_path / "store"
    assert (store / "jetstream" / "A" / "streams" / "S" / "stream.json").is_file()
    assert (store / "jetstream" / "B" / "streams" / "S" / "stream.json").is_file()
    assert not (store / "streams" / "S").exists()
    async with brook.serve(port=0, settings=config) as srv:
        a, b = await connect(srv.url, "a"), await connect(srv.url, "b")
        assert await stored(a, "S") == ["YTE=", "YTI="]  # a1, a2
        assert await stored(b, "S") == ["YjE="]  # b1
        await a.close()
        await b.close()


async def test_a_store_without_accounts_opens_unchanged_for_the_global_account(
    tmp_path: Path,
) -> None:
    """A store written by a server without accounts (`$G`'s engine, `<store_dir>/streams`)
    serves the same streams to `$G` once the config has a system account, and the new
    layout puts no other account's streams beside them."""
    store = tmp_path / "store"
    plain = Settings(jetstream=Settings().jetstream)
    plain.jetstream.enabled = True
    plain.jetstream.store_dir = str(store)
    async with brook.serve(port=0, settings=plain) as srv:
        nc = await connect(srv.url)
        await api(nc, "$JS.API.STREAM.CREATE.OLD", {"name": "OLD", "subjects": ["old"]})
        for payload in (b"one", b"two"):
            await nc.request("old", payload, timeout=2)
        await nc.close()
    assert (store / "streams" / "OLD" / "stream.json").is_file()
    before = sorted(str(p.relative_to(store)) for p in (store / "streams").rglob("*"))

    async with brook.serve(port=0, settings=settings(tmp_path, SYSTEM_ONLY)) as srv:
        g = await connect(srv.url, "g")
        assert await stored(g, "OLD") == ["b25l", "dHdv"]  # one, two
        info = await api(g, "$JS.API.INFO")
        assert info["streams"] == 1
        await g.close()
    after = sorted(str(p.relative_to(store)) for p in (store / "streams").rglob("*"))
    assert set(before) <= set(after)
    assert not (store / "jetstream").exists()


async def test_acks_and_consumers_stay_in_their_account(tmp_path: Path) -> None:
    """A's and B's streams and durable consumers share names: a fetch and its ack in A
    change A's consumer only."""
    config = settings(tmp_path, ACCOUNTS)
    async with brook.serve(port=0, settings=config) as srv:
        a, b = await connect(srv.url, "a"), await connect(srv.url, "b")
        for nc in (a, b):
            await api(nc, "$JS.API.STREAM.CREATE.S", {"name": "S", "subjects": ["x"]})
            await nc.request("x", b"m", timeout=2)
        sub_a = await a.jetstream().pull_subscribe("x", "D", stream="S")
        await b.jetstream().pull_subscribe("x", "D", stream="S")
        (msg,) = await sub_a.fetch(1, timeout=2)
        await msg.ack_sync()
        info_a = await api(a, "$JS.API.CONSUMER.INFO.S.D")
        info_b = await api(b, "$JS.API.CONSUMER.INFO.S.D")
        assert info_a["ack_floor"]["stream_seq"] == 1
        assert info_b["ack_floor"]["stream_seq"] == 0
        assert info_b["num_pending"] == 1
        await a.close()
        await b.close()


async def test_monitoring_adds_up_the_accounts_jetstream(tmp_path: Path) -> None:
    """`/varz` jetstream.stats: usage and API requests over every account, the accounts
    with JetStream counted, as nats-server's; subscriptions of every account counted."""
    from tests.support.monitor import get_json

    config = settings(tmp_path, ACCOUNTS)
    config.http_port = -1
    async with brook.serve(port=0, settings=config) as srv:
        a, b = await connect(srv.url, "a"), await connect(srv.url, "b")
        usage = 0
        for nc, payload in ((a, b"a" * 100), (b, b"b" * 300)):
            await api(nc, "$JS.API.STREAM.CREATE.S", {"name": "S", "subjects": ["x"]})
            await nc.request("x", payload, timeout=2)
            info = await api(nc, "$JS.API.INFO")
            usage += info["storage"]
        await a.subscribe("plain.a")
        await b.subscribe("plain.b")
        await a.flush()
        await b.flush()
        v = await get_json(srv, "/varz")
        stats = v["jetstream"]["stats"]
        assert stats["accounts"] == 2
        assert stats["storage"] == usage > 400
        assert stats["api"]["total"] == 4  # two creates, two INFOs
        assert v["subscriptions"] >= 2 + 2  # the two above, and each API's own
        await a.close()
        await b.close()


async def test_sync_threads_do_not_grow_with_the_accounts(tmp_path: Path) -> None:
    """Every account's engine syncs its stores on one server-wide pool of
    `SYNC_THREADS` threads: 40 accounts publishing to file streams use no more."""
    import threading

    from brook import limits

    names = [f"A{i}" for i in range(40)]
    blocks = "\n".join(
        f"{n}: {{ users: [{{user: {n}, password: {n}}}], jetstream: enabled }}" for n in names
    )
    config = f"authorization {{ users: [{{user: g, password: g}}] }}\naccounts {{\n{blocks}\n}}\n"
    async with brook.serve(settings=settings(tmp_path, config)) as server:
        for name in names:
            nc = await connect(server.url, name)
            js = nc.jetstream()
            await js.add_stream(name="S", subjects=["s"])
            assert (await js.publish("s", b"durable")).seq == 1
            await nc.close()
        syncing = [t for t in threading.enumerate() if t.name.startswith("brook-sync")]
        assert 1 <= len(syncing) <= limits.SYNC_THREADS
