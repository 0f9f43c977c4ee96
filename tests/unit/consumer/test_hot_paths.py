"""The consumer hot paths' shortcuts agree with the general code they stand in for.

`ack_sequences` (bytes, per ack) against `parse_ack_subject`, and `ack_run_stream_seqs` (a
run of acks) against `ack_sequences`. (The file store's in-place record check is compared
with `decode_message` in tests/store/test_file_damaged_reads.py.)
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from brook.jetstream.consumer.acks import ack_run_stream_seqs, ack_sequences, parse_ack_subject

# Tokens that are digits for some parsers and not others, or not tokens at all.
TRICKY = ["", "0", "7", "123", "+1", "-1", "1_0", " 1", "1 ", "\u0661", "²", "12a", "_", "x"]
token = st.one_of(st.sampled_from(TRICKY), st.text(min_size=0, max_size=4))


def _meta_seqs(subject: str) -> tuple[int, int, int] | None:
    meta = parse_ack_subject(subject)
    return None if meta is None else (meta.delivered, meta.stream_seq, meta.consumer_seq)


@given(st.lists(token, min_size=0, max_size=13), st.sampled_from(["$JS.ACK", "$JS.X", "JS.ACK"]))
def test_ack_sequences_agrees_with_parse_ack_subject(tokens: list[str], prefix: str) -> None:
    subject = ".".join([prefix, *tokens])
    raw = subject.encode("utf-8", "surrogatepass")
    assert ack_sequences(raw) == _meta_seqs(raw.decode("utf-8", "surrogateescape"))


@given(
    st.lists(
        st.lists(token, min_size=0, max_size=13).map(lambda t: ".".join(["$JS.ACK", *t])),
        min_size=1,
        max_size=6,
    )
)
def test_ack_run_stream_seqs_agrees_with_ack_sequences(subjects: list[str]) -> None:
    raw = [s.encode("utf-8", "surrogatepass").replace(b" ", b"_") for s in subjects]
    one_by_one = [ack_sequences(s) for s in raw]
    expected = None if None in one_by_one else [q[1] for q in one_by_one if q is not None]
    assert ack_run_stream_seqs(raw) == expected


def test_ack_run_stream_seqs_of_a_run() -> None:
    run = [b"$JS.ACK.S.C.1.%d.%d.1700.%d" % (i, i + 5, 9 - i) for i in range(1, 9)]
    assert ack_run_stream_seqs(run) == list(range(1, 9))
    assert ack_run_stream_seqs([*run, b"$JS.ACK.S.C.1.10.7.1700"]) is None  # one token short
    assert ack_run_stream_seqs([*run, b"$JS.ACK._.HASH.S.C.3.10.7.1700.4.x"]) is None  # v2
    assert ack_run_stream_seqs([run[0] + b"." + run[1]]) is None


def test_ack_sequences_of_both_versions() -> None:
    assert ack_sequences(b"$JS.ACK.S.C.2.10.7.1700.4") == (2, 10, 7)
    assert ack_sequences(b"$JS.ACK._.HASH.S.C.3.10.7.1700.4.extra") == (3, 10, 7)
    assert ack_sequences(b"$JS.ACK.S.C.2.10.\xd9\xa1.1700.4") is None  # Arabic-Indic one
    assert ack_sequences(b"$JS.ACK.S..2.10.7.1700.4") is None
