"""A small, real filesystem that a test can fill: a tmpfs mounted for the test's duration.

Full-disk behaviour can only be tested on a filesystem that really fills up, with the
kernel answering ENOSPC. Mounting needs root (CAP_SYS_ADMIN); where that is missing the
test is skipped with a reason that says so loudly, never passed silently.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

SKIP = "FULL-DISK TEST NOT RUN: "


@contextlib.contextmanager
def small_tmpfs(where: Path, size_bytes: int, *, inodes: int = 0) -> Iterator[Path]:
    """Mount a tmpfs of `size_bytes` (and at most `inodes` files, when given) at `where`
    (created); unmounted afterwards."""
    mount, umount = shutil.which("mount"), shutil.which("umount")
    if mount is None or umount is None:
        pytest.skip(SKIP + "mount/umount are not installed")
    if os.geteuid() != 0:
        pytest.skip(SKIP + "mounting a tmpfs needs root")
    where.mkdir(parents=True, exist_ok=True)
    options = f"size={size_bytes}" + (f",nr_inodes={inodes}" if inodes else "")
    done = subprocess.run(
        [mount, "-t", "tmpfs", "-o", options, "tmpfs", str(where)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode:
        pytest.skip(SKIP + f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run([umount, "-l", str(where)], capture_output=True, check=False)


def free_bytes(path: Path) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def fill_up(path: Path, leave_bytes: int = 0) -> Path:
    """Write a filler file in directory `path` until the filesystem has at most
    `leave_bytes` free (0: until the kernel says ENOSPC); returns the filler."""
    filler = path / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        while True:
            room = free_bytes(path) - leave_bytes
            if leave_bytes and room <= 0:
                break
            try:
                os.write(fd, b"\xee" * max(1, min(room, 64 * 1024) if leave_bytes else 64 * 1024))
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                if leave_bytes == 0:
                    # The last write may have been refused whole with room for less.
                    with contextlib.suppress(OSError):
                        while True:
                            os.write(fd, b"\xee")
                break
    finally:
        os.close(fd)
    return filler
