"""`publish_headers.raw_msg_id` reads a publish's header block from its raw bytes as the
full parse and its check read it (ADR 0057): whenever it answers (not None), its answer
is `plain_msg_id(headers.parse(block))`, and the usual blocks (an application's fields and
a `Nats-Msg-Id`) it does answer. Blocks made of the pieces that matter (names checked or
not, `Nats-` and near misses, repeated ids, colons, blank and bare-LF lines, whitespace
the parse trims, status lines, non-ASCII bytes) and arbitrary bytes."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from brook.jetstream.publish_headers import MSG_ID, plain_msg_id, raw_msg_id
from brook.protocol import headers as hdrs

SETTINGS = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])

NAMES = st.sampled_from(
    [
        "Nats-Msg-Id",
        "Nats-Msg-Id ",
        "nats-msg-id",
        "Nats-Expected-Stream",
        "Nats-TTL",
        "Nats-Rollup",
        "Nats-",
        "Nats",
        "X-Nats-Msg-Id",
        "Foo",
        "a",
        "",
        " Nats-Msg-Id",
    ]
)
VALUES = st.text(alphabet=st.sampled_from(list("ab1-: \t\x0b\x0c\x1c\x1f\n\xa0é")), max_size=8)
FIRST = st.sampled_from(["NATS/1.0", "NATS/1.0 ", "NATS/1.0 503", "NATS/1.0 100 Idle", "NATS/1.1"])


def _expected(block: bytes) -> str | None:
    try:
        return plain_msg_id(hdrs.parse(block))
    except hdrs.HeaderError:
        return None


@SETTINGS
@given(FIRST, st.lists(st.tuples(NAMES, st.sampled_from([":", ": ", "", "::"]), VALUES)))
def test_answers_as_the_parse_and_check_do(first: str, fields: list[tuple[str, str, str]]) -> None:
    lines = [first] + [name + sep + value for name, sep, value in fields]
    block = ("\r\n".join(lines) + "\r\n\r\n").encode()
    raw = raw_msg_id(block)
    if raw is not None:
        assert raw == _expected(block)


@SETTINGS
@given(st.binary(max_size=64))
def test_arbitrary_bytes(block: bytes) -> None:
    raw = raw_msg_id(b"NATS/1.0\r\n" + block)
    if raw is not None:
        assert raw == _expected(b"NATS/1.0\r\n" + block)
    raw = raw_msg_id(block)
    if raw is not None:
        assert raw == _expected(block)


@SETTINGS
@given(
    st.lists(st.tuples(st.sampled_from(["Foo", "X-Trace", "Content-Type"]), VALUES)),
    st.text(alphabet="abc123-", min_size=1, max_size=12),
)
def test_the_usual_block_is_answered(fields: list[tuple[str, str]], msg_id: str) -> None:
    pairs = [
        (n, v.strip().replace("\n", "").replace("é", "e").replace("\xa0", "")) for n, v in fields
    ]
    block = hdrs.encode([*pairs, (MSG_ID, msg_id)])
    assert raw_msg_id(block) == msg_id == _expected(block)
    assert raw_msg_id(hdrs.encode(pairs)) == ""


ASCII_VALUES = st.text(alphabet=st.sampled_from(list("a1- \t\x0b\x0c\x1c\x1f\n:")), max_size=6)


@SETTINGS
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["Nats-Msg-Id", "Foo", "Nats-TTL", "Nats-Msg-Idx"]),
            st.sampled_from([":", ": "]),
            ASCII_VALUES,
        ),
        min_size=1,
    )
)
def test_ids_and_their_whitespace(fields: list[tuple[str, str, str]]) -> None:
    block = ("\r\n".join(["NATS/1.0"] + [n + s + v for n, s, v in fields]) + "\r\n\r\n").encode()
    raw = raw_msg_id(block)
    if all(n in ("Nats-Msg-Id", "Foo") for n, _, _ in fields):
        assert raw is not None
    if raw is not None:
        assert raw == _expected(block)
