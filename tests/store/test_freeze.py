"""A store frozen for a snapshot reads back exactly as it was, whatever happens to it after.

File store: the frozen segment prefixes, copied into a new directory and opened, replay to
the state and messages of the moment of freezing, although afterwards messages were
appended, erased in place, purged and whole segments deleted. Memory store: `thaw` of a
frozen content is the store as it was.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from brook.jetstream.store.base import StoredMessage
from brook.jetstream.store.file import FileStore
from brook.jetstream.store.memory import MemorySnapshot, MemoryStore

T0 = 1_700_000_000_000_000_000


def everything(store: FileStore | MemoryStore) -> list[StoredMessage]:
    state = store.state()
    return store.load_batch("", state.first_seq, state.messages + 1)


def test_frozen_file_log_replays_to_the_moment_of_freezing(tmp_path: Path) -> None:
    store = FileStore(tmp_path / "live", segment_bytes_max=4096)
    for i in range(200):
        store.store(
            f"s.{i % 5}", b"NATS/1.0\r\nI: %d\r\n\r\n" % i if i % 2 else None, b"x%d" % i, T0 + i
        )
    store.remove(7)
    store.remove(8, erase=True)
    store.sync()
    state = store.state(deleted_details=True)
    messages = everything(store)
    frozen = store.freeze()
    try:
        # Afterwards: appends, erasures of frozen bytes, a purge that deletes whole segments.
        for i in range(50):
            store.store("s.new", None, b"later", T0 + 1000 + i)
        for seq in (3, 100, 199):
            assert store.remove(seq, erase=True)
        store.purge(up_to_seq=150)
        store.sync()  # unlinks the emptied segments
        copy = tmp_path / "copy"
        (copy / "msgs").mkdir(parents=True)
        (copy / "meta.json").write_bytes(frozen.meta)
        for filename, size in frozen.segments.items():
            data = b"".join(frozen.read(filename, off, 1000) for off in range(0, size, 1000))
            assert len(data) == size
            (copy / "msgs" / filename).write_bytes(data)
    finally:
        frozen.close()
        store.close()
    restored = FileStore(copy)
    try:
        assert restored.state(deleted_details=True) == state
        assert everything(restored) == messages
        assert not restored.recovery_report.findings
    finally:
        restored.close()


def test_a_closed_frozen_log_is_no_longer_told_about_erasures(tmp_path: Path) -> None:
    store = FileStore(tmp_path)
    store.store("a", None, b"1", T0)
    frozen = store.freeze()
    frozen.close()
    assert store.remove(1, erase=True)  # nothing left to preserve into
    store.close()


def test_memory_store_thaws_to_its_frozen_content() -> None:
    store = MemoryStore(first_seq=5)
    for i in range(30):
        store.store(f"m.{i % 3}", b"NATS/1.0\r\nA: b\r\n\r\n" if i % 2 else None, b"%d" % i, T0 + i)
    store.remove(9)
    store.purge(up_to_seq=8)
    state = store.state(deleted_details=True)
    messages = everything(store)
    frozen = store.freeze()
    store.store("m.late", None, b"late", T0 + 99)
    store.purge()
    thawed = MemoryStore.thaw(frozen)
    assert thawed.state(deleted_details=True) == state
    assert everything(thawed) == messages
    assert thawed.store("m.next", None, b"", T0 + 100) == state.last_seq + 1


def test_memory_store_thaws_an_empty_store_with_its_sequences() -> None:
    store = MemoryStore()
    for i in range(3):
        store.store("e", None, b"", T0 + i)
    store.purge()
    thawed = MemoryStore.thaw(store.freeze())
    assert thawed.state() == store.state()
    assert thawed.store("e", None, b"", T0) == 4


@pytest.mark.parametrize(
    "snapshot",
    [
        MemorySnapshot(1, 1, 0, [StoredMessage(2, "a", None, b"", T0)]),  # beyond last_seq
        MemorySnapshot(
            1, 3, 0, [StoredMessage(2, "a", None, b"", T0), StoredMessage(2, "a", None, b"", T0)]
        ),
        MemorySnapshot(0, 3, 0, []),
    ],
)
def test_memory_store_refuses_an_inconsistent_snapshot(snapshot: MemorySnapshot) -> None:
    with pytest.raises(ValueError, match=r"last_seq|after"):
        MemoryStore.thaw(snapshot)
