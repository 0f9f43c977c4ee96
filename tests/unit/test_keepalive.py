"""ping_decision: the server's PING timer as a pure function, driven by a manual clock."""

from __future__ import annotations

import pytest

from brook.server.keepalive import RTT_MEASUREMENT_INTERVAL_S, PingAction, ping_decision

INTERVAL = 120.0
MAX_OUT = 2


class Conn:
    """The keep-alive state of one connection, with a clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.last_in = self.now
        self.pings_out = 0
        self.rtt_measured_at: float | None = None

    def advance(self, seconds: float) -> None:
        self.now += seconds

    def receive(self) -> None:
        self.last_in = self.now

    def pong(self) -> None:
        self.receive()
        self.pings_out = 0
        self.rtt_measured_at = self.now

    def tick(self) -> PingAction:
        action = ping_decision(
            now=self.now,
            last_in=self.last_in,
            ping_interval_s=INTERVAL,
            pings_out=self.pings_out,
            max_pings_out=MAX_OUT,
            rtt_measured_at=self.rtt_measured_at,
        )
        if action is PingAction.PING:
            self.pings_out += 1
        return action


def test_first_tick_always_pings_to_measure_rtt() -> None:
    c = Conn()
    c.advance(2.0)
    c.receive()  # the client was busy a moment ago: no matter, RTT is due
    assert c.tick() is PingAction.PING


def test_activity_within_the_interval_skips() -> None:
    c = Conn()
    c.advance(2.0)
    assert c.tick() is PingAction.PING
    c.advance(0.01)
    c.pong()
    for _ in range(10):
        c.advance(INTERVAL - 1)
        c.receive()
        c.advance(0.5)
        assert c.tick() is PingAction.SKIP
    assert c.pings_out == 0


def test_no_activity_for_an_interval_pings() -> None:
    c = Conn()
    c.rtt_measured_at = c.now
    c.advance(INTERVAL)  # exactly one interval of silence is enough
    assert c.tick() is PingAction.PING
    c.advance(INTERVAL - 0.001)
    c.receive()
    c.advance(0.001)
    assert c.tick() is PingAction.SKIP


def test_silent_client_goes_stale_when_pings_out_would_exceed_max() -> None:
    c = Conn()
    c.advance(2.0)
    assert c.tick() is PingAction.PING  # 1 out
    c.advance(INTERVAL)
    assert c.tick() is PingAction.PING  # 2 out
    c.advance(INTERVAL)
    assert c.tick() is PingAction.STALE  # a third would exceed max_pings_out=2
    assert c.pings_out == MAX_OUT


def test_a_pong_resets_the_count() -> None:
    c = Conn()
    c.advance(2.0)
    assert c.tick() is PingAction.PING
    c.advance(INTERVAL)
    assert c.tick() is PingAction.PING
    c.pong()
    c.advance(INTERVAL)
    assert c.tick() is PingAction.PING
    assert c.pings_out == 1


@pytest.mark.parametrize(("pings_out", "max_pings_out"), [(0, 1), (1, 2), (4, 5)])
def test_ping_while_below_max(pings_out: int, max_pings_out: int) -> None:
    action = ping_decision(
        now=500.0,
        last_in=0.0,
        ping_interval_s=INTERVAL,
        pings_out=pings_out,
        max_pings_out=max_pings_out,
        rtt_measured_at=400.0,
    )
    assert action is PingAction.PING


@pytest.mark.parametrize(("pings_out", "max_pings_out"), [(1, 1), (2, 2), (3, 2)])
def test_stale_at_max(pings_out: int, max_pings_out: int) -> None:
    for rtt_measured_at in (None, 400.0):
        action = ping_decision(
            now=500.0,
            last_in=0.0,
            ping_interval_s=INTERVAL,
            pings_out=pings_out,
            max_pings_out=max_pings_out,
            rtt_measured_at=rtt_measured_at,
        )
        assert action is PingAction.STALE


def test_recent_activity_skips_even_with_pings_outstanding() -> None:
    # A client whose traffic proves it alive is not declared stale by the timer.
    action = ping_decision(
        now=500.0,
        last_in=499.0,
        ping_interval_s=INTERVAL,
        pings_out=MAX_OUT,
        max_pings_out=MAX_OUT,
        rtt_measured_at=450.0,
    )
    assert action is PingAction.SKIP


def test_rtt_due_with_pings_at_max_is_stale() -> None:
    action = ping_decision(
        now=500.0,
        last_in=499.9,
        ping_interval_s=INTERVAL,
        pings_out=MAX_OUT,
        max_pings_out=MAX_OUT,
        rtt_measured_at=None,
    )
    assert action is PingAction.STALE


def test_rtt_is_measured_again_after_an_hour() -> None:
    assert RTT_MEASUREMENT_INTERVAL_S == 3600.0
    c = Conn()
    c.advance(2.0)
    assert c.tick() is PingAction.PING
    c.pong()
    measured = c.now
    # A busy client: traffic every few seconds keeps the timer quiet...
    while c.now - measured < RTT_MEASUREMENT_INTERVAL_S:
        c.advance(min(INTERVAL / 2, RTT_MEASUREMENT_INTERVAL_S - (c.now - measured)))
        c.receive()
        assert c.tick() is PingAction.SKIP, c.now - measured
    assert c.now - measured == RTT_MEASUREMENT_INTERVAL_S  # exactly an hour: not yet
    # ...until the measurement is more than an hour old.
    c.advance(0.001)
    c.receive()
    assert c.tick() is PingAction.PING
    c.pong()
    c.advance(1.0)
    c.receive()
    assert c.tick() is PingAction.SKIP
