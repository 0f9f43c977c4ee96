"""JetStream's resource limits, as nats-server enforces them (ADR 0025).

Two scopes hold bytes of each storage type (memory, file): the server
(`jetstream { max_memory_store, max_file_store }`, `ServerLimits`, shared by every
account's engine) and an account (config.settings' `JetStreamAccountLimits`, which also
bounds the account's streams, consumers and `max_ack_pending`). A limit below 0 is no limit.

Stream create, update and restore reserve bytes (nats-server's `checkBytesLimits`): a
stream's `max_bytes`, or 1 byte when it has none. The account's reservation counts its
other streams of that storage with a `max_bytes`, the server's every stream of every
account (the stream itself included, as nats-server's `memReserved`); past the account's
limit the answer is 10028 "insufficient memory resources available" (memory) or 10047
"insufficient storage resources available" (file), past the server's the same.

A publish is refused once the server's streams of its storage hold more than the server
limit (10023 "insufficient resources", nats-server's `js.limitsExceeded`: the message
that crosses it is stored), and when the message would take the account past its limit
(10002 "resource limits exceeded for account", `jsa.wouldExceedLimits`), its size
counted as the stores count it (`max_bytes`' accounting).

The publish path stays flat (ADR 0025): a `Ledger` keeps a running total that is never
below what its scope really holds (each admitted message is added; what is removed is
not subtracted), so a publish is admitted with an addition and a comparison; only when
that total says no does the ledger measure its scope afresh (a sum over its streams'
O(1) store states) and decide on the real figure. An engine whose storage type has no
limit in either scope gives its streams no `Quota` at all.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Protocol

from brook.jetstream.errors import api_error

UNKNOWN = sys.maxsize  # a ledger's total before its first measure: measured when asked


class Holdings(Protocol):
    """What a scope's limits read from an engine: bytes stored and reserved by storage."""

    def used_bytes(self, storage: str) -> int: ...

    def reserved_bytes(self, storage: str, *, excluding: str = "") -> int: ...


class Ledger:
    """The bytes of one storage type a scope holds, against its maximum (module
    docstring): `tracked` is never below the real figure, which `measure` reads."""

    __slots__ = ("_measure", "maximum", "tracked")

    def __init__(self, maximum: int, measure: Callable[[], int]) -> None:
        self.maximum = maximum
        self.tracked = UNKNOWN
        self._measure = measure

    def remeasure(self) -> int:
        self.tracked = self._measure()
        return self.tracked

    def forget(self) -> None:
        """Bytes arrived by a way that was not admitted (a restore): measure next time."""
        self.tracked = UNKNOWN

    def room(self) -> int:
        """The bytes the scope may still take (0 at or past its limit)."""
        return max(self.maximum - self.remeasure(), 0)


class Quota:
    """The admission of a stream's messages: the server's ledger and the account's of
    the stream's storage type, either None when that scope has no limit."""

    __slots__ = ("account", "server")

    def __init__(self, server: Ledger | None, account: Ledger | None) -> None:
        self.server = server
        self.account = account

    def admit(self, nbytes: int) -> None:
        """Raise nats-server's error unless a message of `nbytes` (as the store counts
        it) may be stored now; count it when it may."""
        server = self.server
        if server is not None:
            if server.tracked > server.maximum and server.remeasure() > server.maximum:
                raise api_error("INSUFFICIENT_RESOURCES")
            server.tracked += nbytes
        account = self.account
        if account is not None:
            if account.tracked + nbytes > account.maximum and (
                account.remeasure() + nbytes > account.maximum
            ):
                if server is not None:
                    server.tracked -= nbytes
                raise api_error("ACCOUNT_RESOURCES_EXCEEDED")
            account.tracked += nbytes

    def room(self) -> int:
        """The bytes the stream may still take in both scopes (-1: no limit)."""
        rooms = [ledger.room() for ledger in (self.server, self.account) if ledger is not None]
        return min(rooms) if rooms else -1

    def forget(self) -> None:
        for ledger in (self.server, self.account):
            if ledger is not None:
                ledger.forget()


def _ledger(maximum: int, measure: Callable[[], int]) -> Ledger | None:
    return Ledger(maximum, measure) if maximum >= 0 else None


class ServerLimits:
    """`max_memory_store` and `max_file_store` (-1: none), over every account's engine."""

    def __init__(self, max_memory: int = -1, max_file: int = -1) -> None:
        self.max_memory = max_memory
        self.max_file = max_file
        self._engines: list[Holdings] = []
        self.ledgers = {
            "memory": _ledger(max_memory, lambda: self.used_bytes("memory")),
            "file": _ledger(max_file, lambda: self.used_bytes("file")),
        }

    def raise_to(self, max_memory: int, max_file: int) -> None:
        """Higher limits (a config reload, ADR 0042), taken at once by every stream's
        quota, which shares these ledgers. Only raised: a lower limit, or one set or
        removed, is refused before it gets here."""
        self.max_memory, self.max_file = max_memory, max_file
        for storage, maximum in (("memory", max_memory), ("file", max_file)):
            ledger = self.ledgers[storage]
            if ledger is not None:
                ledger.maximum = maximum

    def join(self, engine: Holdings) -> None:
        self._engines.append(engine)

    def leave(self, engine: Holdings) -> None:
        self._engines.remove(engine)

    def maximum(self, storage: str) -> int:
        return self.max_memory if storage == "memory" else self.max_file

    def used_bytes(self, storage: str) -> int:
        return sum(engine.used_bytes(storage) for engine in self._engines)

    def reserved_bytes(self, storage: str) -> int:
        return sum(engine.reserved_bytes(storage) for engine in self._engines)


def reservation(max_bytes: int) -> int:
    """The bytes a stream reserves (nats-server's `addBytes`: 1 when it has no limit)."""
    return 1 if max_bytes < 0 else max_bytes


def check_reservation(
    storage: str, add: int, *, account: tuple[int, int], server: tuple[int, int]
) -> None:
    """nats-server's `checkBytesLimits`: `add` bytes more on (maximum, reserved) of the
    account, then of the server; past either, 10028 (memory) or 10047 (file)."""
    for maximum, reserved in (account, server):
        if maximum >= 0 and (reserved > maximum or add > maximum - reserved):
            if storage == "memory":
                raise api_error("MEMORY_RESOURCES_EXCEEDED")
            raise api_error("STORAGE_RESOURCES_EXCEEDED")
