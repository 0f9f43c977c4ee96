"""Durability modes: fsync before every PubAck (default), nats-server's interval mode, and
a stream's `persist_mode: async`."""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.js.api import PersistMode

import brook
from brook.config.conf import load_conf_file
from brook.config.flags import parse_serve_args
from brook.config.settings import ConfigError, JetStreamSettings, Settings

pytestmark = pytest.mark.timeout(30)


def _syncs(server: Any, stream: str) -> int:
    return int(server.jetstream.get(stream).store.statistics()["syncs"])


async def test_default_acknowledges_only_after_fsync(tmp_path: Path) -> None:
    async with brook.serve(port=0, store_dir=str(tmp_path)) as server:
        nc = await nats.connect(server.url)
        js = nc.jetstream()
        await js.add_stream(name="D", subjects=["d"])
        before = _syncs(server, "D")
        for i in range(5):
            await js.publish("d", b"%d" % i)
        assert _syncs(server, "D") >= before + 5, "each awaited publish waited for its fsync"
        await nc.close()


async def test_interval_mode_acknowledges_without_waiting_for_fsync(tmp_path: Path) -> None:
    settings = Settings(jetstream=JetStreamSettings(enabled=True, sync_interval_s=3600))
    async with brook.serve(port=0, store_dir=str(tmp_path), settings=settings) as server:
        assert server.jetstream.sync_interval_s == 3600
        nc = await nats.connect(server.url)
        js = nc.jetstream()
        await js.add_stream(name="I", subjects=["i"])
        before = _syncs(server, "I")  # creating the store may sync its directory once
        for i in range(5):
            assert (await js.publish("i", b"%d" % i)).seq == i + 1
        assert _syncs(server, "I") == before, "no fsync happened before the acknowledgements"
        await nc.close()
    # A clean shutdown still syncs and closes: the messages are there after a restart.
    async with brook.serve(port=0, store_dir=str(tmp_path)) as server:
        nc = await nats.connect(server.url)
        assert (await nc.jetstream().stream_info("I")).state.messages == 5
        await nc.close()


@pytest.mark.parametrize(
    ("text", "seconds"), [("always", 0.0), ('"2m"', 120.0), ("30", 30.0), ('"500ms"', 0.5)]
)
def test_sync_interval_in_config_file(tmp_path: Path, text: str, seconds: float) -> None:
    conf = tmp_path / "brook.conf"
    conf.write_text(f"jetstream {{ store_dir: {tmp_path}, sync_interval: {text} }}\n")
    assert load_conf_file(str(conf)).jetstream.sync_interval_s == seconds


def test_sync_interval_flag_and_errors() -> None:
    assert parse_serve_args(["--sync-interval", "2s"]).jetstream.sync_interval_s == 2.0
    assert parse_serve_args(["--sync_interval=always"]).jetstream.sync_interval_s == 0.0
    with pytest.raises(ConfigError, match="sync-interval"):
        parse_serve_args(["--sync-interval", "soon"])
    with pytest.raises(ConfigError, match="sync-interval"):
        parse_serve_args(["--sync-interval", "0s"])


async def test_interval_mode_syncs_periodically(tmp_path: Path) -> None:
    settings = Settings(jetstream=JetStreamSettings(enabled=True, sync_interval_s=0.05))
    async with brook.serve(port=0, store_dir=str(tmp_path), settings=settings) as server:
        nc = await nats.connect(server.url)
        js = nc.jetstream()
        await js.add_stream(name="P", subjects=["p"])
        before = _syncs(server, "P")
        await js.publish("p", b"x")
        async with asyncio.timeout(5):
            while _syncs(server, "P") == before:
                await asyncio.sleep(0.02)
        await nc.close()


async def test_async_persist_mode_acknowledges_before_the_fsync_that_follows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While the disk's fsyncs are held back, a default stream's PubAck waits and an async
    stream's does not; once they go through, the async stream is synced without another
    publish asking for it."""
    gate = threading.Event()
    real_fsync = os.fsync

    def held_fsync(fd: int) -> None:
        if threading.current_thread() is not threading.main_thread():
            gate.wait(10)  # the sync threads' fsyncs wait for the gate
        real_fsync(fd)

    async with brook.serve(port=0, store_dir=str(tmp_path)) as server:
        nc = await nats.connect(server.url)
        js = nc.jetstream()
        info = await js.add_stream(name="A", subjects=["a"], persist_mode=PersistMode.ASYNC)
        assert info.config.persist_mode == PersistMode.ASYNC
        await js.add_stream(name="D", subjects=["d"])
        await js.publish("a", b"first")  # the new stores' first syncs are done
        await js.publish("d", b"first")
        monkeypatch.setattr(os, "fsync", held_fsync)
        try:
            for i in range(5):
                ack = await asyncio.wait_for(js.publish("a", b"%d" % i), 2)
                assert ack.seq == i + 2
            waiting = asyncio.ensure_future(js.publish("d", b"x"))
            done, _ = await asyncio.wait({waiting}, timeout=0.5)
            assert not done, "a default stream's PubAck waits for its fsync"
            synced = _syncs(server, "A")
        finally:
            gate.set()
        assert (await asyncio.wait_for(waiting, 5)).seq == 2
        async with asyncio.timeout(5):
            while _syncs(server, "A") == synced:
                await asyncio.sleep(0.02)
        await nc.close()
