"""Stream definitions on disk: the file that says a stream exists, and where its messages are.

Under `jetstream.store_dir`, each stream is a directory `streams/<name>/` holding
`stream.json` (its configuration and creation time, replaced atomically), for file
storage `data/` (the file store, docs/storage-format.md), and `consumers/` for its
durable consumers (`consumer/files.py`). A memory stream has none of them: as on
nats-server, it does not outlive the server. A snapshot carries the same record
and layout (`snapshot/archive.py`), and a restore writes them (`snapshot/restore.py`):
all three read and write them through this module.
"""

from __future__ import annotations

import json
from pathlib import Path

from brook.jetstream import models
from brook.jetstream.fsutil import write_atomically
from brook.jetstream.models.stream_config import StreamConfig
from brook.jetstream.store.file.recovery import fsync_path

STREAMS_DIR = "streams"  # under an account's store directory: one directory per stream
STREAM_FILE = "stream.json"
DATA_DIR = "data"


def stream_record(config: StreamConfig, created_ns: int) -> bytes:
    """The content of a stream's `stream.json`: its configuration and creation time."""
    record = {"config": models.stream_config_to_json(config), "created_ns": created_ns}
    return json.dumps(record, indent=1).encode()


def write_definition(root: Path, config: StreamConfig, created_ns: int, *, new: bool) -> None:
    """Write a stream's definition durably under `root` (the `streams` directory): a created
    one (`new`) survives a power loss (its empty store's files become durable with its
    first message, FileStore)."""
    directory = root / config.name
    directory.mkdir(parents=True, exist_ok=True)
    write_atomically(directory / STREAM_FILE, stream_record(config, created_ns))
    if new:
        fsync_path(root)  # the entry of the stream's directory


def read_definition(directory: Path) -> tuple[StreamConfig, int]:
    """The configuration and creation time of the stream in `directory`; raises if its
    definition is missing, damaged, or names another stream."""
    path = directory / STREAM_FILE
    record = json.loads(path.read_text())
    config = models.parse_stream_config(record["config"])
    if config.name != directory.name:
        raise ValueError(f"{path}: name {config.name!r} does not match its directory")
    return config, int(record["created_ns"])
