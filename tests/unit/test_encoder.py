"""Protocol encoders: byte-exact frames, decodable by the matching sans-I/O parsers."""

from __future__ import annotations

import json
from typing import Any

import pytest

from brook.protocol import encoder, headers
from brook.protocol.client_parser import Err, Info, Msg, ServerOp, ServerParser, Simple
from brook.protocol.parser import ClientParser

HDR = b"NATS/1.0\r\nA: b\r\n\r\n"  # 18 bytes


# ---------------------------------------------------------------------------- server → client


@pytest.mark.parametrize(
    ("frame", "expected"),
    [
        (encoder.PING, b"PING\r\n"),
        (encoder.PONG, b"PONG\r\n"),
        (encoder.OK, b"+OK\r\n"),
        (encoder.CRLF, b"\r\n"),
        (encoder.err("Unknown Protocol Operation"), b"-ERR 'Unknown Protocol Operation'\r\n"),
        (
            encoder.info({"server_id": "N1", "port": 4222}),
            b'INFO {"server_id":"N1","port":4222} \r\n',
        ),
        (encoder.msg(b"foo", b"1", None, b"hello"), b"MSG foo 1 5\r\nhello\r\n"),
        (encoder.msg(b"foo", b"1", b"", b"hello"), b"MSG foo 1 5\r\nhello\r\n"),
        (encoder.msg(b"foo", b"1", b"bar", b"hello"), b"MSG foo 1 bar 5\r\nhello\r\n"),
        (encoder.msg(b"foo", b"22", None, b""), b"MSG foo 22 0\r\n\r\n"),
        (encoder.hmsg(b"foo", b"1", None, HDR, b"hi"), b"HMSG foo 1 18 20\r\n" + HDR + b"hi\r\n"),
        (
            encoder.hmsg(b"foo", b"1", b"rep", HDR, b"hi"),
            b"HMSG foo 1 rep 18 20\r\n" + HDR + b"hi\r\n",
        ),
        (encoder.hmsg(b"foo", b"1", None, HDR, b""), b"HMSG foo 1 18 18\r\n" + HDR + b"\r\n"),
    ],
)
def test_server_frames_are_byte_exact(frame: bytes, expected: bytes) -> None:
    assert frame == expected


def test_err_with_a_permissions_text() -> None:
    text = 'Permissions Violation for Publish with Reply of "$JS.ACK.x"'
    assert encoder.err(text) == b"-ERR '" + text.encode() + b"'\r\n"


@pytest.mark.parametrize(
    ("frame", "expected"),
    [
        (encoder.PING, Simple("PING")),
        (encoder.PONG, Simple("PONG")),
        (encoder.OK, Simple("+OK")),
        (encoder.err("Stale Connection"), Err("Stale Connection")),
        (encoder.info({"a": [1, "x"], "b": True}), Info({"a": [1, "x"], "b": True})),
        (encoder.msg(b"s", b"9", None, b"p\r\nq"), Msg(b"s", b"9", None, None, b"p\r\nq")),
        (encoder.msg(b"s", b"9", b"r", b""), Msg(b"s", b"9", b"r", None, b"")),
        (encoder.hmsg(b"s", b"9", None, HDR, b"x"), Msg(b"s", b"9", None, HDR, b"x")),
        (encoder.hmsg(b"s", b"9", b"r", HDR, b""), Msg(b"s", b"9", b"r", HDR, b"")),
    ],
)
def test_server_frames_decode(frame: bytes, expected: ServerOp) -> None:
    assert ServerParser().feed(frame) == [expected]


def test_server_stream_decodes_byte_by_byte() -> None:
    no_responders = headers.encode([("Nats-Subject", "svc")], 503)
    frames = [
        encoder.info({"server_id": "N", "max_payload": 1048576}),
        encoder.OK,
        encoder.msg(b"a.b", b"1", b"_INBOX.1", b"MSG x 1 1\r\n"),
        encoder.hmsg(b"_INBOX.1", b"2", None, no_responders, b""),
        encoder.PING,
        encoder.err("Maximum Payload Violation"),
    ]
    stream = b"".join(frames)
    whole = ServerParser().feed(stream)
    assert len(whole) == len(frames)
    assert whole[3] == Msg(b"_INBOX.1", b"2", None, no_responders, b"")
    assert headers.parse(no_responders).status == 503
    parser = ServerParser()
    pieces: list[ServerOp] = []
    for i in range(len(stream)):
        pieces.extend(parser.feed(stream[i : i + 1]))
    assert pieces == whole


def test_info_json_is_compact() -> None:
    frame = encoder.info({"k": "v", "n": None})
    assert frame.startswith(b"INFO ")
    assert frame.endswith(b" \r\n")
    assert json.loads(frame[5:-3]) == {"k": "v", "n": None}
    assert b", " not in frame
    assert b": " not in frame


# ---------------------------------------------------------------------------- client → server


@pytest.mark.parametrize(
    ("frame", "expected"),
    [
        (encoder.connect({"verbose": False}), b'CONNECT {"verbose":false}\r\n'),
        (encoder.pub(b"foo", b"hi"), b"PUB foo 2\r\nhi\r\n"),
        (encoder.pub(b"foo", b"hi", b""), b"PUB foo 2\r\nhi\r\n"),
        (encoder.pub(b"foo", b"hi", b"rep"), b"PUB foo rep 2\r\nhi\r\n"),
        (encoder.hpub(b"foo", HDR, b"hi"), b"HPUB foo 18 20\r\n" + HDR + b"hi\r\n"),
        (encoder.hpub(b"foo", HDR, b"hi", b"rep"), b"HPUB foo rep 18 20\r\n" + HDR + b"hi\r\n"),
        (encoder.sub(b"foo.*", b"1"), b"SUB foo.* 1\r\n"),
        (encoder.sub(b"foo.*", b"1", b""), b"SUB foo.* 1\r\n"),
        (encoder.sub(b"foo.>", b"1", b"q"), b"SUB foo.> q 1\r\n"),
        (encoder.unsub(b"1"), b"UNSUB 1\r\n"),
        (encoder.unsub(b"1", 0), b"UNSUB 1 0\r\n"),
        (encoder.unsub(b"1", 10), b"UNSUB 1 10\r\n"),
    ],
)
def test_client_frames_are_byte_exact(frame: bytes, expected: bytes) -> None:
    assert frame == expected


class Recorder:
    def __init__(self) -> None:
        self.ops: list[tuple[Any, ...]] = []

    def on_connect(self, options: dict[str, Any]) -> None:
        self.ops.append(("connect", options))

    def on_pub(
        self, subject: bytes, reply: bytes | None, header: bytes | None, payload: bytes
    ) -> None:
        self.ops.append(("pub", subject, reply, header, payload))

    def on_pub_run(self, subjects: list[bytes], payload: bytes) -> None:
        for subject in subjects:
            self.on_pub(subject, None, None, payload)

    def on_sub(self, subject: bytes, queue: bytes | None, sid: bytes) -> None:
        self.ops.append(("sub", subject, queue, sid))

    def on_unsub(self, sid: bytes, max_msgs: int | None) -> None:
        self.ops.append(("unsub", sid, max_msgs))

    def on_ping(self) -> None:
        self.ops.append(("ping",))

    def on_pong(self) -> None:
        self.ops.append(("pong",))


def test_client_frames_decode_with_the_client_parser() -> None:
    options = {"verbose": False, "headers": True, "name": "t", "protocol": 1}
    frames = [
        encoder.connect(options),
        encoder.sub(b"a.*", b"1", b"q"),
        encoder.pub(b"a.b", b"x\r\ny", b"r"),
        encoder.hpub(b"a.b", HDR, b"z"),
        encoder.unsub(b"1", 3),
        encoder.PING,
        encoder.PONG,
    ]
    rec = Recorder()
    parser = ClientParser(rec, max_payload=1024, max_control_line=4096)
    parser.feed(b"".join(frames))
    assert rec.ops == [
        ("connect", options),
        ("sub", b"a.*", b"q", b"1"),
        ("pub", b"a.b", b"r", None, b"x\r\ny"),
        ("pub", b"a.b", None, HDR, b"z"),
        ("unsub", b"1", 3),
        ("ping",),
        ("pong",),
    ]
