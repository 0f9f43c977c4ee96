"""counters.py on a memory store: how a subject's last stored message is read as its
total when it is not one Brook wrote itself (a restored snapshot may hold anything, and
a source may store a counter's messages as their origin wrote them), read as nats-server's
`json.Unmarshal` into its CounterValue and `big.Int.SetString` read it."""

from __future__ import annotations

import pytest

from brook.jetstream import counters
from brook.jetstream.errors import ApiError
from brook.jetstream.store.memory import MemoryStore

INCR_1 = b"NATS/1.0\r\nNats-Incr: 1\r\n\r\n"


def _next(stored: bytes | None) -> bytes:
    store = MemoryStore()
    if stored is not None:
        store.store("c", None, stored, 1)
    return counters.count(store, "c", INCR_1, b"", -1)[1]


@pytest.mark.parametrize(
    ("stored", "total"),
    [
        (None, b'{"val":"1"}'),  # a new counter
        (b'{"val":"41"}', b'{"val":"42"}'),
        (b'{"val":"-1"}', b'{"val":"0"}'),
        (b"null", b'{"val":"1"}'),  # Go: no error, no value
        (b"{}", b'{"val":"1"}'),
        (b'{"val":null}', b'{"val":"1"}'),
        (b'{"VAL":"9"}', b'{"val":"10"}'),  # Go matches field names case-insensitively
        (b'{"val":"1","Val":"7","vAl":null}', b'{"val":"8"}'),  # the last one set wins
        (b'{"val":"12abc"}', b'{"val":"13"}'),  # SetString stops at the first non-digit
        (b'{"val":""}', b'{"val":"1"}'),
    ],
)
def test_a_stored_total_is_read_as_nats_server_reads_it(stored: bytes | None, total: bytes) -> None:
    assert _next(stored) == total


@pytest.mark.parametrize("stored", [b"", b"x", b"[1]", b"5", b'{"val":5}', b'{"val":["1"]}'])
def test_anything_else_is_a_broken_counter(stored: bytes) -> None:
    with pytest.raises(ApiError) as err:
        _next(stored)
    assert err.value.to_json() == {
        "code": 400,
        "err_code": 10172,
        "description": "message counter is broken",
    }


def test_the_total_is_exact_at_any_length() -> None:
    big = "9" * 10_000
    store = MemoryStore()
    store.store("c", None, b'{"val":"%s"}' % big.encode(), 1)
    header = b"NATS/1.0\r\nNats-Incr: 1\r\n\r\n"
    body = counters.count(store, "c", header, b"", -1)[1]
    assert counters.total_of(body) == b"1" + b"0" * 10_000


@pytest.mark.parametrize(
    ("block", "out"),
    [
        (b"NATS/1.0\r\nA: 1\r\nB: 2\r\n\r\n", b"NATS/1.0\r\nA: 1\r\nB: new\r\n\r\n"),
        (b"NATS/1.0\r\nB:2\r\nB: 3\r\n\r\n", b"NATS/1.0\r\nB:new\r\nB: 3\r\n\r\n"),  # the first
        (b"NATS/1.0\r\nXB: 2\r\n\r\n", b"NATS/1.0\r\nXB: 2\r\nB: new\r\n\r\n"),  # not a suffix
        (b"NATS/1.0\r\n\r\n", b"NATS/1.0\r\nB: new\r\n\r\n"),
    ],
)
def test_set_header_replaces_in_place_or_adds_last_as_nats_server(block: bytes, out: bytes) -> None:
    assert counters.set_header(block, b"B", b"new") == out


SOURCED = b"NATS/1.0\r\nNats-Incr: +1\r\nNats-Stream-Source: O 7 > > o.hits abcdefgh\r\n\r\n"


def test_a_sourced_total_becomes_the_difference_from_the_last_one_taken() -> None:
    store = MemoryStore()
    before = b'NATS/1.0\r\nNats-Incr: 4\r\nNats-Counter-Sources: {"O":{"o.hits":"6"}}\r\n\r\n'
    store.store("c", before, b'{"val":"10"}', 1)
    header, body = counters.count(store, "c", SOURCED, b'{"val":"9"}', -1)
    assert body == b'{"val":"13"}'
    assert header == (
        b"NATS/1.0\r\nNats-Incr: 3\r\nNats-Stream-Source: O 7 > > o.hits abcdefgh\r\n"
        b'Nats-Counter-Sources: {"O":{"o.hits":"9"}}\r\n\r\n'
    )


@pytest.mark.parametrize("recorded", [b"x", b"[]", b'{"O":["1"]}', b'{"O":{"o":1}}'])
def test_unreadable_counter_sources_are_a_broken_counter(recorded: bytes) -> None:
    store = MemoryStore()
    store.store("c", b"NATS/1.0\r\nNats-Counter-Sources: %b\r\n\r\n" % recorded, b'{"val":"1"}', 1)
    with pytest.raises(ApiError) as err:
        counters.count(store, "c", INCR_1, b"", -1)
    assert err.value.err_code == 10172
