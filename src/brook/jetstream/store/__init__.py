"""Message stores: one interface (`base.py`), a memory and a file implementation."""

from brook.jetstream.store.base import (
    MessageStore,
    StoredMessage,
    StoreError,
    StreamState,
    SubjectState,
)

__all__ = ["MessageStore", "StoreError", "StoredMessage", "StreamState", "SubjectState"]
