"""File-system helpers shared by the JetStream engine's metadata files."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from brook.jetstream.store.file.recovery import fsync_path


def write_atomically(path: Path, data: bytes) -> None:
    """Replace `path` with `data` so a crash leaves either the old or the new file whole:
    write a temporary file, fsync it, rename it over the old one, fsync the directory.
    A write that fails (a full disk) leaves the old file and removes the temporary one,
    so failed attempts never use up space."""
    tmp = path.with_suffix(".tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    os.replace(tmp, path)
    fsync_path(path.parent)
