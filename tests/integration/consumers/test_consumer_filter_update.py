"""A consumer update that changes its filters applies them at once (issue 14, after nats.py's
`test_update_consumer_with_filter_subjects`): info shows the new filters, and so do the
deliveries and num_pending. tests/conformance/test_consumer_update_conformance.py
compares the same with nats-server step by step."""

from __future__ import annotations

from typing import Any

import pytest
from nats.js.api import AckPolicy, ConsumerConfig

pytestmark = pytest.mark.timeout(30)


async def _fetch_subjects(js: Any, durable: str) -> list[str]:
    psub = await js.pull_subscribe_bind(durable, stream="S")
    msgs = await psub.fetch(10, timeout=0.5)
    for msg in msgs:
        await msg.ack()
    await psub.unsubscribe()
    return [msg.subject for msg in msgs]


async def test_adding_filter_subjects_applies_at_once(js: Any) -> None:
    await js.add_consumer("S", ConsumerConfig(durable_name="u", ack_policy=AckPolicy.EXPLICIT))
    updated = await js.add_consumer(
        "S",
        ConsumerConfig(
            durable_name="u", ack_policy=AckPolicy.EXPLICIT, filter_subjects=["s.a", "s.b"]
        ),
    )
    assert updated.config.filter_subjects == ["s.a", "s.b"]
    for subject in ("s.a", "s.c", "s.b"):
        await js.publish(subject, subject.encode())
    assert (await js.consumer_info("S", "u")).num_pending == 2
    assert await _fetch_subjects(js, "u") == ["s.a", "s.b"]


async def test_changing_the_filter_counts_and_delivers_through_the_new_one(js: Any) -> None:
    for subject in ("s.x", "s.a", "s.x", "s.a", "s.a"):
        await js.publish(subject, subject.encode())
    config = ConsumerConfig(durable_name="u", ack_policy=AckPolicy.EXPLICIT, filter_subject="s.x")
    assert (await js.add_consumer("S", config)).num_pending == 2
    config.filter_subject = "s.a"
    assert (await js.add_consumer("S", config)).num_pending == 3
    assert await _fetch_subjects(js, "u") == ["s.a", "s.a", "s.a"]
    info = await js.consumer_info("S", "u")
    assert (info.config.filter_subject, info.num_pending, info.delivered.stream_seq) == (
        "s.a",
        0,
        5,
    )
