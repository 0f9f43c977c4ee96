"""Literal protocol bytes against an in-process Brook, literal replies checked.

Every expectation here was taken from nats-server 2.15.1's observable behaviour (wire
reference §1, transcripts/*.txt); tests/conformance replays the same exchanges against
the real server. A test that must show "nothing else was sent" ends with a PING and
expects the PONG to be the next op.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import bcrypt
import pytest

import brook
from tests.support.raw import OMIT, PONG, Err, Info, Msg, RawClient, ServerOp, Simple, is_op

pytestmark = pytest.mark.timeout(10)

OK = Simple("+OK")
PING = Simple("PING")


# ---------------------------------------------------------------------------- helpers


@contextlib.asynccontextmanager
async def raw(server: Any, **kwargs: Any) -> AsyncIterator[RawClient]:
    async with RawClient.connect_url(server.url, **kwargs) as c:
        yield c


@contextlib.asynccontextmanager
async def connected(server: Any, **options: Any) -> AsyncIterator[RawClient]:
    """A raw connection past CONNECT + PING/PONG (and the connect_info INFO)."""
    async with raw(server) as c:
        ops = await c.handshake(**options)
        assert PONG in ops, ops
        yield c


async def sync(c: RawClient) -> list[ServerOp]:
    """PING, and every op up to and including its PONG."""
    assert await c.send(b"PING\r\n")
    return await c.read_ops(until=is_op("PONG"), timeout=2.0)


async def assert_open(c: RawClient) -> None:
    assert await sync(c) == [PONG]


async def assert_error_and_close(c: RawClient, text: str) -> None:
    assert await c.expect_closed(2.0), "server did not close the connection"
    assert await c.read_ops(timeout=0.5) == [Err(text)]


async def assert_silent_close(c: RawClient) -> None:
    assert await c.expect_closed(2.0), "server did not close the connection"
    assert await c.read_ops(timeout=0.5) == []


# ---------------------------------------------------------------------------- INFO


async def test_info_is_sent_first_with_required_fields(server: Any) -> None:
    async with raw(server, read_info=False) as c:
        data = await c.read_raw_until(1, timeout=2.0)
        assert data.startswith(b"INFO {")
        # nats-server writes one space between the JSON and the CRLF; so does Brook.
        line = data[: data.index(b"\r\n") + 2]
        assert line.endswith(b"} \r\n")
        info = json.loads(line[5:-3])
    assert isinstance(info["server_id"], str)
    assert info["server_id"]
    assert isinstance(info["server_name"], str)
    assert info["server_name"]
    version = re.fullmatch(r"(\d+)\.(\d+)\.(\d+)", info["version"])
    assert version is not None, info["version"]
    assert int(version[1]) == 2
    assert int(version[2]) >= 9  # nats-py needs 2.9+ for the named consumer-create subjects
    assert info["proto"] == 1
    assert info["headers"] is True
    assert info["max_payload"] == 1024 * 1024
    assert isinstance(info["client_id"], int)
    assert not isinstance(info["client_id"], bool)
    assert info["host"] == "127.0.0.1"
    assert info["port"] == server.port
    assert "auth_required" not in info
    assert "tls_required" not in info
    assert "connect_info" not in info


async def test_info_client_ids_differ_per_connection(server: Any) -> None:
    async with raw(server) as a, raw(server) as b:
        assert a.info["client_id"] != b.info["client_id"]


async def test_info_advertises_configured_max_payload_and_auth() -> None:
    async with brook.serve(port=0, max_payload_bytes=1024, token="s3cret") as srv, raw(srv) as c:
        assert c.info["max_payload"] == 1024
        assert c.info["auth_required"] is True


# ---------------------------------------------------------------------------- handshake


async def test_handshake_pong_then_connect_info(server: Any) -> None:
    async with raw(server) as c:
        first_info = c.info
        await c.send(
            b'CONNECT {"verbose":false,"pedantic":false,"headers":true,"protocol":1}\r\nPING\r\n'
        )
        data = await c.read_raw(timeout=2.0, quiet=0.3)
    assert data.startswith(b"PONG\r\nINFO {")
    assert data.endswith(b" \r\n")
    assert data.count(b"\r\n") == 2
    info = json.loads(data[len(b"PONG\r\nINFO ") : -3])
    assert info["connect_info"] is True
    assert info["remote_account"] == "$G"
    # The second INFO is the first one plus those two keys.
    assert set(info) - set(first_info) == {"connect_info", "remote_account"}
    assert info["client_id"] == first_info["client_id"]


async def test_handshake_protocol_zero_gets_no_async_info(server: Any) -> None:
    async with raw(server) as c:
        await c.send(b'CONNECT {"verbose":false,"protocol":0}\r\nPING\r\n')
        assert await c.read_raw(timeout=1.0, quiet=0.3) == b"PONG\r\n"


async def test_handshake_verbose_ok_comes_before_pong(server: Any) -> None:
    async with raw(server) as c:
        await c.send(b'CONNECT {"verbose":true,"protocol":0}\r\nPING\r\n')
        assert await c.read_raw(timeout=1.0, quiet=0.3) == b"+OK\r\nPONG\r\n"


async def test_handshake_helper_returns_ops_in_order(server: Any) -> None:
    async with raw(server) as c:
        ops = await c.handshake(verbose=True)
    assert ops[:2] == [OK, PONG]
    assert isinstance(ops[2], Info)
    assert ops[2].fields["connect_info"] is True


async def test_connect_without_verbose_key_defaults_to_verbose(server: Any) -> None:
    async with raw(server) as c:
        await c.send(b"CONNECT {}\r\n")
        assert await c.read_ops(until=is_op("+OK"), timeout=2.0) == [OK]
        await c.send(b"SUB foo 1\r\nPUB foo 2\r\nhi\r\nUNSUB 1\r\n")
        assert await sync(c) == [OK, OK, Msg(b"foo", b"1", None, None, b"hi"), OK, PONG]


async def test_connect_without_pedantic_key_defaults_to_pedantic(server: Any) -> None:
    async with raw(server) as c:
        await c.send(b'CONNECT {"verbose":false}\r\nPUB foo.* 1\r\nx\r\n')
        assert await sync(c) == [Err("Invalid Publish Subject"), PONG]


async def test_operations_before_connect_are_allowed_without_auth(server: Any) -> None:
    async with raw(server) as c:
        await c.send(b"SUB a 1\r\nPUB a 1\r\nx\r\n")
        # No CONNECT yet, so nats-server's defaults apply: verbose.
        assert await sync(c) == [OK, OK, Msg(b"a", b"1", None, None, b"x"), PONG]


# ---------------------------------------------------------------------------- verbose


async def test_verbose_ok_for_connect_sub_pub_hpub_unsub(server: Any) -> None:
    async with raw(server) as c:
        await c.send(b'CONNECT {"verbose":true,"headers":true}\r\n')
        assert await c.read_ops(until=is_op("+OK")) == [OK]
        await c.send(b"SUB foo 1\r\n")
        assert await c.read_ops(until=is_op("+OK")) == [OK]
        await c.send(b"PUB foo 1\r\nx\r\n")
        assert await c.read_ops(until=lambda op: isinstance(op, Msg)) == [
            OK,
            Msg(b"foo", b"1", None, None, b"x"),
        ]
        await c.send(b"HPUB foo 12 12\r\nNATS/1.0\r\n\r\n\r\n")
        assert await c.read_ops(until=lambda op: isinstance(op, Msg)) == [
            OK,
            Msg(b"foo", b"1", None, b"NATS/1.0\r\n\r\n", b""),
        ]
        await c.send(b"UNSUB 1\r\nUNSUB 99\r\n")  # unknown sid: still +OK
        assert await sync(c) == [OK, OK, PONG]


# ---------------------------------------------------------------------------- framing


async def test_client_ping_gets_pong_and_unsolicited_pong_is_ignored(server: Any) -> None:
    async with connected(server) as c:
        await c.send(b"PONG\r\nPING\r\n")
        assert await c.read_raw(timeout=1.0, quiet=0.2) == b"PONG\r\n"


async def test_operation_names_are_case_insensitive(server: Any) -> None:
    async with raw(server) as c:
        await c.send(b'connect {"verbose":false,"headers":true}\r\n')
        await c.send(b"sub foo 1\r\nSuB bar 2\r\npub foo 1\r\na\r\nPuB bar 1\r\nb\r\n")
        await c.send(b"hpub foo 12 13\r\nNATS/1.0\r\n\r\nc\r\nunsub 1\r\npub foo 1\r\nd\r\n")
        await c.send(b"pInG\r\n")
        assert await c.read_ops(until=is_op("PONG")) == [
            Msg(b"foo", b"1", None, None, b"a"),
            Msg(b"bar", b"2", None, None, b"b"),
            Msg(b"foo", b"1", None, b"NATS/1.0\r\n\r\n", b"c"),
            PONG,
        ]


async def test_tabs_and_runs_of_whitespace_separate_arguments(server: Any) -> None:
    async with connected(server) as c:
        # nats-py itself writes "PUB foo  5" and "SUB foo  1" (no reply / no queue).
        await c.send(b"SUB\tfoo  \t 1\r\nSUB foo\tq\t2  \r\n")
        await c.send(b"PUB  foo\t\treply   2 \r\nhi\r\nHPUB\tfoo  12\t14\r\nNATS/1.0\r\n\r\nho\r\n")
        await c.send(b"UNSUB\t1 \r\n")
        assert await sync(c) == [
            Msg(b"foo", b"1", b"reply", None, b"hi"),
            Msg(b"foo", b"2", b"reply", None, b"hi"),
            Msg(b"foo", b"1", None, b"NATS/1.0\r\n\r\n", b"ho"),
            Msg(b"foo", b"2", None, b"NATS/1.0\r\n\r\n", b"ho"),
            PONG,
        ]


async def test_lf_only_line_endings_are_accepted(server: Any) -> None:
    async with raw(server) as c:
        await c.send(b'CONNECT {"verbose":false}\nSUB foo 1\nPUB foo 2\nhi\r\nPING\n')
        assert await c.read_ops(until=is_op("PONG")) == [Msg(b"foo", b"1", None, None, b"hi"), PONG]


async def test_payload_split_across_writes(server: Any) -> None:
    async with connected(server) as c:
        for part in (b"SUB foo 1\r\nPUB foo 5\r\nhe", b"ll", b"o\r", b"\n"):
            await c.send(part)
            await asyncio.sleep(0.02)
        assert await sync(c) == [Msg(b"foo", b"1", None, None, b"hello"), PONG]


# ---------------------------------------------------------------------------- MSG / HMSG bytes


async def test_msg_and_hmsg_exact_bytes(server: Any) -> None:
    async with connected(server) as c:
        await c.send(b"SUB greet.* 1\r\n")
        await c.send(b"PUB greet.joe  5\r\nhello\r\n")
        await c.send(b"HPUB greet.ann  25 27\r\nNATS/1.0\r\nX-Trace: t1\r\n\r\nhi\r\n")
        await c.send(b"PUB greet.bob greet.reply 0\r\n\r\n")
        await c.send(b"HPUB greet.eve inbox.1 25 25\r\nNATS/1.0\r\nX-Trace: t2\r\n\r\n\r\n")
        expected = (
            b"MSG greet.joe 1 5\r\nhello\r\n"
            b"HMSG greet.ann 1 25 27\r\nNATS/1.0\r\nX-Trace: t1\r\n\r\nhi\r\n"
            b"MSG greet.bob 1 greet.reply 0\r\n\r\n"
            b"HMSG greet.eve 1 inbox.1 25 25\r\nNATS/1.0\r\nX-Trace: t2\r\n\r\n\r\n"
        )
        assert await c.read_raw_until(len(expected)) == expected


async def test_binary_payload_with_crlf_inside_is_delivered_verbatim(server: Any) -> None:
    payload = b"\r\nMSG x 1 1\r\n\x00\xff"
    async with connected(server) as c:
        await c.send(b"SUB bin 7\r\nPUB bin %d\r\n%b\r\n" % (len(payload), payload))
        expected = b"MSG bin 7 %d\r\n%b\r\n" % (len(payload), payload)
        assert await c.read_raw_until(len(expected)) == expected


async def test_hpub_with_empty_header_block_is_delivered_as_msg(server: Any) -> None:
    async with connected(server) as c:
        await c.send(b"SUB foo 1\r\nHPUB foo 0 2\r\nhi\r\n")
        assert await c.read_raw_until(len(b"MSG foo 1 2\r\nhi\r\n")) == b"MSG foo 1 2\r\nhi\r\n"


async def test_headers_are_stripped_for_subscriber_without_headers(server: Any) -> None:
    async with connected(server, headers=False, no_responders=False) as plain:
        async with connected(server) as pub:
            await plain.send(b"SUB foo 1\r\n")
            await assert_open(plain)
            await pub.send(b"SUB foo 2\r\nHPUB foo reply 18 20\r\nNATS/1.0\r\nA: b\r\n\r\nhi\r\n")
            expected = b"HMSG foo 2 reply 18 20\r\nNATS/1.0\r\nA: b\r\n\r\nhi\r\n"
            assert await pub.read_raw_until(len(expected)) == expected
        expected = b"MSG foo 1 reply 2\r\nhi\r\n"
        assert await plain.read_raw_until(len(expected)) == expected


# ---------------------------------------------------------------------------- SUB / UNSUB


async def test_unsub_with_max_removes_after_that_many_messages(server: Any) -> None:
    async with connected(server) as c:
        await c.send(b"SUB limited  2\r\nUNSUB 2 2\r\n")
        for i in range(1, 4):
            await c.send(b"PUB limited  1\r\n%d\r\n" % i)
        assert await sync(c) == [
            Msg(b"limited", b"2", None, None, b"1"),
            Msg(b"limited", b"2", None, None, b"2"),
            PONG,
        ]


async def test_unsub_with_max_already_reached_removes_now(server: Any) -> None:
    async with connected(server) as c:
        await c.send(b"SUB a 1\r\nPUB a 1\r\nx\r\nPUB a 1\r\ny\r\nUNSUB 1 1\r\nPUB a 1\r\nz\r\n")
        assert await sync(c) == [
            Msg(b"a", b"1", None, None, b"x"),
            Msg(b"a", b"1", None, None, b"y"),
            PONG,
        ]


async def test_unsub_of_unknown_sid_is_ignored(server: Any) -> None:
    async with connected(server) as c:
        await c.send(b"UNSUB 42\r\nUNSUB 43 5\r\nSUB a 1\r\nPUB a 1\r\nx\r\n")
        assert await sync(c) == [Msg(b"a", b"1", None, None, b"x"), PONG]


async def test_duplicate_sid_is_ignored_and_first_subscription_kept(server: Any) -> None:
    async with connected(server) as c:
        await c.send(b"SUB foo 1\r\nSUB bar 1\r\nPUB foo 1\r\nf\r\nPUB bar 1\r\nb\r\n")
        assert await sync(c) == [Msg(b"foo", b"1", None, None, b"f"), PONG]


async def test_sids_are_opaque_tokens_echoed_verbatim(server: Any) -> None:
    async with connected(server) as c:
        await c.send(b"SUB foo my-sid.7\r\nPUB foo 1\r\nx\r\n")
        expected = b"MSG foo my-sid.7 1\r\nx\r\n"
        assert await c.read_raw_until(len(expected)) == expected


@pytest.mark.parametrize(
    "subject", [b"foo..bar", b"foo.>.bar", b".foo", b"foo.", b">.foo", b"."], ids=repr
)
async def test_invalid_sub_subject_errors_and_stays_open(server: Any, subject: bytes) -> None:
    async with connected(server) as c:
        await c.send(b"SUB %b 1\r\n" % subject)
        assert await sync(c) == [Err("Invalid Subject"), PONG]


async def test_wildcard_like_characters_inside_tokens_are_literal(server: Any) -> None:
    async with connected(server) as c:
        await c.send(b"SUB foo* 1\r\nSUB a>b 2\r\nPUB foo* 1\r\nx\r\nPUB a>b 1\r\ny\r\n")
        assert await sync(c) == [
            Msg(b"foo*", b"1", None, None, b"x"),
            Msg(b"a>b", b"2", None, None, b"y"),
            PONG,
        ]


# ---------------------------------------------------------------------------- PUB checks


async def test_pedantic_publish_to_wildcard_subject_errors(server: Any) -> None:
    async with connected(server, pedantic=True) as c:
        await c.send(b"PUB foo.* 1\r\nx\r\n")
        ops = await sync(c)
        assert ops[0] == Err("Invalid Publish Subject")
        assert ops[-1] == PONG


async def test_non_pedantic_publish_to_wildcard_subject_is_not_refused(server: Any) -> None:
    async with connected(server) as c:
        await c.send(b"PUB foo.* 1\r\nx\r\n")
        assert await sync(c) == [PONG]


async def test_publish_with_js_ack_reply_is_a_permissions_violation(server: Any) -> None:
    async with connected(server) as c:
        await c.send(b"SUB foo 1\r\nPUB foo $JS.ACK.s.c.1.2.3.4.5 2\r\nhi\r\n")
        assert await sync(c) == [
            Err('Permissions Violation for Publish with Reply of "$JS.ACK.s.c.1.2.3.4.5"'),
            PONG,
        ]
        await c.send(b"PUB foo $JS.ACK 2\r\nok\r\n")  # not under $JS.ACK.: delivered
        assert await sync(c) == [Msg(b"foo", b"1", b"$JS.ACK", None, b"ok"), PONG]


# ---------------------------------------------------------------------------- fatal errors


@pytest.mark.parametrize(
    "data",
    [
        b"FOO bar\r\n",
        b"PUB\r\n",
        b"SUB\r\n",
        b"UNSUB\r\n",
        b"HPUB\r\n",
        b"MSG foo 1 2\r\nhi\r\n",
        b"\r\n",
        b"PUB foo 2\r\nhiXX",
        b"PUB foo 2\r\nhi\nPING\r\n",
        b"PUB foo 2\r\nhi\rX",
    ],
    ids=repr,
)
async def test_unknown_protocol_operation_errors_and_closes(server: Any, data: bytes) -> None:
    async with connected(server) as c:
        await c.send(data)
        await assert_error_and_close(c, "Unknown Protocol Operation")


async def test_pub_over_max_payload_refused_on_control_line(server: Any) -> None:
    async with connected(server) as c:
        # Only the control line: the server must not wait for 1 MiB of payload.
        await c.send(b"PUB big.payload 1048577\r\n")
        await assert_error_and_close(c, "Maximum Payload Violation")


async def test_hpub_total_over_max_payload_refused() -> None:
    async with brook.serve(port=0, max_payload_bytes=1024) as srv, connected(srv) as c:
        await c.send(b"SUB foo 1\r\nPUB foo 1024\r\n" + b"x" * 1024 + b"\r\n")
        ops = await sync(c)
        assert ops == [Msg(b"foo", b"1", None, None, b"x" * 1024), PONG]
        await c.send(b"HPUB foo 12 1025\r\n")
        await assert_error_and_close(c, "Maximum Payload Violation")


async def test_control_line_over_limit_errors_and_closes(server: Any) -> None:
    async with connected(server) as c:
        await c.send(b"SUB " + b"a" * 4094 + b" 1\r\n")  # arguments of exactly 4096 bytes
        assert await sync(c) == [PONG]
        await c.send(b"SUB " + b"a" * 4095 + b" 1\r\n")
        await assert_error_and_close(c, "maximum control line exceeded")


async def test_control_line_without_line_end_is_bounded() -> None:
    async with brook.serve(port=0, max_control_line_bytes=512) as srv, connected(srv) as c:
        await c.send(b"PUB " + b"a" * 600)  # no CRLF ever comes
        await assert_error_and_close(c, "maximum control line exceeded")


@pytest.mark.parametrize(
    "data",
    [
        b"PUB foo notanumber\r\n",
        b"PUB foo -1\r\n",
        b"PUB foo +1\r\n",
        b"PUB a b c 1\r\n",
        b"PUB foo\r\n",
        b"HPUB foo 12\r\n",
        b"HPUB a b c 1 2\r\n",
        b"HPUB foo 14 12\r\n",
        b"HPUB foo x 12\r\n",
        b"SUB onlysubject\r\n",
        b"SUB a b c d\r\n",
        b"UNSUB 1 2 3\r\n",
        b"CONNECT\r\n",
        b"-ERR 'x'\r\n",
    ],
    ids=repr,
)
async def test_malformed_arguments_close_silently(server: Any, data: bytes) -> None:
    async with connected(server) as c:
        await c.send(data)
        await assert_silent_close(c)


@pytest.mark.parametrize(
    "connect",
    [
        b"CONNECT {nope\r\n",
        b"CONNECT []\r\n",
        b'CONNECT {"verbose":false} x\r\n',
        b'CONNECT {"verbose":"yes"}\r\n',
        b'CONNECT {"name":5}\r\n',
        b'CONNECT {"protocol":"1"}\r\n',
    ],
    ids=repr,
)
async def test_invalid_connect_json_closes_silently(server: Any, connect: bytes) -> None:
    async with raw(server) as c:
        await c.send(connect)
        await assert_silent_close(c)


@pytest.mark.parametrize("protocol", [2, -1])
async def test_unknown_client_protocol_errors_and_closes(server: Any, protocol: int) -> None:
    async with raw(server) as c:
        ops = await c.handshake(protocol=protocol)
        assert ops == [Err("invalid client protocol")]
        assert await c.expect_closed(2.0)


async def test_no_responders_without_headers_errors_and_closes(server: Any) -> None:
    async with raw(server) as c:
        ops = await c.handshake(headers=False, no_responders=True)
        assert ops == [Err("no responders requires headers support")]
        assert await c.expect_closed(2.0)


async def test_hpub_without_headers_negotiated_closes(server: Any) -> None:
    async with connected(server, headers=False, no_responders=False) as c:
        await c.send(b"SUB foo 1\r\nHPUB foo 12 14\r\nNATS/1.0\r\n\r\nhi\r\n")
        await assert_silent_close(c)


async def test_headers_omitted_from_connect_means_no_headers(server: Any) -> None:
    async with connected(server, headers=OMIT, no_responders=OMIT) as c:
        await c.send(b"HPUB foo 12 12\r\nNATS/1.0\r\n\r\n\r\n")
        await assert_silent_close(c)


# ---------------------------------------------------------------------------- auth


async def test_token_auth_accepts_the_right_token() -> None:
    async with brook.serve(port=0, token="s3cret") as srv, raw(srv) as c:
        assert c.info["auth_required"] is True
        assert PONG in await c.handshake(auth_token="s3cret")
        await assert_open(c)


@pytest.mark.parametrize(
    "creds",
    [{"auth_token": "nope"}, {}, {"user": "s3cret", "pass": "s3cret"}],
    ids=["wrong", "missing", "as-user"],
)
async def test_token_auth_refuses_others(creds: dict[str, Any]) -> None:
    async with brook.serve(port=0, token="s3cret") as srv, raw(srv) as c:
        assert await c.handshake(**creds) == [Err("Authorization Violation")]
        assert await c.expect_closed(2.0)


async def test_user_password_auth() -> None:
    async with brook.serve(port=0, user="u", password="p") as srv:
        async with raw(srv) as c:
            accepted: dict[str, Any] = {"user": "u", "pass": "p"}
            assert PONG in await c.handshake(**accepted)
        refused: list[dict[str, Any]] = [
            {"user": "u", "pass": "x"},
            {"user": "x", "pass": "p"},
            {"auth_token": "p"},
        ]
        for creds in refused:
            async with raw(srv) as c:
                assert await c.handshake(**creds) == [Err("Authorization Violation")], creds
                assert await c.expect_closed(2.0)


async def test_bcrypt_password_auth() -> None:
    hashed = bcrypt.hashpw(b"pw", bcrypt.gensalt(rounds=4)).decode()
    async with brook.serve(port=0, user="u", password=hashed) as srv:
        async with raw(srv) as c:
            # Operations pipelined behind the CONNECT wait for the (threaded) bcrypt check.
            await c.send(b'CONNECT {"verbose":false,"user":"u","pass":"pw"}\r\n')
            await c.send(b"SUB foo 1\r\nPUB foo 1\r\nx\r\nPING\r\n")
            ops = await c.read_ops(until=is_op("PONG"), timeout=5.0)
            assert ops == [Msg(b"foo", b"1", None, None, b"x"), PONG]
        for secret in ("px", hashed):  # the hash itself is not the password
            async with raw(srv) as c:
                ops = await c.handshake(user="u", timeout=5.0, **{"pass": secret})
                assert ops == [Err("Authorization Violation")]
                assert await c.expect_closed(2.0)


@pytest.mark.parametrize(
    "data",
    [b"SUB foo 1\r\n", b"PUB foo 1\r\nx\r\n", b"PING\r\n", b"PONG\r\n", b"UNSUB 1\r\n"],
    ids=repr,
)
async def test_operation_before_connect_with_auth_is_a_violation(data: bytes) -> None:
    async with brook.serve(port=0, token="s3cret") as srv, raw(srv) as c:
        await c.send(data)
        await assert_error_and_close(c, "Authorization Violation")


async def test_auth_timeout() -> None:
    async with brook.serve(port=0, token="s3cret", auth_timeout_s=0.3) as srv, raw(srv) as c:
        loop = asyncio.get_running_loop()
        started = loop.time()
        assert await c.expect_closed(3.0)
        assert 0.2 <= loop.time() - started < 2.0
        assert await c.read_ops(timeout=0.5) == [Err("Authentication Timeout")]


async def test_valid_connect_cancels_auth_timeout() -> None:
    async with brook.serve(port=0, token="s3cret", auth_timeout_s=0.3) as srv, raw(srv) as c:
        assert PONG in await c.handshake(auth_token="s3cret")
        await asyncio.sleep(0.5)
        await assert_open(c)


# ---------------------------------------------------------------------------- limits


async def test_max_connections() -> None:
    async with brook.serve(port=0, max_connections=2) as srv:
        async with raw(srv) as a, raw(srv) as b:
            await a.handshake()
            await b.handshake()
            async with raw(srv) as c:
                assert c.info["client_id"]  # INFO first, then the error
                await assert_error_and_close(c, "maximum connections exceeded")
        # Once the others are gone there is room again.
        async with connected(srv) as d:
            await assert_open(d)


async def test_max_subscriptions_errors_but_stays_open() -> None:
    async with brook.serve(port=0, max_subscriptions=3) as srv, connected(srv) as c:
        await c.send(b"SUB a 1\r\nSUB b 2\r\nSUB c 3\r\nSUB d 4\r\n")
        assert await sync(c) == [Err("maximum subscriptions exceeded"), PONG]
        await c.send(b"UNSUB 1\r\nSUB e 5\r\nPUB e 1\r\nx\r\n")
        assert await sync(c) == [Msg(b"e", b"5", None, None, b"x"), PONG]


async def test_server_pings_and_declares_stale_connection() -> None:
    settings: dict[str, Any] = {"ping_interval_s": 0.2, "max_pings_out": 2}
    async with brook.serve(port=0, **settings) as srv, connected(srv) as c:
        assert await c.expect_closed(3.0)
        assert await c.read_ops(timeout=0.5) == [PING, PING, Err("Stale Connection")]


async def test_answered_server_pings_keep_the_connection() -> None:
    settings: dict[str, Any] = {"ping_interval_s": 0.1, "max_pings_out": 2}
    async with brook.serve(port=0, **settings) as srv, raw(srv, auto_pong=True) as c:
        assert PONG in await c.handshake()
        assert not await c.expect_closed(0.8)
        ops = await c.read_ops(timeout=0.3)
        assert PING in ops
        assert Err("Stale Connection") not in ops


# ---------------------------------------------------------------------------- delivery rules


async def test_no_responders_status_bytes(server: Any) -> None:
    async with connected(server) as c:
        await c.send(b"SUB _INBOX.Jokb3UrNjZvOSOBY4aku8A.*  1\r\n")
        reply = b"_INBOX.Jokb3UrNjZvOSOBY4aku8A.Jokb3UrNjZvOSOBY4akuAcf6a1"
        await c.send(b"PUB nobody.home %b 7\r\nanyone?\r\n" % reply)
        expected = (
            b"HMSG %b 1 43 43\r\nNATS/1.0 503\r\nNats-Subject: nobody.home\r\n\r\n\r\n" % reply
        )
        assert await c.read_raw_until(len(expected)) == expected


async def test_no_responders_needs_a_matching_own_subscription(server: Any) -> None:
    async with connected(server) as c, connected(server) as other:
        await other.send(b"SUB inbox.* 1\r\n")
        await assert_open(other)
        await c.send(b"PUB nobody inbox.1 0\r\n\r\n")  # the reply matches only `other`
        assert await sync(c) == [PONG]
        assert await sync(other) == [PONG]


async def test_no_responders_only_when_asked_for(server: Any) -> None:
    async with connected(server, no_responders=False) as c:
        await c.send(b"SUB inbox.* 1\r\nPUB nobody inbox.1 0\r\n\r\n")
        assert await sync(c) == [PONG]


async def test_echo_false_suppresses_own_messages_only(server: Any) -> None:
    async with connected(server, echo=False) as quiet, connected(server) as other:
        await quiet.send(b"SUB foo 1\r\n")
        await other.send(b"SUB foo 1\r\n")
        await assert_open(quiet)
        await assert_open(other)
        await quiet.send(b"PUB foo 4\r\nmine\r\n")
        await assert_open(quiet)
        assert await other.read_ops(until=lambda op: isinstance(op, Msg)) == [
            Msg(b"foo", b"1", None, None, b"mine")
        ]
        await other.send(b"PUB foo 6\r\ntheirs\r\n")
        assert await quiet.read_ops(until=lambda op: isinstance(op, Msg)) == [
            Msg(b"foo", b"1", None, None, b"theirs")
        ]


async def test_queue_groups_deliver_to_one_member_per_group(server: Any) -> None:
    n = 40
    async with connected(server) as c, connected(server) as d:
        await c.send(b"SUB work.items workers 1\r\nSUB work.items workers 2\r\nSUB work.*  3\r\n")
        await c.send(b"SUB work.> other 4\r\n")
        await d.send(b"SUB work.items workers 1\r\n")
        await assert_open(c)
        await assert_open(d)
        for i in range(n):
            await c.send(b"PUB work.items  5\r\njob-%d\r\n" % (i % 10))
        got: Counter[tuple[str, bytes, bytes]] = Counter()
        for name, conn in (("c", c), ("d", d)):
            ops = await sync(conn)
            assert all(isinstance(op, Msg) for op in ops[:-1]), ops
            got.update((name, op.sid, op.payload) for op in ops if isinstance(op, Msg))
    payloads = [b"job-%d" % i for i in range(10)]
    for payload in payloads:
        # The plain subscriber and the "other" group get every message (4 each) ...
        assert got[("c", b"3", payload)] == 4
        assert got[("c", b"4", payload)] == 4
        # ... and "workers" delivers each to exactly one of its three members.
        members = [("c", b"1"), ("c", b"2"), ("d", b"1")]
        assert sum(got[(name, sid, payload)] for name, sid in members) == 4
    assert sum(got.values()) == 3 * n
    per_member = Counter((name, sid) for name, sid, _ in got.elements())
    assert per_member[("c", b"1")] + per_member[("c", b"2")] + per_member[("d", b"1")] == n
    assert all(per_member[m] > 0 for m in [("c", b"1"), ("c", b"2"), ("d", b"1")])


async def test_queue_group_members_on_different_connections(server: Any) -> None:
    n = 60
    async with (
        connected(server) as a,
        connected(server) as b,
        connected(server) as pub,
    ):
        await a.send(b"SUB jobs q 1\r\n")
        await b.send(b"SUB jobs q 1\r\n")
        await assert_open(a)
        await assert_open(b)
        for i in range(n):
            await pub.send(b"PUB jobs 3\r\n%03d\r\n" % i)
        await assert_open(pub)
        got_a = [op.payload for op in (await sync(a))[:-1] if isinstance(op, Msg)]
        got_b = [op.payload for op in (await sync(b))[:-1] if isinstance(op, Msg)]
    assert sorted(got_a + got_b) == [b"%03d" % i for i in range(n)]
    assert got_a
    assert got_b


async def test_malformed_client_does_not_disturb_others(server: Any) -> None:
    async with connected(server) as good, connected(server) as pub:
        await good.send(b"SUB news 1\r\n")
        await assert_open(good)
        for garbage in (b"FOO\r\n", b"PUB news notanumber\r\n", b"PUB news 1048577\r\n"):
            async with connected(server) as bad:
                await bad.send(b"SUB news 9\r\n" + garbage)
                assert await bad.expect_closed(2.0)
            await pub.send(b"PUB news 2\r\nok\r\n")
            assert await good.read_ops(until=lambda op: isinstance(op, Msg)) == [
                Msg(b"news", b"1", None, None, b"ok")
            ]
        await assert_open(good)
        await assert_open(pub)
