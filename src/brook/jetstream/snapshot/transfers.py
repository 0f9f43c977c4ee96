"""`Transfers`: the snapshots and restores in progress, their limits, threads and staging area.

Restores are staged under `<store_dir>/restores/` (a temporary directory without a store
dir), never under `streams/`, so a restore cut short by anything, a SIGKILL included, leaves
nothing the engine would open: `start()` empties the staging area. The only step that makes
a restored stream visible on disk is one `rename()` into `streams/` (restore.py).
"""

from __future__ import annotations

import asyncio
import logging
import shutil
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from brook import limits
from brook.jetstream.engine import JetStream
from brook.jetstream.stream import Stream

log = logging.getLogger("brook.jetstream.snapshot")

STAGING_DIR = "restores"


class Transfers:
    """Owns every snapshot and restore session of one engine (see the module docstring).

    `stream_info(stream)` builds the stream info of a restore's final response (the API
    layer's shape); `restore_max_bytes` (-1: none) bounds an upload, `restore_idle_timeout_s`
    the wait for its next chunk, `snapshot_ack_timeout_s` a snapshot's wait for an ack."""

    def __init__(
        self,
        js: JetStream,
        stream_info: Callable[[Stream], dict[str, Any]],
        *,
        restore_max_bytes: int = limits.RESTORE_MAX_BYTES,
        restore_idle_timeout_s: float = limits.RESTORE_IDLE_TIMEOUT_S,
        snapshot_ack_timeout_s: float = limits.SNAPSHOT_ACK_TIMEOUT_S,
        snapshot_interest_wait_s: float = limits.SNAPSHOT_INTEREST_WAIT_S,
    ) -> None:
        self.js = js
        self.stream_info = stream_info
        self.restore_max_bytes = restore_max_bytes
        self.restore_idle_timeout_s = restore_idle_timeout_s
        self.snapshot_ack_timeout_s = snapshot_ack_timeout_s
        self.snapshot_interest_wait_s = snapshot_interest_wait_s
        self.executor = ThreadPoolExecutor(
            limits.TRANSFER_THREADS, thread_name_prefix="brook-transfer"
        )
        self._tasks: set[asyncio.Task[None]] = set()
        self.snapshots = 0  # in progress
        self.restores = 0
        self._staging: Path | None = None

    @property
    def staging(self) -> Path:
        """Where restores are staged: beside `streams/`, on the same filesystem."""
        if self._staging is None:
            self._staging = self.js.root.parent / STAGING_DIR
            self._staging.mkdir(parents=True, exist_ok=True)
        return self._staging

    def start(self) -> None:
        """Remove what restores cut short (by a crash) left in the staging area."""
        leftovers = self.js.root.parent / STAGING_DIR
        if leftovers.is_dir() and any(leftovers.iterdir()):
            log.warning("removing unfinished restores left in %s", leftovers)
            shutil.rmtree(leftovers, ignore_errors=True)

    def spawn(self, coro: Any) -> None:
        """Run a session; `stop()` cancels those still running."""
        task: asyncio.Task[None] = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def stop(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        self.executor.shutdown(wait=True)

    def statistics(self) -> dict[str, Any]:
        """For monitoring: the limits in force and the sessions in progress."""
        return {
            "restore_max_bytes": self.restore_max_bytes,
            "restore_idle_timeout": int(self.restore_idle_timeout_s * 1e9),
            "snapshots_in_progress": self.snapshots,
            "restores_in_progress": self.restores,
        }
