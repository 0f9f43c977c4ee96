"""The JetStream store's filesystem: free space, a full disk, and failed writes.

nats-server sizes its file storage at start to 75% of the free disk (`max_file_store`
unset) and, once its streams hold more, answers publishes with 10023 "insufficient
resources", logging that at most every 10 s; a write that fails with ENOSPC all the same
(another program filled the disk) stops the stream until a restart, and its publishers get
no answer. Brook keeps a reserve of free space instead (`free_space_reserve`, default the
smaller of 64 MiB and a twentieth of the filesystem): below it, publishes to file streams
get the same 10023 at once, while reads, memory streams and core NATS go on, and so do the
small writes that free space (purges, deletions, acks, consumer state), which the reserve
leaves room for. A write that fails for lack of space anyway is answered the same way.
Writes resume by themselves once the free space is back above the reserve (by
`STORE_RESUME_MARGIN_BYTES`); entering and leaving the full state is logged once each.

Free space is read with statvfs() (a couple of microseconds) each time the bytes admitted
since the last reading could have used half of the headroom above the reserve, or
`STORE_SPACE_CHECK_BYTES`, whichever is less; while full, on every refused publish (a
refusal costs little anyway). Between readings an admission is one subtraction: other
programs filling the disk meanwhile are noticed at the next reading, or by a write's ENOSPC.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from brook import limits

log = logging.getLogger("brook.jetstream.space")


def default_reserve(total_bytes: int) -> int:
    """The reserve when none is configured: 64 MiB, or 1/20 of a smaller filesystem."""
    return min(limits.STORE_RESERVE_BYTES, total_bytes // limits.STORE_RESERVE_SHARE)


def _mib(n: int) -> str:
    return f"{n / (1024 * 1024):.1f} MiB"


class StoreSpace:
    """Admission of writes to file streams, by the free space under `path`."""

    def __init__(
        self,
        path: Path,
        reserve_bytes: int = -1,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.path = path
        self._clock = clock
        try:
            st = os.statvfs(path)
            total = st.f_blocks * st.f_frsize
        except OSError:
            total = limits.STORE_RESERVE_BYTES * limits.STORE_RESERVE_SHARE
        self.reserve_bytes = reserve_bytes if reserve_bytes >= 0 else default_reserve(total)
        self.full = False
        self.free_bytes = 0
        self.refused = 0  # publishes refused for lack of space (statistics)
        self.full_episodes = 0  # times the store filled up (statistics)
        self._budget = 0  # bytes that may be admitted before the next statvfs
        self._failures_logged_at: float | None = None
        self._failures_unlogged = 0
        self._check(starting=True)

    # ------------------------------------------------------------------ admission

    def admit(self, nbytes: int) -> bool:
        """May a write of about `nbytes` go ahead? False: answer 10023."""
        self._budget -= nbytes
        if self._budget > 0:
            return True
        if self._check():
            self._budget -= nbytes
            return True
        self.refused += 1
        return False

    @property
    def budget(self) -> int:
        """The bytes `admit` takes without a reading: it admits fewer at once (a source's
        run admits its messages together while they are: stream_sourced.py)."""
        return self._budget

    def no_space(self, error: BaseException) -> None:
        """A write failed for lack of space although admitted: full until there is room."""
        self._budget = 0
        if not self.full:
            self._enter_full(f"a write failed ({error})")

    def _check(self, *, starting: bool = False) -> bool:
        try:
            st = os.statvfs(self.path)
        except OSError as exc:  # cannot tell: let the writes themselves find out
            self.write_failed(f"free space of {self.path} unknown", exc)
            self._budget = limits.STORE_SPACE_CHECK_BYTES
            return True
        free = self.free_bytes = st.f_bavail * st.f_frsize
        headroom = free - self.reserve_bytes
        if self.full:
            if headroom < limits.STORE_RESUME_MARGIN_BYTES:
                return False
            self.full = False
            log.warning(
                "JetStream store %s has %s free again: publishes to file streams resumed",
                self.path,
                _mib(free),
            )
        elif headroom <= 0:
            if starting:
                log.warning(
                    "JetStream store %s has %s free, below the reserve of %s: starting "
                    "read-mostly. Reads, memory streams, purges and deletions work; "
                    "publishes to file streams are refused (10023 insufficient resources) "
                    "until space is freed",
                    self.path,
                    _mib(free),
                    _mib(self.reserve_bytes),
                )
                self.full = True
                self.full_episodes += 1
            else:
                self._enter_full(
                    f"{_mib(free)} free, below the reserve of {_mib(self.reserve_bytes)}"
                )
            return False
        self._budget = min(headroom // 2, limits.STORE_SPACE_CHECK_BYTES)
        return True

    def _enter_full(self, why: str) -> None:
        self.full = True
        self.full_episodes += 1
        log.error(
            "JetStream store %s is full: %s. Publishes to file streams are refused "
            "(10023 insufficient resources) until space is freed (purge or delete streams, "
            "or free space on the filesystem); reads, memory streams and core NATS go on",
            self.path,
            why,
        )

    # ------------------------------------------------------------------ other failures

    def write_failed(self, what: str, error: BaseException) -> None:
        """A store write failed for another reason (an I/O error): logged at most every
        `STORE_ERROR_LOG_INTERVAL_S`, with the count of those not logged since."""
        now = self._clock()
        last = self._failures_logged_at
        if last is not None and now - last < limits.STORE_ERROR_LOG_INTERVAL_S:
            self._failures_unlogged += 1
            return
        more = self._failures_unlogged
        self._failures_logged_at = now
        self._failures_unlogged = 0
        suffix = f" ({more} more since the last report)" if more else ""
        log.error("JetStream %s: %s%s", what, error, suffix)

    def statistics(self) -> dict[str, Any]:
        """For monitoring (`/varz` jetstream.brook_store); reads the free space afresh."""
        try:
            st = os.statvfs(self.path)
            self.free_bytes = st.f_bavail * st.f_frsize
        except OSError:
            pass
        return {
            "path": str(self.path),
            "free_bytes": self.free_bytes,
            "reserve_bytes": self.reserve_bytes,
            "full": self.full,
            "full_episodes": self.full_episodes,
            "refused_publishes": self.refused,
        }
