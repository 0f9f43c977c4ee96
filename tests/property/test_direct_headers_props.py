"""Batched direct-get replies: `BatchHeaders.run` (one bytes format per message, parts kept
per batch, ADR 0059) gives byte for byte what `message_header` gives, with the same
`Nats-Num-Pending`, `Nats-Last-Sequence` and `max_bytes` cut as the loop it replaced, for
any subject, stored header block, sequence and time stamp, over runs of any length."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from brook.jetstream.direct import BatchHeaders, message_header
from brook.jetstream.store.base import StoredMessage

SUBJECTS = st.sampled_from(["a", "orders.eu.1", "ü.ñ", "x" * 40])
STORED = st.sampled_from(
    [None, b"", b"NATS/1.0\r\nk: v\r\n\r\n", b"NATS/1.0\r\nA: 1\r\nA: 2\r\n\r\n", b"bad"]
)
# Around the epoch (the zero time), within a few seconds (the kept second) and anywhere.
TIMES = st.one_of(
    st.integers(-2_000_000_000, 2_000_000_000),
    st.integers(1_764_000_000_000_000_000, 1_764_000_003_000_000_000),
    st.integers(0, 2**62),
    st.integers(1, 2**32).map(lambda s: s * 1_000_000_000),  # a whole second: no fraction
)
MESSAGE = st.tuples(SUBJECTS, STORED, st.integers(1, 2**63), TIMES, st.binary(max_size=30))
Message = tuple[str, bytes | None, int, int, bytes]  # subject, stored header, seq, ns, data
RUNS = st.lists(st.lists(MESSAGE, min_size=1, max_size=12), min_size=1, max_size=4)


def _expected(stream: str, msgs: list[StoredMessage], pending: int, max_bytes: int) -> list[bytes]:
    """The replies' header blocks as `DirectGet._batch` made them before ADR 0059."""
    out = []
    last_sent = 0
    sent = 0
    for i, msg in enumerate(msgs):
        if i:
            pending = max(pending - 1, 0)
        extra = [("Nats-Num-Pending", str(pending)), ("Nats-Last-Sequence", str(last_sent))]
        out.append(message_header(stream, msg, extra))
        last_sent = msg.seq
        sent += len(msg.subject.encode()) + len(msg.header or b"") + len(msg.data)
        if sent >= max_bytes:
            break
    return out


@given(
    st.sampled_from(["S", "ORDERS-2"]),
    RUNS,
    st.integers(0, 30),
    st.integers(1, 2000),
)
def test_batch_runs_equal_message_header(
    stream: str, runs: list[list[Message]], pending: int, max_bytes: int
) -> None:
    runs_msgs = [
        [StoredMessage(seq, sub, hdr, data, ts) for sub, hdr, seq, ts, data in r] for r in runs
    ]
    expected = _expected(stream, [m for r in runs_msgs for m in r], pending, max_bytes)
    headers = BatchHeaders(stream)
    got: list[bytes] = []
    room = max_bytes
    last_sent = 0
    for msgs in runs_msgs:
        replies, pending, room = headers.run(b"r", msgs, pending, last_sent, room, bool(got))
        assert all(r[0] == b"r" and r[1] is None for r in replies)
        assert [r[3] for r in replies] == [m.data for m in msgs[: len(replies)]]
        got.extend(r[2] or b"" for r in replies)
        last_sent = msgs[len(replies) - 1].seq
        if room <= 0:
            break
    assert got == expected
    # The `204 EOB` status repeats the last message's pending count.
    assert got[-1].endswith(
        b"Nats-Num-Pending: %d\r\nNats-Last-Sequence: %d\r\n\r\n"
        % (pending, _before_last(runs_msgs, len(got)))
    )


def _before_last(runs: list[list[StoredMessage]], sent: int) -> int:
    flat = [m for r in runs for m in r]
    return flat[sent - 2].seq if sent >= 2 else 0
