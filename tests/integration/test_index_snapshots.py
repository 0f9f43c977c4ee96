"""Periodic index snapshots (ADR 0046) through a real server: `jetstream {
index_snapshot_interval }` makes every changed file stream save `index.snap` while it
runs, and `/varz` jetstream.brook_store shows the setting and how many were written."""

from __future__ import annotations

import asyncio
from pathlib import Path

import nats
import pytest

import brook
from brook.config.conf import load_conf_file
from brook.config.errors import ConfigError
from tests.support.monitor import varz

pytestmark = pytest.mark.timeout(30)


async def test_file_streams_save_their_index_periodically(tmp_path: Path) -> None:
    conf = tmp_path / "brook.conf"
    store = tmp_path / "store"
    conf.write_text(f'jetstream {{ store_dir: "{store}", index_snapshot_interval: 50ms }}\n')
    settings = load_conf_file(str(conf))
    settings.http_port = -1
    async with brook.serve(port=0, settings=settings) as server:
        nc = await nats.connect(server.url)
        js = nc.jetstream()
        await js.add_stream(name="P", subjects=["p.>"])
        await js.add_stream(name="M", subjects=["m.>"], storage="memory")
        for i in range(10):
            await js.publish(f"p.{i % 3}", b"x%d" % i)
        snap = next(store.rglob("P")) / "data" / "index.snap"
        for _ in range(200):
            stats = (await varz(server))["jetstream"]["brook_store"]
            if stats["index_snapshots"] and snap.exists():
                break
            await asyncio.sleep(0.02)
        assert stats["index_snapshot_interval"] == 50_000_000
        assert stats["index_snapshots"] >= 1
        assert snap.exists()
        # Once one covers the last publish, no more are written: nothing changed.
        await asyncio.sleep(0.2)
        written = (await varz(server))["jetstream"]["brook_store"]["index_snapshots"]
        await asyncio.sleep(0.2)
        assert (await varz(server))["jetstream"]["brook_store"]["index_snapshots"] == written
        await nc.close()


async def test_the_default_interval_is_nats_servers_two_minutes(tmp_path: Path) -> None:
    async with brook.serve(port=0, http_port=-1, store_dir=str(tmp_path)) as server:
        stats = (await varz(server))["jetstream"]["brook_store"]
        assert stats["index_snapshot_interval"] == 120 * 10**9
        assert stats["index_snapshots"] == 0


async def test_the_packed_index_bound_is_configured_and_shown(tmp_path: Path) -> None:
    """`jetstream { index_hot_segments }` (ADR 0054) reaches /varz with the packed
    segments and unpacks of every file stream; out of range, the config is refused."""
    conf = tmp_path / "brook.conf"
    store = tmp_path / "store"
    conf.write_text(f'jetstream {{ store_dir: "{store}", index_hot_segments: 5 }}\n')
    settings = load_conf_file(str(conf))
    settings.http_port = -1
    async with brook.serve(port=0, settings=settings) as server:
        nc = await nats.connect(server.url)
        js = nc.jetstream()
        await js.add_stream(name="P", subjects=["p.>"])
        await js.publish("p.1", b"x")
        stats = (await varz(server))["jetstream"]["brook_store"]
        assert stats["index_hot_segments"] == 5
        assert stats["index_packed_segments"] == 0  # one segment: the active one
        assert stats["index_unpacks"] == 0
        await nc.close()
    conf.write_text(f'jetstream {{ store_dir: "{store}", index_hot_segments: 0 }}\n')
    with pytest.raises(ConfigError, match="index_hot_segments: must be 1 to 1024"):
        load_conf_file(str(conf)).validate()


async def test_the_write_buffer_is_configured_and_shown(tmp_path: Path) -> None:
    """`jetstream { write_buffer }` (ADR 0051) reaches /varz with the bytes pending; 0
    writes through (nothing pending, ever); above 64MB the config is refused."""
    conf = tmp_path / "brook.conf"
    store = tmp_path / "store"
    for size, shown in (("256KB", 256 * 1024), ("0", 0)):
        conf.write_text(f'jetstream {{ store_dir: "{store}", write_buffer: {size} }}\n')
        settings = load_conf_file(str(conf))
        settings.http_port = -1
        async with brook.serve(port=0, settings=settings) as server:
            nc = await nats.connect(server.url)
            js = nc.jetstream()
            await js.add_stream(name="W", subjects=["w.>"])
            await js.publish("w.1", b"x")  # acknowledged: written and synced
            stats = (await varz(server))["jetstream"]["brook_store"]
            assert stats["write_buffer"] == shown
            assert stats["write_buffered_bytes"] == 0
            stream_store = server.jetstream.streams["W"].store  # the setting reached it
            assert stream_store.statistics()["write_buffer_bytes"] == shown
            info = await js.stream_info("W")
            assert info.state.messages >= 1
            await nc.close()
    conf.write_text(f'jetstream {{ store_dir: "{store}", write_buffer: 65MB }}\n')
    with pytest.raises(ConfigError, match="write_buffer: must be 0"):
        load_conf_file(str(conf)).validate()
