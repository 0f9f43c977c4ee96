"""Scale: one bucket with many distinct keys; `keys()` and a `watchall` of the whole bucket
complete, and the server's memory is measured (issue 5).

The servers run as their own processes so their resident memory can be read from /proc.
Keys go in through a pipelined raw-socket writer (`loadgen.put_keys`), not one nats-py
request per key.

Both servers run the 100k-key test and Brook the 1M-key one in the normal suite; the 1M
run takes about a minute against Brook on a 2-core machine (roughly 20 s of puts, 20 s for
`keys()` and 20 s for the `watchall`, most of it nats-py decoding a million messages
twice). nats-server's 1M run is there for comparison with `BROOK_KV_SCALE_1M=1`.

The watchers' subscriptions can queue the whole bucket (`backlog.BacklogJetStream`): nats-py
answers flow control on receipt, so a watcher whose application falls behind its reader
queues everything the server sends, and with the library's 512Ki-message default a 1M-key
watch dropped the overflow and stalled, against either server, whenever the client's
application fell more than half the bucket behind (test_kv_watch_backlog.py shows it small).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nats
import pytest

from tests.kv import loadgen
from tests.kv.backlog import BacklogJetStream
from tests.kv.conftest import NO_NATS_SERVER
from tests.kv.loadgen import key_name, put_keys, rss_bytes
from tests.support.natsserver import nats_server_binary

FULL = 1_000_000
FULL_ENABLED = os.environ.get("BROOK_KV_SCALE_1M") == "1"
MIB = 1024 * 1024
# A ceiling, not a target: it catches a server that buffers a whole bucket's deliveries.
CEILING_PER_KEY = 1024
CEILING_BASE = 256 * MIB


@contextlib.contextmanager
def server_process(kind: str, log: Path) -> Iterator[tuple[int, int]]:
    """(port, pid) of a fresh server with JetStream on file storage, logging to `log`."""
    if kind != "brook" and nats_server_binary() is None:
        pytest.skip(NO_NATS_SERVER)
    with loadgen.server_process(kind, log=log) as server:
        yield server


class PeakSampler:
    """Samples a process's RSS in the background (VmHWM is only a lifetime peak)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak = 0
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        while True:
            self.peak = max(self.peak, rss_bytes(self.pid)[0])
            await asyncio.sleep(0.1)

    def __enter__(self) -> PeakSampler:
        self.peak = rss_bytes(self.pid)[0]
        self._task = asyncio.get_running_loop().create_task(self._run())
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
        self.peak = max(self.peak, rss_bytes(self.pid)[0])


async def _scale(kind: str, n: int, report: Any, log: Path) -> None:
    client_errors: list[str] = []
    error_count = 0

    async def on_error(err: Exception) -> None:
        nonlocal error_count
        error_count += 1
        if len(client_errors) < 3:
            client_errors.append(f"{type(err).__name__}: {err}")

    def client_saw() -> str:
        """What the client reported, and the end of the server's log (a slow consumer
        or a crash says why the server closed the connection)."""
        server_said = log.read_text(errors="replace").splitlines()[-5:] if log.exists() else []
        return (
            f"the client reported {error_count} errors, first {client_errors}; "
            f"the server's log ends {server_said}"
        )

    # Generous: nats-py decodes about 20-60k messages a second on this kind of machine.
    limit_s = max(60.0, n / 4000)
    with server_process(kind, log) as (port, pid):
        nc = await nats.connect(
            f"nats://127.0.0.1:{port}", allow_reconnect=False, error_cb=on_error
        )
        # Room for every entry in a watcher's queue, however far the application lags.
        js = BacklogJetStream(nc, pending_msgs_limit=n + 1024, timeout=60)
        kv: Any = await js.create_key_value(bucket="big")
        rss_empty = rss_bytes(pid)[0]
        put_s = await asyncio.to_thread(put_keys, port, "big", n)
        rss_loaded = rss_bytes(pid)[0]
        assert (await kv.status()).values == n

        started = time.perf_counter()
        with PeakSampler(pid) as keys_mem:
            try:
                keys = await asyncio.wait_for(kv.keys(), limit_s)
            except TimeoutError:
                raise AssertionError(f"keys() incomplete; {client_saw()}") from None
        keys_s = time.perf_counter() - started
        assert len(keys) == n
        assert keys[0] == key_name(0)
        assert keys[-1] == key_name(n - 1)
        del keys

        started = time.perf_counter()
        count = 0
        last: Any = None

        async def watch_all(watcher: Any) -> None:
            # The iterator, not `updates(timeout=...)`: that wraps every entry in a task,
            # which made the application several times slower than nats-py's reader.
            nonlocal count, last
            async for entry in watcher:
                if entry is None:  # the end of the initial values
                    return
                count += 1
                last = entry

        with PeakSampler(pid) as watch_mem:
            watcher = await kv.watchall()
            try:
                await asyncio.wait_for(watch_all(watcher), limit_s)
            except TimeoutError:
                raise AssertionError(
                    f"watchall incomplete after {count} entries; {client_saw()}"
                ) from None
            await watcher.stop()
        watch_s = time.perf_counter() - started
        assert error_count == 0, client_saw()
        assert count == n
        assert last is not None
        assert (last.key, last.revision, last.delta) == (key_name(n - 1), n, 0)
        await nc.close()

    peak = max(keys_mem.peak, watch_mem.peak)
    with report():
        print(
            f"\n[kv scale] {kind}: {n} keys: put {put_s:.1f}s ({n / put_s:,.0f}/s), "
            f"keys() {keys_s:.1f}s, watchall {watch_s:.1f}s; server RSS: empty "
            f"{rss_empty / MIB:.0f} MiB, loaded {rss_loaded / MIB:.0f} MiB, peak during "
            f"keys() {keys_mem.peak / MIB:.0f} MiB, during watchall {watch_mem.peak / MIB:.0f} MiB"
        )
    assert peak < CEILING_BASE + CEILING_PER_KEY * n


@pytest.mark.timeout(180)
@pytest.mark.parametrize("kind", ["brook", "nats-server"])
async def test_100k_keys(kind: str, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    await _scale(kind, 100_000, capsys.disabled, tmp_path / "server.log")


@pytest.mark.timeout(900)
@pytest.mark.parametrize(
    "kind",
    [
        "brook",
        pytest.param(
            "nats-server",
            marks=pytest.mark.skipif(
                not FULL_ENABLED, reason="nats-server's 1M-key run: set BROOK_KV_SCALE_1M=1"
            ),
        ),
    ],
)
async def test_1m_keys(kind: str, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    await _scale(kind, FULL, capsys.disabled, tmp_path / "server.log")
