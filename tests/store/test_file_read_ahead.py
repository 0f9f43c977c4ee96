"""The file store's read-ahead buffers (`reader.Reader._bytes_at`) never serve stale or wrong
bytes: more sequential readers than buffers, interleaved with appends, removals and
erases, read exactly what a model of the stream says is there; so do readers of runs
(`load_batch`, one span of bytes per run of records)."""

from __future__ import annotations

from pathlib import Path

from brook.jetstream.store.file import FileStore
from brook.jetstream.store.file.reader import READ_AHEAD_READERS, READ_RUN_BYTES

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


def test_runs_of_records_across_gaps_segments_and_the_span_limit(tmp_path: Path) -> None:
    store = FileStore(tmp_path / "s", segment_bytes_max=256 * 1024, fsync=False)
    model: dict[int, tuple[str, bytes | None, bytes]] = {}
    big = READ_RUN_BYTES // 3  # a few of these make a run longer than one span

    def put(i: int) -> None:
        size = big if i % 50 == 0 else i % 300
        subject, header, data = f"s.{i % 3}", HDR if i % 4 == 0 else None, b"%d;" % i * size
        model[store.store(subject, header, data[:size] or b"", T0 + i)] = (
            subject,
            header,
            data[:size],
        )

    try:
        for i in range(1, 1501):
            put(i)
        for seq in list(model)[5::9]:  # gaps inside runs, erased and not
            assert store.remove(seq, erase=seq % 2 == 0)
            del model[seq]
        for count in (1, 7, 128, 1000):
            for filter_subject in ("", "s.1"):
                pos = 0
                seen: list[int] = []
                while batch := store.load_batch(filter_subject, pos + 1, count):
                    assert len(batch) <= count
                    for m in batch:
                        assert (m.subject, m.header, m.data) == model[m.seq]
                        seen.append(m.seq)
                    pos = batch[-1].seq
                wanted = [s for s, v in model.items() if filter_subject in ("", v[0])]
                assert seen == wanted
    finally:
        store.close()
