"""A push consumer's deliveries made a slice at a time (`dispatch(now, cap)`, ADR 0064)
add up to what one uncapped dispatch makes: the same actions in the same order, the same
state after, each slice at most `cap` deliveries, and `capped` set only while more may go.
First deliveries (`deliver_new`) and the general loop (redeliveries, `headers_only`, flow
control) are both sliced."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from brook.jetstream.consumer import AckKind, AckPolicy, ConsumerSettings, ConsumerState, Deliver

from .fakes import FakeSource, S, flat

T0 = 1_000 * S


@settings(max_examples=80, deadline=None)
@given(
    stored=st.integers(0, 700),
    max_ack_pending=st.sampled_from([-1, 5, 300, 1000]),
    headers_only=st.booleans(),
    flow_control=st.booleans(),
    acked=st.integers(0, 400),
    naks=st.lists(st.integers(0, 299), max_size=5),
    cap=st.sampled_from([1, 7, 256]),
)
def test_capped_dispatches_add_up_to_one(
    stored: int,
    max_ack_pending: int,
    headers_only: bool,
    flow_control: bool,
    acked: int,
    naks: list[int],
    cap: int,
) -> None:
    src = FakeSource()
    for _ in range(stored):
        src.add()
    cfg = ConsumerSettings(
        stream="S",
        name="c",
        ack_policy=AckPolicy.EXPLICIT,
        max_ack_pending=max_ack_pending,
        deliver_subject="deliver.here",
        headers_only=headers_only,
        flow_control=flow_control,
        fc_window_start_bytes=4000,
        fc_window_max_bytes=16000,
    )
    whole, sliced = ConsumerState(cfg, src), ConsumerState(cfg, src)
    first = [flat(c.set_push_interest(True, T0)) for c in (whole, sliced)]
    assert first[0] == first[1]
    sent = [a for a in first[0] if isinstance(a, Deliver)]
    for c in (whole, sliced):  # inputs that leave their deliveries to a later dispatch
        c.ack_explicit_run([d.stream_seq for d in sent[:acked]], T0 + S)
        for i in naks:
            if acked <= i < len(sent):
                d = sent[i]
                c.ack(d.stream_seq, d.consumer_seq, AckKind.NAK, T0 + S, dispatch=False)
    expected = flat(whole.dispatch(T0 + 2 * S))
    assert not whole.delivery.capped
    got = []
    for _ in range(stored + 2):
        out = flat(sliced.dispatch(T0 + 2 * S, cap))
        got += out
        made = sum(isinstance(a, Deliver) for a in out)
        assert made <= cap
        if not sliced.delivery.capped:
            break
        assert made == cap
    assert got == expected
    assert sliced.snapshot() == whole.snapshot()
    assert sliced.info() == whole.info()


def test_a_cap_leaves_pull_consumers_and_ack_none_alone() -> None:
    for deliver_subject, ack_policy in ((None, AckPolicy.EXPLICIT), ("d", AckPolicy.NONE)):
        src = FakeSource()
        for _ in range(20):
            src.add()
        cfg = ConsumerSettings(
            stream="S", name="c", ack_policy=ack_policy, deliver_subject=deliver_subject
        )
        c = ConsumerState(cfg, src)
        if deliver_subject is None:
            c.pull_request("r", T0, batch=20, dispatch=False)
        else:
            c.delivery.push_interest = True  # as `set_push_interest` leaves it, undispatched
        out = flat(c.dispatch(T0, 3))
        assert sum(isinstance(a, Deliver) for a in out) == 20
        assert not c.delivery.capped
