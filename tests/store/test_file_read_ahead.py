"""The file store's read-ahead buffers (`FileStore._record`) never serve stale or wrong
bytes: more sequential readers than buffers, interleaved with appends, removals and
erases, read exactly what a model of the stream says is there."""

from __future__ import annotations

from pathlib import Path

from brook.jetstream.store.file import FileStore
from brook.jetstream.store.file.store import READ_AHEAD_READERS

T0 = 1_700_000_000_000_000_000
HDR = b"NATS/1.0\r\nk: v\r\n\r\n"


def test_sequential_readers_see_every_change(tmp_path: Path) -> None:
    store = FileStore(tmp_path / "s", segment_bytes_max=64 * 1024, fsync=False)
    model: dict[int, tuple[str, bytes | None, bytes]] = {}

    def put(i: int) -> None:
        subject, header, data = f"s.{i % 7}", HDR if i % 5 == 0 else None, b"%d;" % i * (i % 40)
        model[store.store(subject, header, data, T0 + i)] = (subject, header, data)

    try:
        for i in range(1, 2001):
            put(i)
        positions = [0] * (READ_AHEAD_READERS + 2)  # more readers than buffers
        for step in range(1, 3000):
            for r, pos in enumerate(positions):
                m = store.load_next("", pos + 1)
                following = [s for s in model if s > pos]
                if not following:
                    assert m is None
                    continue
                assert m is not None
                assert m.seq == min(following)
                assert (m.subject, m.header, m.data) == model[m.seq]
                positions[r] = m.seq
            if step % 40 == 0:  # change the log under the readers
                live = sorted(model)
                for victim, erase in ((live[-3], True), (live[len(live) // 2], False)):
                    assert store.remove(victim, erase=erase)
                    del model[victim]
                for j in range(3):
                    put(3000 + step + j)
            if all(p >= max(model) for p in positions):
                break
        assert all(p == max(model) for p in positions)
    finally:
        store.close()
