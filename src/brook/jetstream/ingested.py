"""What a stream did with one message (`Stream.ingest` and the paths that store through
it): `Ingested`, and its kinds for an atomic or fast batch's message (`Batched`) and a
counter's increment (`Counted`), and a source's run (`SourcedRun`)."""

from __future__ import annotations

from dataclasses import dataclass

from brook.jetstream.errors import ApiError


@dataclass(slots=True)
class Ingested:
    """What `Stream.ingest` did with one message (the engine tells the consumers from it).

    `seq` is the PubAck's sequence: where the message was stored or, for a `duplicate`, where
    its first copy was; 0 with an `error` (nothing stored). `kept`: the message is in the
    store now, for the consumers to see (interest retention stores a message no consumer
    wants and removes it at once: it takes a sequence but is not kept). What the publish
    removed, by discard-old limits or a rollup, is reported by the stream on its own path
    (`on_removed`, `on_purge`), as every removal is. One is made per publish: a slots
    class, neither frozen nor a NamedTuple, whose creation and attribute reads cost least
    (callgrind)."""

    seq: int
    kept: bool
    duplicate: bool = False
    error: ApiError | None = None


def plain_ingested(seq: int) -> Ingested:
    """What `PlainPublish.store`'s answer (not 0) says (ingress.py): stored at `seq`
    (> 0), or a duplicate of the message stored at -`seq`."""
    return Ingested(seq, True) if seq > 0 else Ingested(-seq, False, True)


@dataclass(slots=True)
class Batched(Ingested):
    """A message of an atomic batch (batch.py): staged (answered with an empty message)
    or the commit, answered with the batch's PubAck (`batch`, `count`). What a commit
    stored reaches the consumers through `on_markers`, so `kept` is False."""

    batch_id: str = ""
    count: int = 0
    replied: bool = False  # a fast batch's publish: its replies are sent (fast_batch.py)


@dataclass(slots=True)
class Counted(Ingested):
    """What a counter stream did with an increment: also the subject's new total, for the
    PubAck's `val`, and the header stored with it (counters.py: `Nats-Incr` and
    `Nats-Counter-Sources` as rewritten), for republish. A class of its own so that
    `Ingested`, made for every publish, carries nothing for counters."""

    total: bytes = b""
    header: bytes | None = None


@dataclass(slots=True)
class SourcedRun:
    """What `Stream.ingest_sourced_run` did with a run of a source's messages (one made
    per run). `taken`: how many, from the first, it stored or found duplicates (those
    after were not looked at); `stored`: how many from the first up to the last one it
    stored (0: none), which moves the source's position; `kept`: the subject and sequence
    of each stored and kept, for the consumers; `error`: what refused message `taken`
    (None: every one was taken); `last`: what the last message looked at came to."""

    taken: int
    stored: int
    kept: list[tuple[str, int]]
    error: ApiError | None = None
    last: Ingested | None = None
