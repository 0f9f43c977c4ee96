"""`PlainPublish`, the usual publish's short path (ingress.py, ADR 0062/0067), stores what
`Stream._ingest`, the general path, stores and answers the same PubAck: two file streams
of one configuration, one of them made to take the general path for every publish, are
given the same publishes at the same clock readings (plain ones, `Nats-Msg-Id`s seen
before or not, headers the short path must leave to the general one, replies of a fast
batch, messages past `max_msg_size`), under limits, discard-new and a duplicate window
that expires; their PubAcks, states, stored messages and segment files' sizes must be
equal, and so must what their consumers are told. The publishes reach the streams as the
router hands them over (the stream's `Ingress`, which takes the short path itself) or by
`Stream.ingest` (the way a fast batch's, a schedule's or a test's message comes)."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.support.streams import SECOND, Clock

from brook.jetstream.consumer_index import ConsumerIndex
from brook.jetstream.expiry_timer import ExpiryTimer
from brook.jetstream.ingress import Ingress
from brook.jetstream.models import parse_stream_config
from brook.jetstream.store.file import FileStore
from brook.jetstream.stream import Stream

SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])

HEADERS = st.sampled_from(
    [
        None,
        b"",
        b"NATS/1.0\r\nNats-Msg-Id: a\r\n\r\n",
        b"NATS/1.0\r\nNats-Msg-Id: b\r\n\r\n",
        b"NATS/1.0\r\nX-App: 1\r\nNats-Msg-Id: a\r\n\r\n",
        b"NATS/1.0\r\nX-App: 1\r\n\r\n",
        b"NATS/1.0\r\nNats-Msg-Id: \r\n\r\n",
        b"NATS/1.0\r\nNats-TTL: 5s\r\nNats-Msg-Id: c\r\n\r\n",
        b"NATS/1.0\r\nNats-Expected-Last-Msg-Id: a\r\n\r\n",
        b"NATS/1.0\r\nNats-Rollup: sub\r\n\r\n",
        b"NATS/1.0\r\nX-App: Nats-Batch-Id\r\n\r\n",
        b"NATS/1.0\r\nNats-Incr: 1\r\n\r\n",
        b"NATS/1.0\r\nX: Nats-Schedule\r\n\r\n",
        b"NATS/1.0 503\r\n\r\n",
        "NATS/1.0\r\nX: é\r\nNats-Msg-Id: a\r\n\r\n".encode(),
    ]
)
PUBLISH = st.tuples(
    st.sampled_from(["s.a", "s.b", "s.c"]),
    st.sampled_from([b"_INBOX.r", None, b"_INBOX.r.$FI"]),
    HEADERS,
    st.binary(max_size=48),
    st.sampled_from([0, 1, SECOND, 3 * SECOND]),  # the clock moves this much first
)
CONFIG = st.fixed_dictionaries(
    {
        "max_msgs": st.sampled_from([-1, 2, 5]),
        "max_msgs_per_subject": st.sampled_from([-1, 1, 3]),
        "max_bytes": st.sampled_from([-1, 300]),
        "discard": st.sampled_from(["old", "new"]),
        "max_msg_size": st.sampled_from([-1, 40]),
        "duplicate_window": st.sampled_from([2 * SECOND, 0]),
        "allow_rollup_hdrs": st.booleans(),
        "max_age": st.sampled_from([0, 10 * SECOND]),
    }
)


def _stream(directory: Path, config: dict[str, object], clock: Clock, acks: list[bytes]) -> Stream:
    body = {"name": "S", "subjects": ["s.>"], **config}
    cfg = parse_stream_config(body, subject_name="S")
    return Stream(
        cfg,
        FileStore(directory, fsync=False),
        now_ns=clock,
        send_ack=lambda reply, ack: acks.append(reply + b" " + ack),
        committer=None,
        created_ns=clock.now,
    )


def _files(directory: Path) -> dict[str, int]:
    """The segment files and their sizes (a segment's preamble holds the wall clock's
    time: the records are compared by `_stored`)."""
    return {p.name: p.stat().st_size for p in sorted((directory / "msgs").iterdir())}


def _stored(stream: Stream) -> list[object]:
    state = stream.store.state()
    return [stream.store.load(seq) for seq in range(state.first_seq, state.last_seq + 1)]


def _ingress(stream: Stream, clock: Clock, told: list[tuple[list[str], int]]) -> Ingress:
    """The stream's subscription handler, its one consumer's news written to `told`."""
    consumers = ConsumerIndex[str]()
    consumers.add("c", [])
    timer = ExpiryTimer(stream, None, clock)
    return stream.ingress(consumers, lambda runners, seq: told.append((runners, seq)), timer)


@SETTINGS
@given(CONFIG, st.lists(PUBLISH, max_size=30), st.booleans())
def test_the_short_path_stores_and_answers_as_the_general_one(
    config: dict[str, object],
    publishes: list[tuple[str, bytes | None, bytes | None, bytes, int]],
    routed: bool,
) -> None:
    clock = Clock()
    with tempfile.TemporaryDirectory() as tmp:
        plain_acks: list[bytes] = []
        general_acks: list[bytes] = []
        plain = _stream(Path(tmp, "plain"), config, clock, plain_acks)
        general = _stream(Path(tmp, "general"), config, clock, general_acks)
        assert plain.plain is not None  # the configurations drawn allow it
        general.plain = None
        plain_told: list[tuple[list[str], int]] = []
        general_told: list[tuple[list[str], int]] = []
        plain_in = _ingress(plain, clock, plain_told)
        general_in = _ingress(general, clock, general_told)
        for subject, reply, header, data, step in publishes:
            clock.now += step
            if routed:
                plain_in(subject.encode(), reply, header, data)
                general_in(subject.encode(), reply, header, data)
            else:
                a = plain.ingest(subject.encode(), reply, header, data)
                b = general.ingest(subject.encode(), reply, header, data)
                assert (a.seq, a.kept, a.duplicate) == (b.seq, b.kept, b.duplicate)
                assert (a.error and a.error.to_json()) == (b.error and b.error.to_json())
        assert plain_acks == general_acks
        assert plain_told == general_told
        assert plain.store.state() == general.store.state()
        assert plain.dedup.last_id == general.dedup.last_id
        plain.store.sync()
        general.store.sync()
        assert _files(Path(tmp, "plain")) == _files(Path(tmp, "general"))
        assert _stored(plain) == _stored(general)
        plain.close()
        general.close()


def test_the_short_path_is_taken() -> None:
    """The usual publishes go the short way (else the test above compares nothing)."""
    clock = Clock()
    with tempfile.TemporaryDirectory() as tmp:
        stream = _stream(Path(tmp), {}, clock, [])
        plain = stream.plain
        assert plain is not None
        assert plain.store(b"s.a", None, b"x") == 1
        header = b"NATS/1.0\r\nNats-Msg-Id: a\r\n\r\n"
        assert plain.store(b"s.a", header, b"x") == 2
        assert plain.store(b"s.a", header, b"x") == -2  # a duplicate of message 2
        ttl = b"NATS/1.0\r\nNats-TTL: 1s\r\n\r\n"
        assert plain.store(b"s.a", ttl, b"x") == 0  # not a plain one: nothing done
        assert stream.store.state().messages == 2
        stream.close()
