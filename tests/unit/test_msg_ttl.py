"""Per-message TTL (`Nats-TTL`): the parser, the pure TTL index, and Stream expiry under a
manual clock. No sockets, no sleeping.

The accepted/rejected values below were each published to nats-server 2.15.1; the ones a
client library can send are also conformance scenarios (`msg-ttl-*`).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from brook.jetstream import ttl
from brook.jetstream.models import parse_stream_config
from brook.jetstream.store.base import StoredMessage
from brook.jetstream.store.memory import MemoryStore
from brook.jetstream.stream import Stream
from brook.protocol import headers as hdrs

SECOND = 1_000_000_000
T0 = 1_700_000_000 * SECOND

# ------------------------------------------------------------------ parsing

ACCEPTED = [
    ("1", 1),
    ("30", 30),
    ("01", 1),
    ("30s", 30),
    ("1m", 60),
    ("1h", 3600),
    ("1h30m", 5400),
    ("1.5h", 5400),
    ("1h1h", 7200),
    ("+5s", 5),
    ("1.s", 1),
    ("1.0s", 1),
    ("1000ms", 1),
    ("1000000000ns", 1),
    ("1000000us", 1),
    ("1000000\u00b5s", 1),  # micro sign
    ("1000000\u03bcs", 1),  # greek mu
    # Whole seconds, truncated: nats-server removed "1500ms" and "1.9s" after 1 s.
    ("1500ms", 1),
    ("1.5s", 1),
    ("1.9s", 1),
    ("1s500ms", 1),
    ("1h0.5s", 3600),
    ("0.99999999999999999999s", 1),
    ("9223372036s", 9223372036),
    ("2562047h", 9223369200),
    ("2562047h47m16.854775807s", 9223372036),
    # Digit strings wrap like Go int64: 2^64 + 5 lived 5 s on nats-server.
    ("9223372036854775807", 9223372036854775807),
    ("18446744073709551621", 5),
    ("99999999999999999999", 99999999999999999999 - 5 * 2**64),
    ("never", ttl.NEVER),
    ("Never", ttl.NEVER),
    ("NEVER", ttl.NEVER),
    ("nEvEr", ttl.NEVER),
    ("00", 0),  # a zero digit string is "no TTL", even on a stream without allow_msg_ttl
]

REJECTED = [
    "0",  # the duration "0" is shorter than 1 s (unlike "00")
    "0s",
    "00s",
    "-0",
    "-0s",
    "-1",
    "-1s",
    "500ms",
    "999ms",
    "999999999ns",
    "0.9999999999s",
    "0.00000000001h",
    "1us",
    "1ns",
    ".5s",
    ".s",
    "s",
    "1.5",
    "1d",
    "5S",
    "+5",
    "1e3",
    "0x10",
    "1_0",
    "\u0663",  # ARABIC-INDIC DIGIT THREE
    "1\u00e9",
    "abc",
    "never1",
    "nev er",
    "never ",
    "5 ",
    "5s ",
    "1 s",
    "\t5",
    "5\t",
    "1m-1s",
    "1s1",
    "9223372036854775808",  # 2^63 wraps negative
    "9223372037s",
    "9223372036.854775808s",
    "2562047h47m16.854775808s",
    "2562048h",
]


@pytest.mark.parametrize(("value", "seconds"), ACCEPTED)
def test_parse_accepts_what_nats_server_accepts(value: str, seconds: int) -> None:
    assert ttl.parse_ttl(value) == seconds


@pytest.mark.parametrize("value", REJECTED)
def test_parse_rejects_what_nats_server_rejects(value: str) -> None:
    with pytest.raises(ttl.InvalidTTL):
        ttl.parse_ttl(value)


@pytest.mark.parametrize(
    ("block", "value"),
    [
        (b"NATS/1.0\r\nNats-TTL: 5\r\n\r\n", "5"),
        (b"NATS/1.0\r\nNats-TTL:5\r\n\r\n", "5"),
        (b"NATS/1.0\r\nNats-TTL:   never\r\n\r\n", "never"),
        (b"NATS/1.0\r\nNats-TTL: 5 \r\n\r\n", "5 "),  # trailing blanks kept: invalid
        (b"NATS/1.0\r\nNats-TTL:\t5\r\n\r\n", "\t5"),  # only spaces are skipped
        (b"NATS/1.0\r\nNats-TTL: \r\n\r\n", ""),  # empty: no TTL
        (b"NATS/1.0\r\nNats-TTL: abc\r\nNats-TTL: 5\r\n\r\n", "abc"),  # the first one
        (b"NATS/1.0\r\nX-Nats-TTL: 1\r\nNats-TTL: abc\r\n\r\n", "abc"),
        (b"NATS/1.0\r\nnats-ttl: abc\r\n\r\n", None),  # names are case-sensitive
        (b"NATS/1.0\r\nNats-TTL-X: abc\r\n\r\n", None),
        (b"NATS/1.0\r\nNats-TTL :abc\r\n\r\n", None),
        (None, None),
    ],
)
def test_header_value_reads_the_line_as_nats_server_does(
    block: bytes | None, value: str | None
) -> None:
    assert ttl.header_value(block) == value


def test_deadline_overflows_like_int64() -> None:
    assert ttl.deadline(T0, 5) == T0 + 5 * SECOND
    # nats-server expired both of these within ~0.3 s of publishing them.
    assert ttl.deadline(T0, 9223372036854775807) < T0
    assert ttl.deadline(T0, ttl.parse_ttl("2562047h")) < T0


# ------------------------------------------------------------------ the index


def test_index_pops_exactly_at_the_deadline_in_sequence_order() -> None:
    index = ttl.TtlIndex()
    assert index.add(3, T0, 2) == T0 + 2 * SECOND
    assert index.add(1, T0 + SECOND, 1) == T0 + 2 * SECOND
    assert index.add(2, T0, 10) == T0 + 10 * SECOND
    assert index.pop_due(T0 + 2 * SECOND - 1) == []
    assert index.pop_due(T0 + 2 * SECOND) == [1, 3]
    assert index.next_deadline(lambda seq: True) == T0 + 10 * SECOND
    assert index.pop_due(T0 + 100 * SECOND) == [2]
    assert index.next_deadline(lambda seq: True) is None
    assert len(index) == 0


def test_index_never_and_zero() -> None:
    index = ttl.TtlIndex()
    assert index.add(1, T0, ttl.NEVER) is None
    assert index.add(2, T0, 0) is None
    assert index.has_exempt
    assert index.is_exempt(1)
    assert not index.is_exempt(2)
    assert index.pop_due(T0 * 2) == []
    assert index.seqs() == [1]


def test_index_skips_and_compacts_stale_entries() -> None:
    index = ttl.TtlIndex()
    for seq in range(1, 6):
        index.add(seq, T0, seq)
    index.add(6, T0, ttl.NEVER)
    alive = {3, 5}
    assert index.next_deadline(alive.__contains__) == T0 + 3 * SECOND
    assert index.seqs() == [3, 4, 5, 6]  # only the stale head was dropped
    index.compact(alive.__contains__)
    assert index.seqs() == [3, 5]
    assert not index.has_exempt


# ------------------------------------------------------------------ the stream


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> int:
        return self.now


class CountingStore(MemoryStore):
    """A memory store that counts the loads a stream makes."""

    def __init__(self) -> None:
        super().__init__(first_seq=1)
        self.loads = 0

    def load(self, seq: int) -> StoredMessage | None:
        self.loads += 1
        return super().load(seq)

    def load_next(self, filter_subject: str, start_seq: int) -> StoredMessage | None:
        self.loads += 1
        return super().load_next(filter_subject, start_seq)


class Harness:
    def __init__(self, store: MemoryStore | None = None, **config: Any) -> None:
        self.clock = Clock()
        self.acks: list[dict[str, Any]] = []
        self.config = {"allow_msg_ttl": True, **config}
        self.store = store if store is not None else MemoryStore(first_seq=1)
        self.stream = self.open()

    def open(self) -> Stream:
        """A Stream over the harness's store, as after a restart."""
        cfg = parse_stream_config(
            {"name": "S", "subjects": ["s.>"], "storage": "memory", **self.config},
            subject_name="S",
        )
        return Stream(
            cfg,
            self.store,
            now_ns=self.clock,
            send_ack=lambda reply, ack: self.acks.append(json.loads(ack)),
            committer=None,
            created_ns=self.clock.now,
        )

    def publish(self, subject: str = "s.a", data: bytes = b"x", **headers: str) -> dict[str, Any]:
        block = (
            hdrs.encode([(k.replace("_", "-"), v) for k, v in headers.items()]) if headers else None
        )
        self.stream.ingest(subject.encode(), b"_INBOX.r", block, data)
        return self.acks[-1]

    def seqs(self) -> list[int]:
        out = []
        msg = self.store.load_next("", 0)
        while msg is not None:
            out.append(msg.seq)
            msg = self.store.load_next("", msg.seq + 1)
        return out


def test_ttl_expiry_is_exact_to_the_nanosecond() -> None:
    h = Harness()
    assert h.publish(Nats_TTL="2") == {"stream": "S", "seq": 1}
    h.publish()  # no TTL, no max_age: stays
    assert h.stream.expire() == 2 * SECOND
    h.clock.now += 2 * SECOND - 1
    assert h.stream.expire() == 1
    assert h.seqs() == [1, 2]
    h.clock.now += 1
    assert h.stream.expire() is None
    assert h.seqs() == [2]


def test_truncated_duration_and_next_expiry_across_messages() -> None:
    h = Harness()
    h.publish(Nats_TTL="1500ms")  # 1 s
    h.clock.now += SECOND // 2
    h.publish(Nats_TTL="1m")
    assert h.stream.expire() == SECOND // 2
    h.clock.now += SECOND // 2
    assert h.stream.expire() == 60 * SECOND - SECOND // 2
    assert h.seqs() == [2]


def test_overflowing_ttl_expires_at_once_like_nats_server() -> None:
    h = Harness()
    assert h.publish(Nats_TTL="9223372036854775807")["seq"] == 1
    assert h.stream.expire() is None
    assert h.seqs() == []


def test_never_is_exempt_from_max_age_and_positive_ttls_are_not() -> None:
    h = Harness(max_age=10 * SECOND)
    h.publish(Nats_TTL="never")  # 1
    h.clock.now += SECOND
    h.publish()  # 2: max_age at T0 + 11 s
    h.clock.now += SECOND
    h.publish(Nats_TTL="3")  # 3: TTL at T0 + 5 s
    h.publish(Nats_TTL="60")  # 4: TTL beyond max_age: max_age wins, at T0 + 12 s
    assert h.stream.expire() == 3 * SECOND
    h.clock.now = T0 + 5 * SECOND
    assert h.stream.expire() == 6 * SECOND
    assert h.seqs() == [1, 2, 4]
    h.clock.now = T0 + 11 * SECOND
    assert h.stream.expire() == SECOND
    assert h.seqs() == [1, 4]
    h.clock.now = T0 + 12 * SECOND
    assert h.stream.expire() is None  # 4's TTL entry is stale now and is dropped
    h.clock.now = T0 + 1000 * SECOND
    assert h.stream.expire() is None
    assert h.seqs() == [1]


def test_max_age_walk_does_not_reload_exempt_messages() -> None:
    store = CountingStore()
    h = Harness(store, max_age=10 * SECOND)
    for _ in range(50):
        h.publish(Nats_TTL="never")
    h.publish()
    assert h.stream.expire() == 10 * SECOND
    store.loads = 0
    h.clock.now += 5 * SECOND
    assert h.stream.expire() == 5 * SECOND
    assert store.loads <= 2  # starts at the first non-exempt message
    h.clock.now += 5 * SECOND
    assert h.stream.expire() is None
    assert len(h.seqs()) == 50


def test_ttls_are_rebuilt_after_a_restart() -> None:
    h = Harness(max_age=10 * SECOND)
    h.publish(Nats_TTL="never")  # 1
    h.publish(Nats_TTL="3")  # 2
    h.publish(Nats_TTL="00")  # 3: no TTL
    h.publish(Nats_TTL="5s")  # 4
    h.clock.now += SECOND
    h.stream = h.open()  # same store, fresh stream: only headers carry the TTLs
    assert h.stream.expiry.ttls.seqs() == [1, 2, 4]
    assert h.stream.expire() == 2 * SECOND
    h.clock.now = T0 + 3 * SECOND
    assert h.stream.expire() == 2 * SECOND
    h.clock.now = T0 + 5 * SECOND
    assert h.stream.expire() == 5 * SECOND
    h.clock.now = T0 + 10 * SECOND
    assert h.stream.expire() is None
    assert h.seqs() == [1]  # never survived max_age across the restart


def test_no_rebuild_scan_without_allow_msg_ttl() -> None:
    store = CountingStore()
    for _ in range(20):
        store.store("s.a", hdrs.encode([("Nats-TTL", "5")]), b"x", T0 - 3600 * SECOND)
    h = Harness(store, allow_msg_ttl=False)
    assert store.loads == 0  # older than the duplicate window: its rebuild reads none
    assert h.stream.expiry.ttls.seqs() == []


def test_limits_purge_and_delete_leave_harmless_stale_entries() -> None:
    h = Harness(max_msgs=2)
    h.publish(Nats_TTL="5")  # 1
    h.publish(Nats_TTL="10")  # 2
    h.publish()  # 3: max_msgs drops 1
    assert h.seqs() == [2, 3]
    assert h.stream.expire() == 10 * SECOND
    h.store.remove(2)
    assert h.stream.expire() is None
    h.publish(Nats_TTL="7")  # 4
    h.store.purge()
    assert h.stream.expire() is None
    assert h.stream.expiry.ttls.seqs() == []


def test_stale_entries_are_compacted() -> None:
    h = Harness()
    for i in range(200):
        h.publish(Nats_TTL=str(i + 1))
    for seq in range(2, 201):
        h.store.remove(seq)  # deleted one by one; the earliest deadline (seq 1) is live
    assert h.stream.expire() == SECOND
    assert h.stream.expiry.ttls.seqs() == [1]


def test_rollup_with_ttl() -> None:
    h = Harness(allow_rollup_hdrs=True)
    h.publish(Nats_TTL="5")
    assert h.publish(Nats_TTL="2", Nats_Rollup="sub") == {"stream": "S", "seq": 2}
    assert h.stream.expire() == 2 * SECOND
    h.clock.now += 2 * SECOND
    assert h.stream.expire() is None
    assert h.seqs() == []


# ------------------------------------------------------------------ errors and their order


def err(ack: dict[str, Any]) -> int | None:
    error = ack.get("error")
    return None if error is None else int(error["err_code"])


def test_disabled_and_invalid() -> None:
    h = Harness(allow_msg_ttl=False)
    assert h.publish(Nats_TTL="5")["error"] == {
        "code": 400,
        "err_code": 10166,
        "description": "per-message TTL is disabled",
    }
    assert err(h.publish(Nats_TTL="never")) == 10166
    assert err(h.publish(Nats_TTL="abc")) == 10165  # invalid beats disabled
    assert err(h.publish(Nats_TTL="0")) == 10165
    assert h.publish(Nats_TTL="00") == {"stream": "S", "seq": 1}
    assert h.publish(Nats_TTL="") == {"stream": "S", "seq": 2}
    h2 = Harness()
    assert h2.publish(Nats_TTL="500ms")["error"] == {
        "code": 400,
        "err_code": 10165,
        "description": "invalid per-message TTL",
    }


def test_ttl_checks_sit_where_nats_server_puts_them() -> None:
    h = Harness(
        max_msgs=1,
        discard="new",
        max_msg_size=100,
        allow_rollup_hdrs=True,
        duplicate_window=60 * SECOND,
    )
    h.publish(Nats_Msg_Id="m1")
    assert err(h.publish(Nats_TTL="abc", Nats_Expected_Stream="OTHER")) == 10060
    assert err(h.publish(Nats_TTL="abc", Nats_Expected_Last_Sequence="7")) == 10071
    assert h.publish(Nats_TTL="abc", Nats_Msg_Id="m1").get("duplicate") is True
    assert err(h.publish(Nats_TTL="abc", Nats_Rollup="bogus")) == 10111
    assert err(h.publish(data=b"x" * 200, Nats_TTL="abc")) == 10054
    assert err(h.publish(Nats_TTL="abc")) == 10165  # before the discard-new limit
    assert err(h.publish(Nats_TTL="5")) == 10077
    d = Harness(allow_msg_ttl=False, max_msg_size=100)
    assert err(d.publish(data=b"x" * 200, Nats_TTL="5")) == 10054
    assert err(d.publish(Nats_TTL="5", X_Big="y" * 70000)) == 10054
    d2 = Harness(allow_msg_ttl=False)
    assert err(d2.publish(Nats_TTL="5", X_Big="y" * 70000)) == 10097
    assert err(d2.publish(Nats_TTL="5", Nats_Expected_Stream="OTHER")) == 10060
    assert err(d2.publish(Nats_TTL="5", Nats_Expected_Last_Sequence="7")) == 10166
    assert err(d2.publish(Nats_TTL="abc", Nats_Expected_Last_Sequence="7")) == 10071


# ------------------------------------------------------------------ the wakeup hint


def wake(h: Harness) -> int | None:
    return h.stream.expiry.next_wakeup_ns  # a call, so mypy does not narrow across publishes


def test_next_wakeup_is_lowered_by_publishes_and_set_by_expire() -> None:
    """The engine keeps its one expiry timer at or before `next_wakeup_ns`."""
    h = Harness(max_age=60 * SECOND)
    assert wake(h) is None
    h.publish(Nats_TTL="5")
    assert wake(h) == T0 + 5 * SECOND
    h.publish(Nats_TTL="9")  # later than what is already known: unchanged
    assert wake(h) == T0 + 5 * SECOND
    h.publish(Nats_TTL="2")  # sooner: lowered
    assert wake(h) == T0 + 2 * SECOND
    h.clock.now = T0 + 2 * SECOND
    assert h.stream.expire() == 3 * SECOND  # seq 3 expired; seq 1 is next
    assert wake(h) == T0 + 5 * SECOND
    assert h.seqs() == [1, 2]


def test_next_wakeup_for_max_age_without_ttls() -> None:
    h = Harness(max_age=10 * SECOND)
    h.publish()
    assert wake(h) == T0 + 10 * SECOND
    h.clock.now = T0 + 10 * SECOND
    assert h.stream.expire() is None
    assert wake(h) is None
    assert h.seqs() == []
