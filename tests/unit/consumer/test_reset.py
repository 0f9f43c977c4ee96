"""CONSUMER.RESET: the state machine's reset, and which sequence a request means."""

from __future__ import annotations

import pytest

from brook.jetstream.consumer import AckKind
from brook.jetstream.errors import ApiError
from brook.jetstream.models.consumer_config import ConsumerConfig
from brook.jetstream.models.consumer_rules import parse_reset_request, reset_start_seq

from .fakes import S, delivers, make

T0 = 1_000 * S


def test_reset_forgets_pending_redeliveries_and_dead_letters() -> None:
    c, src = make(6, max_deliver=1)
    c.pull_request("r", T0, batch=3)
    c.ack(1, 1, AckKind.ACK, T0)
    c.tick(T0 + 31 * S)  # 2 and 3 given up on (max_deliver 1)
    c.pull_request("r", T0 + 31 * S, batch=1)  # 4 pending
    assert (c.num_ack_pending, c.num_redelivered) == (1, 0)
    c.reset(2)
    c.check_invariants()
    assert c.info() == {
        "delivered": {"consumer_seq": 0, "stream_seq": 1},
        "ack_floor": {"consumer_seq": 0, "stream_seq": 1},
        "num_ack_pending": 0,
        "num_redelivered": 0,
        "num_waiting": 0,
        "num_pending": 5,
    }
    assert not c.needs(1)
    assert c.needs(2)
    out = c.pull_request("r", T0 + 32 * S, batch=2)
    assert [(d.stream_seq, d.consumer_seq, d.delivery_count) for d in delivers(out)] == [
        (2, 1, 1),
        (3, 2, 1),
    ]
    snapshot = c.snapshot()
    restored, _ = make(0, max_deliver=1)
    restored.delivery.src = src
    restored.restore(snapshot, T0)
    assert restored.info() == c.info()


def test_reset_keeps_waiting_requests_for_the_owner_to_serve() -> None:
    c, _ = make(2)
    assert len(delivers(c.pull_request("r", T0, batch=2))) == 2
    c.pull_request("w", T0, batch=5, expires_ns=10 * S)
    c.reset(1)
    assert c.num_waiting == 1
    assert [d.stream_seq for d in delivers(c.dispatch(T0 + 1))] == [1, 2]


def _config(policy: str, **fields: object) -> ConsumerConfig:
    return ConsumerConfig(durable_name="c", name="c", deliver_policy=policy, **fields)  # type: ignore[arg-type]


def test_reset_start_seq_follows_the_deliver_policy() -> None:
    def never(ts_ns: int) -> int:
        raise AssertionError("not asked")

    assert reset_start_seq(_config("last"), 0, 41, never) == 42  # the floor: any policy
    assert reset_start_seq(_config("all"), 7, 41, never) == 7
    by_seq = _config("by_start_sequence", opt_start_seq=5)
    assert reset_start_seq(by_seq, 5, 0, never) == 5
    by_time = _config("by_start_time", opt_start_time=123)
    assert reset_start_seq(by_time, 9, 0, lambda ts: 9 if ts == 123 else 0) == 9
    for config, seq, reason in (
        (by_seq, 4, "below start seq"),
        (by_time, 8, "below start time"),
        (_config("new"), 3, "not allowed"),
        (_config("last_per_subject"), 3, "not allowed"),
    ):
        with pytest.raises(ApiError) as err:
            reset_start_seq(config, seq, 0, lambda ts: 9)
        assert (err.value.err_code, err.value.description) == (10204, f"invalid reset: {reason}")


@pytest.mark.parametrize(
    ("body", "seq"),
    [
        (b"", 0),
        (b"null", 0),
        (b"{}", 0),
        (b'{"seq": 0}', 0),
        (b'{"seq": 9}', 9),
        (b'{"Seq": 3, "x": [1]}', 3),  # names match without regard to case, as in Go
        (b'{"seq": 1, "SEQ": 2}', 2),  # the last one wins
        (b'{"seq": null}', 0),
    ],
)
def test_reset_request_bodies(body: bytes, seq: int) -> None:
    assert parse_reset_request(body) == seq


@pytest.mark.parametrize(
    "body",
    [
        b" ",
        b"{",
        b"[1]",
        b"3",
        b'"x"',
        b'{"seq": -1}',
        b'{"seq": 1.5}',
        b'{"seq": "3"}',
        b'{"seq": true}',
        b'{"seq": 18446744073709551616}',  # past uint64
    ],
)
def test_reset_request_refused(body: bytes) -> None:
    with pytest.raises(ApiError) as err:
        parse_reset_request(body)
    assert err.value.err_code == 10025
