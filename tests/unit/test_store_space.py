"""`StoreSpace` (jetstream/space.py) on a real tmpfs, with a manual clock: when it reads the
free space, when it refuses, when it resumes, and that each change is logged once."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from brook import limits
from brook.jetstream.space import StoreSpace, default_reserve
from tests.support.tmpfs import fill_up, free_bytes, small_tmpfs

MIB = 1024 * 1024


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def set_free(disk: Path, nbytes: int) -> None:
    """Make the filesystem have about `nbytes` free, with one filler file."""
    filler = disk / "filler"
    if filler.exists():
        os.remove(filler)
    fill_up(disk, leave_bytes=nbytes)


def test_default_reserve() -> None:
    assert default_reserve(100 * 1024 * MIB) == limits.STORE_RESERVE_BYTES
    assert default_reserve(8 * MIB) == 8 * MIB // 20


def test_admission_follows_the_free_space(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "brook.jetstream.space")
    check = limits.STORE_SPACE_CHECK_BYTES
    margin = limits.STORE_RESUME_MARGIN_BYTES
    with small_tmpfs(tmp_path / "disk", 8 * MIB) as disk:
        space = StoreSpace(disk, 2 * MIB, clock=Clock())
        assert space.reserve_bytes == 2 * MIB
        # Plenty of room: the next reading comes after STORE_SPACE_CHECK_BYTES. Another
        # program filling the disk meanwhile is noticed then (or by a write's ENOSPC).
        assert space.admit(check - 1)
        set_free(disk, MIB)
        assert space.statistics()["full"] is False
        assert not space.admit(1)
        assert not space.admit(0)  # every refusal reads again: still full
        # Room again, but within the margin: still refused (no flapping).
        set_free(disk, 2 * MIB + margin // 2)
        assert not space.admit(0)
        set_free(disk, 2 * MIB + margin + MIB // 2)
        assert space.admit(0)
        # Little headroom: the next reading comes once half of it is admitted.
        half = (free_bytes(disk) - space.reserve_bytes) // 2
        assert half < check
        assert space.admit(half - 1)
        set_free(disk, MIB)
        assert not space.admit(1)
        stats = space.statistics()
        assert (stats["full"], stats["full_episodes"], stats["refused_publishes"]) == (True, 2, 4)
        assert stats["free_bytes"] == free_bytes(disk)
        space.no_space(OSError("ENOSPC"))  # already full: nothing more to say
    messages = [r.getMessage() for r in caplog.records]
    assert sum("is full" in m for m in messages) == 2
    assert sum("resumed" in m for m in messages) == 1


def test_a_full_disk_at_start_is_read_mostly(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "brook.jetstream.space")
    with small_tmpfs(tmp_path / "disk", 8 * MIB) as disk:
        set_free(disk, MIB)
        space = StoreSpace(disk, 2 * MIB, clock=Clock())
        assert space.full
        assert not space.admit(0)
    assert "starting read-mostly" in caplog.text


def test_write_failures_are_logged_at_most_every_ten_seconds(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    clock = Clock()
    space = StoreSpace(tmp_path, 0, clock=clock)
    for _ in range(5):
        space.write_failed("stream S: cannot store a message", OSError("EIO"))
        clock.now += 1
    clock.now += limits.STORE_ERROR_LOG_INTERVAL_S
    space.write_failed("stream S: cannot store a message", OSError("EIO"))
    lines = [r.getMessage() for r in caplog.records if r.name == "brook.jetstream.space"]
    assert lines == [
        "JetStream stream S: cannot store a message: EIO",
        "JetStream stream S: cannot store a message: EIO (4 more since the last report)",
    ]
