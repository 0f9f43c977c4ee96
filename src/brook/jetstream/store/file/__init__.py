"""The file store: a durable `MessageStore` kept as an append-only, checksummed log.

Modules, in dependency order: `format` (record bytes, pure), `segment` (one file and its
slot columns), `subjects` and `index` (the in-memory index, derived from the log),
`recovery` (meta.json, replay and repair at open), `reader` (messages read back from their
records), `store` (`FileStore`, the writer). The on-disk format is specified in
docs/storage-format.md.
"""

from brook.jetstream.store.file.recovery import Finding, RecoveryReport
from brook.jetstream.store.file.store import SEGMENT_BYTES_MAX_DEFAULT, FileStore

__all__ = ["SEGMENT_BYTES_MAX_DEFAULT", "FileStore", "Finding", "RecoveryReport"]
