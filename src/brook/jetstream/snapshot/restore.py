"""Receiving a restore: nats-server's flow (`processStreamRestore`), into a staged, checked
stream that appears atomically.

1. The API handler has checked the request (api/snapshots.py) and answered with the
   `deliver_subject` `$JS.SNAPSHOT.RESTORE.<stream>.<token>` this session listens on.
2. Each chunk must carry a reply subject (without one the restore is abandoned,
   unanswered); it is appended to `<staging>/<token>.upload` in a worker thread and then
   acknowledged with an empty message. A chunk that would take the upload past
   `restore_max_bytes`, or that cannot be written, is answered with the error instead.
3. An empty message ends the upload; its reply subject gets the final answer: a
   `stream_create_response` with the stream's info, or the error.
4. No chunk for `restore_idle_timeout_s` (5 s): the restore is abandoned, unanswered, as
   nats-server's stall watchdog abandons it.

After 3, in a worker thread, the upload is unpacked and checked (archive.unpack) into
`<staging>/<token>/`, the future stream directory: the file store is opened there (which
replays and checks its log) and compared with the snapshot's manifest, durable consumers'
files and `stream.json` (with the request's configuration) are written, and everything is
fsynced. Then on the event loop, without yielding: the name and subjects are checked against
the streams that exist now, the directory is renamed into `streams/`, the commit point
(before it nothing of the restore is visible, after it all of it is, a SIGKILL included),
and the engine adopts the open store. A failure before the rename removes the staging files.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
from dataclasses import dataclass, field
from typing import Any

from brook.jetstream import models
from brook.jetstream.consumer.files import CONSUMERS_DIR, is_persisted
from brook.jetstream.consumer.registry import Consumer
from brook.jetstream.definitions import DATA_DIR, STREAM_FILE, stream_record
from brook.jetstream.errors import ApiError, api_error
from brook.jetstream.models.consumer_rules import parse_consumer_create
from brook.jetstream.models.stream_config import StreamConfig
from brook.jetstream.snapshot.archive import ArchiveError, ArchiveTooLarge, Unpacked, unpack
from brook.jetstream.snapshot.transfers import Transfers
from brook.jetstream.store.base import MessageStore, StoreError
from brook.jetstream.store.file import FileStore
from brook.jetstream.store.file.recovery import MSGS, fsync_path
from brook.jetstream.store.memory import MemorySnapshot, MemoryStore
from brook.jetstream.stream import Stream
from brook.nuid import random_id

log = logging.getLogger("brook.jetstream.snapshot")

DELIVER_PREFIX = "$JS.SNAPSHOT.RESTORE"
CREATE_RESPONSE = "io.nats.jetstream.api.v1.stream_create_response"


@dataclass
class _Prepared:
    """A checked, staged stream, ready to be committed."""

    created_ns: int
    store: MessageStore
    volatile: list[Consumer] = field(default_factory=list)


class RestoreSession:
    """One restore of stream `config.name` (see the module docstring)."""

    def __init__(
        self, transfers: Transfers, config: StreamConfig, client: dict[str, Any] | None = None
    ) -> None:
        """`client`: the requester, as the restore's advisories name it."""
        self._t = transfers
        self._client = client
        self._start_ns = transfers.js.advisories.now_ns()
        self._config = config
        self._name: str = config.name
        tok = random_id()
        self.deliver_subject = f"{DELIVER_PREFIX}.{self._name}.{tok}"
        self._upload = transfers.staging / f"{tok}.upload"
        self._dir = transfers.staging / tok
        self._queue: asyncio.Queue[tuple[bytes | None, bytes]] = asyncio.Queue()
        self._received = 0
        self._sub: Any = None

    def start(self) -> None:
        """Create the upload file and listen; an error here is the RESTORE request's answer."""
        try:
            fd = os.open(self._upload, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except OSError as exc:
            raise api_error("STREAM_RESTORE", err=str(exc)) from None
        self._sub = self._t.js.internal.subscribe(self.deliver_subject, self._on_chunk)
        self._t.js.advisories.restore_created(self._name, self._client)
        self._t.spawn(self._run(fd))

    def _on_chunk(
        self, subject: bytes, reply: bytes | None, header: bytes | None, data: bytes
    ) -> None:
        self._queue.put_nowait((reply, data))

    def _stop_listening(self) -> None:
        if self._sub is not None:
            self._t.js.internal.unsubscribe(self._sub)
            self._sub = None

    def _answer(self, reply: bytes, body: dict[str, Any]) -> None:
        data = json.dumps({"type": CREATE_RESPONSE, **body}, separators=(",", ":")).encode()
        self._t.js.internal.publish(reply, data)

    async def _run(self, fd: int) -> None:
        t = self._t
        loop = asyncio.get_running_loop()
        t.restores += 1
        log.info("starting restore for stream '$G > %s'", self._name)
        committed = False
        try:
            while True:
                try:
                    reply, data = await asyncio.wait_for(
                        self._queue.get(), t.restore_idle_timeout_s
                    )
                except TimeoutError:
                    log.warning("restore for stream '$G > %s' is stalled: abandoned", self._name)
                    return
                if reply is None:
                    log.warning(
                        "restore for stream '$G > %s' requires reply subject for each chunk",
                        self._name,
                    )
                    return
                body: dict[str, Any] | None = None
                if not data:  # the end of the upload
                    self._stop_listening()
                    body, committed = await self._finish()
                elif 0 <= t.restore_max_bytes < self._received + len(data):
                    body = _failure(
                        f"snapshot exceeds restore_max_bytes ({t.restore_max_bytes} bytes)"
                    )
                else:
                    try:
                        await loop.run_in_executor(t.executor, _write_all, fd, data)
                    except OSError as exc:
                        body = _failure(str(exc))
                if body is not None:  # the last answer: what failed is gone by then
                    self._stop_listening()
                    os.close(fd)
                    fd = -1
                    await loop.run_in_executor(t.executor, _remove, self._leftovers(committed))
                    t.js.advisories.restore_completed(
                        self._name, self._start_ns, self._received, self._client
                    )
                    self._answer(reply, body)
                    return
                self._received += len(data)
                t.js.internal.publish(reply, b"")
        finally:
            t.restores -= 1
            self._stop_listening()
            if fd >= 0:
                os.close(fd)
                loop.run_in_executor(t.executor, _remove, self._leftovers(committed))

    def _leftovers(self, committed: bool) -> list[Any]:
        """The staging files of this restore (its directory became the stream's if committed)."""
        return [self._upload] if committed else [self._upload, self._dir]

    async def _finish(self) -> tuple[dict[str, Any], bool]:
        """The final answer's body, and whether the stream was committed."""
        loop = asyncio.get_running_loop()
        budget = self._budget()  # the engine's counters are read here, on the event loop
        try:
            prepared = await loop.run_in_executor(self._t.executor, self._prepare, budget)
        except ApiError as err:
            return {"error": err.to_json()}, False
        except ArchiveTooLarge:
            exceeded = "MEMORY" if self._config.storage == "memory" else "STORAGE"
            return {"error": api_error(f"{exceeded}_RESOURCES_EXCEEDED").to_json()}, False
        except (ArchiveError, OSError, StoreError, ValueError, KeyError, TypeError) as exc:
            log.warning("restore of stream '$G > %s' failed: %s", self._name, exc)
            return _failure(str(exc)), False
        except Exception as exc:  # a bug: still answered, and logged with its trace
            log.exception("restore of stream '$G > %s' failed", self._name)
            return _failure(f"internal error: {exc}"), False
        try:
            stream = self._commit(prepared)
        except ApiError as err:
            prepared.store.close()
            return {"error": err.to_json()}, False
        except OSError as exc:
            prepared.store.close()
            return _failure(str(exc)), False
        log.info("completed restore of %d bytes for stream '$G > %s'", self._received, self._name)
        return self._t.stream_info(stream), True

    # ------------------------------------------------------------------ worker thread

    def _budget(self) -> int:
        """The bytes the server's and account's store limits leave for this stream (-1:
        no limit; quota.py)."""
        return self._t.js.room(self._config.storage)

    def _prepare(self, budget: int) -> _Prepared:
        config = self._config
        self._dir.mkdir()
        unpacked = unpack(self._upload, self._dir, budget=budget)
        self._upload.unlink()  # the space it took is needed no more
        if unpacked.manifest.get("stream") != self._name:
            raise ArchiveError("stream names do not match")
        archived = models.parse_stream_update(unpacked.stream["config"], subject_name=self._name)
        models.check_update(archived, config)
        keeps_files = self._t.js.keeps_files(config)
        store = self._open_store(unpacked, keeps_files)
        try:
            volatile = self._place_consumers(unpacked, keeps_files)
            created_ns = int(unpacked.stream["created_ns"])
            _write_synced(self._dir / STREAM_FILE, stream_record(config, created_ns))
            for sub in (
                self._dir / DATA_DIR / MSGS,
                self._dir / DATA_DIR,
                self._dir / CONSUMERS_DIR,
            ):
                if sub.is_dir():
                    fsync_path(sub)
            fsync_path(self._dir)
            fsync_path(self._t.staging)
        except BaseException:
            store.close()
            raise
        return _Prepared(created_ns, store, volatile)

    def _open_store(self, unpacked: Unpacked, keeps_files: bool) -> MessageStore:
        """The restored messages' store, checked against the snapshot's manifest."""
        expected = unpacked.manifest.get("state", {})
        if unpacked.messages is None:  # a file store, in the staging directory
            js = self._t.js  # its segments made as the engine makes every file store's
            file_store = FileStore(
                self._dir / DATA_DIR,
                index_hot_segments=js.index_hot_segments,
                segment_slots_max=js.segment_slots_max,
            )
            store: MessageStore = file_store
            if not keeps_files:  # JetStream without a store directory keeps it in memory
                snapshot = _read_all(file_store)
                file_store.close()
                store = MemoryStore.thaw(snapshot)
        else:
            if keeps_files:
                raise ArchiveError("a memory store's snapshot restores as a memory stream only")
            store = MemoryStore.thaw(unpacked.messages)
        state = store.state()
        found = {
            "messages": state.messages,
            "first_seq": state.first_seq,
            "last_seq": state.last_seq,
        }
        if any(found[k] != expected.get(k) for k in found):
            store.close()
            raise ArchiveError(f"content does not match the snapshot's manifest: {found}")
        return store

    def _place_consumers(self, unpacked: Unpacked, keeps_files: bool) -> list[Consumer]:
        """Write the durable consumers' files into the staging directory; return the rest."""
        config = self._config
        volatile: list[Consumer] = []
        for name, raw in sorted(unpacked.consumers.items()):
            try:
                record = json.loads(raw)
                cfg = parse_consumer_create(
                    {"stream_name": self._name, "config": record["config"]},
                    stream=config,
                    subject_stream=self._name,
                    subject_consumer=name,
                )
                state = dict(record["state"])
                created_ns = int(record["created_ns"])
            except ApiError as err:
                raise ArchiveError(f"consumer {name!r}: {err.description}") from None
            except (ValueError, KeyError, TypeError) as exc:
                raise ArchiveError(f"consumer {name!r}: {exc!r}") from None
            if keeps_files and is_persisted(config.storage, cfg):
                path = self._dir / CONSUMERS_DIR / f"{name}.json"
                path.parent.mkdir(exist_ok=True)
                _write_synced(path, raw)
            else:
                volatile.append((cfg, created_ns, state))
        return volatile

    # ------------------------------------------------------------------ event loop

    def _commit(self, prepared: _Prepared) -> Stream:
        """Make the stream visible: checks, the rename, adoption; nothing here yields."""
        js = self._t.js
        config = self._config
        js.check_new(config, exists="STREAM_NAME_EXIST_RESTORE_FAILED")
        final = js.root / self._name
        if final.exists():
            raise api_error("STREAM_RESTORE", err=f"{final} exists (a stream that failed to open?)")
        os.rename(self._dir, final)
        fsync_path(js.root)
        if isinstance(prepared.store, FileStore):
            prepared.store.relocate(final / DATA_DIR)
        stream = js.adopt(config, prepared.created_ns, prepared.store, prepared.volatile)
        stream.enforce_all_limits()
        return stream


def _failure(reason: str) -> dict[str, Any]:
    return {"error": api_error("STREAM_RESTORE", err=reason).to_json()}


def _read_all(store: FileStore) -> MemorySnapshot:
    state = store.state()
    messages = store.load_batch("", state.first_seq, max(state.messages, 1))
    return MemorySnapshot(state.first_seq, state.last_seq, state.last_ts_ns, messages)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _write_synced(path: Any, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def _remove(paths: list[Any]) -> None:
    for path in paths:
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        elif path.exists():
            path.unlink()
