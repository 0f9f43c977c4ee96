"""`framescan.scan`, the connector's compiled frame loop (ADR 0059): it hands exactly the
frames a raw subscription should get, as written, and stops at the first thing it leaves to
`wire.FrameParser`'s general path (another operation, a sid without a raw handler, a frame
not complete in the read, a line of another shape), whatever the frames and the cut."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given
from hypothesis import strategies as st

from brook_spark.framescan import direct_columns, scan, user_headers

RAW_SIDS = (1, 27)
TOKEN = st.binary(min_size=1, max_size=12).map(
    lambda b: bytes(33 + c % 94 for c in b)  # printable, no blank
)


@dataclass(frozen=True)
class Frame:
    wire: bytes
    delivered: tuple[bytes, bytes, bytes, bytes | None] | None  # None: left to the parser


@st.composite
def frames(draw: st.DrawFn) -> Frame:
    kind = draw(st.sampled_from(["msg", "hmsg", "ping", "odd"]))
    if kind == "ping":
        return Frame(draw(st.sampled_from([b"PING\r\n", b"+OK\r\n", b"PONG\r\n"])), None)
    if kind == "odd":  # shapes nats-py's split() reads but scan leaves to it
        odd = [b"MSG  a 1 2\r\nhi\r\n", b"MSG a 1  2\r\nhi\r\n", b"MSG a 1 2 \r\nhi\r\n"]
        return Frame(
            draw(st.sampled_from([*odd, b"HMSG a 1 5 3\r\nxyz\r\n", b"msg a 1 0\r\n\r\n"])), None
        )
    subject = draw(TOKEN)
    sid = draw(st.sampled_from([*RAW_SIDS, 3]))
    reply = draw(st.one_of(st.just(b""), TOKEN))
    payload = draw(st.binary(max_size=40))
    head = b"%b %d" % (subject, sid) + (b" " + reply if reply else b"")
    if kind == "msg":
        wire = b"MSG %b %d\r\n%b\r\n" % (head, len(payload), payload)
        header = None
    else:
        header = draw(st.sampled_from([b"", b"NATS/1.0\r\n\r\n", b"NATS/1.0\r\nA: b\r\n\r\n"]))
        total = len(header) + len(payload)
        wire = b"HMSG %b %d %d\r\n%b%b\r\n" % (head, len(header), total, header, payload)
        header = header or None
    delivered = (subject, reply, payload, header) if sid in RAW_SIDS else None
    return Frame(wire, delivered)


# A cut anywhere, or (negative) that many bytes before the end: inside the last CR LF.
@given(
    st.lists(frames(), max_size=12),
    st.one_of(st.integers(-3, -1), st.integers(0, 600)),
    st.integers(0, 3),
)
def test_scan_delivers_raw_frames_and_stops_at_the_rest(
    stream: list[Frame], cut: int, first: int
) -> None:
    data = b"".join(f.wire for f in stream)
    cut = max(len(data) + cut, 0) if cut < 0 else min(cut, len(data))
    data = data[:cut]
    first = min(first, len(stream))
    start = sum(len(f.wire) for f in stream[:first])
    got: list[tuple[bytes, bytes, bytes, bytes | None]] = []
    handlers = {sid: lambda *args: got.append(args) for sid in RAW_SIDS}
    expected = []
    stop = start
    for frame in stream[first:]:
        if stop >= cut or frame.delivered is None or stop + len(frame.wire) > cut:
            break
        expected.append(frame.delivered)
        stop += len(frame.wire)
    assert scan(data, start, handlers) == stop
    assert got == expected


DIRECT = [
    b"Nats-Stream: S",
    b"Nats-Num-Pending: 3",
    b"Nats-Last-Sequence: 0",
]
USER = [b"trace: abc", b"A:1", b"Nats-Msg-Id: x", b"Nats-Sequence-X: 4", b"k:  v w"]


@st.composite
def direct_blocks(draw: st.DrawFn) -> bytes:
    """A direct-get reply's header block as servers write it, now and then malformed."""
    seq = draw(st.integers(0, 10**12))
    lines = [
        b"Nats-Subject:%b%b" % (draw(st.sampled_from([b" ", b"", b"  "])), draw(TOKEN)),
        b"Nats-Sequence: %d" % seq,
        b"Nats-Time-Stamp: 2026-11-27T06:59:%02d.%dZ" % (seq % 60, seq % 997),
        *draw(st.lists(st.sampled_from(DIRECT + USER), max_size=3)),
    ]
    lines = draw(st.permutations(lines))
    if draw(st.integers(0, 15)) == 0:  # a block the bulk decode must refuse
        lines = draw(
            st.sampled_from([lines[1:], [*lines, lines[0]], [b"Nats-Sequence: x", *lines[1:]]])
        )
    return b"NATS/1.0\r\n" + b"".join(line + b"\r\n" for line in lines) + b"\r\n"


@given(st.lists(direct_blocks(), min_size=1, max_size=8))
def test_direct_columns_read_what_the_regular_expressions_read(blocks: list[bytes]) -> None:
    """The compiled pass gives the interpreted decode's columns and user-header rows, or
    None where any block lacks one of the three headers exactly once."""
    from brook_spark import fetch

    columns = direct_columns(blocks)
    per_block = [
        [len(p.findall(b)) for p in (fetch._SEQ, fetch._SUBJECT, fetch._TIME)] for b in blocks
    ]
    if columns is None:
        assert any(counts != [1, 1, 1] for counts in per_block)
        return
    assert all(counts == [1, 1, 1] for counts in per_block)
    blob = b"\n".join(blocks)
    raw = fetch.RawReplies(2**62)
    raw.headers = blocks
    seqs, subjects, stamps, user_rows = columns
    assert seqs == list(map(int, fetch._SEQ.findall(blob)))
    assert subjects == fetch._SUBJECT.findall(blob)
    assert stamps == fetch._TIME.findall(blob)
    assert user_rows == raw._user_rows(blob, len(blocks))


HEADER_LINES = st.sampled_from(
    [
        b"Nats-Msg-Id: w:1",
        b"A: 1",
        b"A:2",
        b" B :  x y \t",
        b"no colon",
        b"",
        b"C: a:b",
        b"Nats-Sequence: 7",
        b"Nats-Stream: S",
        b"K\xc3\xa9: v\xc3\xa9",
        b"D:",
    ]
)


@given(st.lists(st.lists(HEADER_LINES, max_size=6), min_size=1, max_size=6), st.data())
def test_user_headers_read_as_the_row_decode_reads_them(
    rows: list[list[bytes]], data: st.DataObject
) -> None:
    """The compiled pass's flat lists hold, row by row, what `parse_header_lines` and
    `group_headers` make of each block (null where a row has none)."""
    from brook_spark.wire import group_headers, parse_header_lines

    blocks = [b"NATS/1.0\r\n" + b"".join(x + b"\r\n" for x in r) + b"\r\n" for r in rows]
    n = data.draw(st.integers(0, len(blocks)))
    chosen = sorted(data.draw(st.sets(st.integers(0, len(blocks) - 1))))
    row_offsets, keys, key_offsets, values, nulls = user_headers(blocks, chosen, n)
    got = []
    for row in range(n):
        pairs = [
            (keys[k].decode(), [v.decode() for v in values[key_offsets[k] : key_offsets[k + 1]]])
            for k in range(row_offsets[row], row_offsets[row + 1])
        ]
        assert nulls[row] == (not pairs)
        got.append(pairs or None)
    expected = [
        (group_headers(parse_header_lines(blocks[row])) or None) if row in chosen else None
        for row in range(n)
    ]
    assert got == expected
