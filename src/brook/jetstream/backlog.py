"""The bound on acknowledgements owed by group commits, shared by every file stream.

A PubAck of a file stream waits for the fsync that covers its message (commit.py). When
publishers send faster than the disk syncs, the owed acknowledgements (each a callback
holding its reply subject and answer) pile up without limit. `CommitBacklog` counts them
across all streams. Past `limit` the connection whose input just added to it stops being
read (the server pauses its transport): TCP then slows the publisher down, as a full
socket buffer does for nats-server's clients, instead of Brook's memory growing. The
connections read again once the backlog is down to half the limit, so they do not flap.

A connection is paused only after the whole chunk it sent was handled, so the backlog can
pass the limit by what one read holds per connection: the bound is `limit` plus a read per
publishing connection. Core NATS traffic and connections that publish nothing to a file
stream are never paused.

Compiled (ADR 0068): the committer (compiled too) counts `owed` for every publish, a
native class's field rather than an attribute looked up by name.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class CommitBacklog:
    """Acknowledgements waiting for a group commit, and who waits for them to drain."""

    __slots__ = ("_resume", "contributed", "high_water", "limit", "owed", "pauses")

    def __init__(self, limit: int) -> None:
        self.limit = limit  # 0: no bound
        self.owed = 0  # raised by `GroupCommitter.request` itself, per publish
        self.high_water = 0  # the most owed at once (monitoring)
        self.pauses = 0  # connections paused so far (monitoring)
        # Set with every `owed` increment; the reading connection clears it before handling
        # input and reads it after, to learn whether that input published to a file stream.
        self.contributed = False
        self._resume: list[Callable[[], None]] = []

    @property
    def over(self) -> bool:
        return 0 < self.limit <= self.owed

    @property
    def paused(self) -> int:
        """Connections not being read now, waiting for the backlog to drain."""
        return len(self._resume)

    def satisfied(self, count: int) -> None:
        """A sync ended: `count` acknowledgements are no longer owed. (The most owed is
        noted here, once per sync: between two syncs it only grows.)"""
        if self.owed > self.high_water:
            self.high_water = self.owed
        self.owed -= count
        if self._resume and self.owed <= self.limit // 2:
            resume, self._resume = self._resume, []
            for callback in resume:
                callback()

    def wait(self, resume: Callable[[], None]) -> None:
        """A connection stops being read; `resume()` once the backlog has drained."""
        self.pauses += 1
        self._resume.append(resume)

    def forget(self, resume: Callable[[], None]) -> None:
        """A paused connection closed: nothing to resume."""
        if resume in self._resume:
            self._resume.remove(resume)

    def statistics(self) -> dict[str, Any]:
        """For monitoring (`/varz` jetstream.brook_commits)."""
        return {
            "acks_awaiting_sync": self.owed,
            "max_acks_awaiting_sync": self.limit,
            "acks_awaiting_sync_high_water": max(self.high_water, self.owed),
            "paused_connections": self.paused,
            "pauses": self.pauses,
        }
