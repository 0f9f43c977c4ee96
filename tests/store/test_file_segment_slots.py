"""A segment rolls at `segment_slots_max` message slots as well as at its bytes (ADR 0061),
so the active segment's unpacked index columns stay small: on real files, one message at a
time and in runs (which roll where single stores would), across reopens with another
cap, and through a real server's config (`jetstream { segment_slots_max }`), /varz and a
restart. (The store model test's "packed" kind rolls at 3 slots or 256 bytes.)"""

from __future__ import annotations

from pathlib import Path

import nats
import pytest

import brook
from brook.config.conf import load_conf_file
from brook.config.errors import ConfigError
from brook.jetstream.store.base import NewMessage
from brook.jetstream.store.file import FileStore
from brook.jetstream.store.file.recovery import MSGS
from brook.jetstream.store.file.segment import parse_segment_filename
from tests.support.monitor import varz

T0 = 1_700_000_000_000_000_000


def names(store_dir: Path) -> list[int]:
    """The segment names in the store's `msgs/`, ascending."""
    found = (parse_segment_filename(p.name) for p in (store_dir / MSGS).iterdir())
    return sorted(n for n in found if n is not None)


def message(seq: int) -> NewMessage:
    return (f"sl.{seq % 3}", b"NATS/1.0\r\nI: 1\r\n\r\n" if seq % 4 == 0 else None,
            b"m-%05d" % seq, T0 + seq)  # fmt: skip


def check_all(s: FileStore, last: int) -> None:
    for seq in range(1, last + 1):
        m = s.load(seq)
        assert m is not None
        subject, header, data, ts = message(seq)
        assert (m.seq, m.subject, m.data, m.ts_ns) == (seq, subject, data, ts)
        assert (m.header is not None) == (header is not None)


def test_segments_roll_at_the_slot_cap_one_by_one_and_in_runs(tmp_path: Path) -> None:
    one, run = tmp_path / "one", tmp_path / "run"
    a = FileStore(one, segment_slots_max=10, fsync=False)
    b = FileStore(run, segment_slots_max=10, fsync=False)
    try:
        for seq in range(1, 26):
            a.store(*message(seq))
        assert names(one) == [1, 11, 21]
        assert a.statistics()["segment_slots_max"] == 10
        # Runs: one that fits, one that fills the active segment and three more.
        b.store_run([message(seq) for seq in range(1, 26)])
        assert names(run) == [1, 11, 21]
        for seq in range(26, 63):
            a.store(*message(seq))
        b.store_run([message(seq) for seq in range(26, 63)])
        assert names(one) == names(run) == [1, 11, 21, 31, 41, 51, 61]
        check_all(a, 62)
        check_all(b, 62)
    finally:
        a.close()
        b.close()


def test_a_reopen_keeps_the_messages_and_rolls_at_its_own_cap(tmp_path: Path) -> None:
    d = tmp_path / "s"
    s = FileStore(d, segment_slots_max=10, fsync=False)
    s.store_run([message(seq) for seq in range(1, 13)])  # the active segment: 11, 12
    s.close()
    # A smaller cap: the active segment takes appends up to it.
    s = FileStore(d, segment_slots_max=4, fsync=False)
    try:
        check_all(s, 12)
        s.store_run([message(seq) for seq in range(13, 20)])  # 13, 14 to 11; 15-18; 19
        assert names(d) == [1, 11, 15, 19]
    finally:
        s.close()
    # A cap below what the active segment holds already: the next append rolls.
    s = FileStore(d, segment_slots_max=1, fsync=False)
    try:
        s.store(*message(20))
        s.store(*message(21))
        assert names(d) == [1, 11, 15, 19, 20, 21]
        check_all(s, 21)
        assert s.remove(16)
        assert s.load(16) is None
    finally:
        s.close()
    s = FileStore(d, fsync=False)
    try:
        assert s.state().messages == 20
        assert s.state().last_seq == 21
    finally:
        s.close()


def test_a_slot_cap_below_one_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="segment_slots_max must be >= 1"):
        FileStore(tmp_path / "s", segment_slots_max=0)


@pytest.mark.timeout(30)
async def test_the_slot_cap_is_configured_shown_and_kept_across_a_restart(
    tmp_path: Path,
) -> None:
    conf = tmp_path / "brook.conf"
    store = tmp_path / "store"
    conf.write_text(f'jetstream {{ store_dir: "{store}", segment_slots_max: 1024 }}\n')
    settings = load_conf_file(str(conf))
    settings.http_port = -1
    total = 2500
    async with brook.serve(port=0, settings=settings) as server:
        nc = await nats.connect(server.url)
        js = nc.jetstream()
        await js.add_stream(name="P", subjects=["p.>"])
        for i in range(total - 1):
            await nc.publish(f"p.{i % 3}", b"x%d" % i)
        await js.publish("p.last", b"last")  # acked: every publish before it is stored
        assert (await js.stream_info("P")).state.messages == total
        assert (await varz(server))["jetstream"]["brook_store"]["segment_slots_max"] == 1024
        await nc.close()
    data = next(store.rglob("P")) / "data"
    assert names(data) == [1, 1025, 2049]
    async with brook.serve(port=0, settings=settings) as server:
        nc = await nats.connect(server.url)
        js = nc.jetstream()
        assert (await js.stream_info("P")).state.messages == total
        for seq in (1, 1024, 1025, 2048, 2049):
            got = await js.get_msg("P", seq)
            assert got.data == b"x%d" % (seq - 1)
        assert (await js.get_msg("P", total)).data == b"last"
        await nc.close()
    conf.write_text(f'jetstream {{ store_dir: "{store}", segment_slots_max: 1023 }}\n')
    with pytest.raises(ConfigError, match="segment_slots_max: must be 1024 to 67108864"):
        load_conf_file(str(conf)).validate()
