"""`framescan.scan`, the connector's compiled frame loop (ADR 0059): it hands exactly the
frames a raw subscription should get, as written, and stops at the first thing it leaves to
`wire.FrameParser`'s general path (another operation, a sid without a raw handler, a frame
not complete in the read, a line of another shape), whatever the frames and the cut."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given
from hypothesis import strategies as st

from brook_spark.framescan import scan

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
