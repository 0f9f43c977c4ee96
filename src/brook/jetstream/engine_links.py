"""The engine's side of mirrors and sources (ADR 0020): each mirror's link to its
origin and each sourcing stream's `SourcedStream` and links, started, reconfigured and
closed with the stream, and what their stored runs tell its consumers and expiry timer."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from brook.jetstream.consumer.runner import messages_stored
from brook.jetstream.link import OriginLink
from brook.jetstream.link_runs import Stored
from brook.jetstream.mirror import Mirror, mirror_info
from brook.jetstream.sources import Source, SourcedStream

if TYPE_CHECKING:
    from brook.jetstream.engine import StreamEntry
    from brook.jetstream.stream import Stream
    from brook.routing.internal import InternalClient
    from brook.routing.sublist import Subscription


class OriginLinks:
    """`JetStream`'s mirrors-and-sources part (a mixin, ADR 0031)."""

    if TYPE_CHECKING:  # what it uses of `JetStream`, which sets all of it
        _entries: dict[str, StreamEntry]
        _loop: asyncio.AbstractEventLoop | None
        internal: InternalClient

        @property
        def now_ns(self) -> Callable[[], int]: ...
        def _serve_direct(self, stream: Stream, name: str) -> list[Subscription]: ...

    def _link(self, entry: StreamEntry) -> None:
        """Start a mirror's link to its origin (ADR 0020); what it stores reaches the
        mirror's consumers as a publish's would."""
        stream = entry.stream
        if stream.config.mirror is None or self._loop is None or entry.link is not None:
            return

        def caught_up() -> None:
            """nats-server's `subscribeToMirrorDirect`, once the mirror is nearly level
            with its origin."""
            source = stream.config.mirror
            if stream.config.mirror_direct and source is not None and not entry.mirror_subs:
                entry.mirror_subs = self._serve_direct(stream, source.name)

        label = f"mirror {stream.name} of {stream.config.mirror.name}"
        mirror = Mirror(stream, self._stored(entry), caught_up)
        entry.link = OriginLink(mirror, self.internal, self._loop, self.now_ns, label)
        entry.link.start()

    def _stored(self, entry: StreamEntry) -> Stored:
        """What a mirror's or source's link calls with each run it stored and kept: the
        consumers and the expiry timer hear of it as of publishes (`_attach`)."""
        index = entry.consumers
        timer = entry.timer
        expiry = entry.stream.expiry

        def stored(run: list[tuple[str, int]]) -> None:
            if len(index):
                matching = index.matching
                for subject, seq in run:
                    messages_stored(matching(subject.encode("utf-8", "surrogateescape")), seq)
            wake = expiry.next_wakeup_ns
            if wake is not None and (timer.at is None or wake < timer.at):
                timer.arm(wake)

        return stored

    def _link_sources(self, entry: StreamEntry) -> None:
        """Give each source of the stream its link to its origin (ADR 0020), and close
        those of sources it no longer has."""
        sourced = entry.sourced
        if sourced is None or self._loop is None:
            return
        for iname in list(sourced.links):
            if iname not in sourced.sources:
                sourced.links.pop(iname).remove()
        for iname, source in sourced.sources.items():
            if iname not in sourced.links:
                label = f"source {source.name} of stream {entry.stream.name}"
                link = OriginLink(Source(sourced, source), self.internal, self._loop,
                                  self.now_ns, label)  # fmt: skip
                sourced.links[iname] = link
                link.start()

    def _unlink(self, entry: StreamEntry, *, remove: bool = False) -> None:
        """Close a mirror's link; `remove`: for good, its origin consumer deleted."""
        if entry.link is not None:
            if remove:
                entry.link.remove()
            else:
                entry.link.close()
            entry.link = None
        for sub in entry.mirror_subs:
            self.internal.unsubscribe(sub)
        entry.mirror_subs = []

    def mirror_info(self, stream: Stream) -> dict[str, Any] | None:
        """The `mirror` of the stream's info, None for a stream that is no mirror."""
        source = stream.config.mirror
        if source is None:
            return None
        entry = self._entries.get(stream.name)
        return mirror_info(source, entry.link if entry else None, self.now_ns())

    def sourced(self, name: str) -> SourcedStream | None:
        """The sources' side of stream `name`, if it has sources (stream info)."""
        entry = self._entries.get(name)
        return None if entry is None else entry.sourced

    def _configure_sources(self, entry: StreamEntry) -> None:
        """Give a stream with sources its `SourcedStream` (a new one, or the one it has
        told of its new sources) and their links; close them for a stream left without."""
        sources = entry.stream.config.sources
        if entry.sourced is None and sources:
            entry.sourced = SourcedStream(entry.stream, entry.positions, self._stored(entry))
        elif entry.sourced is not None:
            entry.sourced.configure(sources)
        self._link_sources(entry)
        if entry.sourced is not None and not sources:
            entry.sourced = None
