"""Stream and service imports between two routers (routing/imports.py), without a server.

Each router stands for one account; in-process clients stand for its subscribers. What
crosses, under which subject, and how replies come back; the threshold of streamed
responses with a manual clock. Across real accounts, compared with nats-server:
tests/conformance/test_imports_conformance.py.
"""

from __future__ import annotations

import re

from brook import limits
from brook.routing.imports import SINGLETON, STREAMED, Responses, ServiceImport, StreamImport
from brook.routing.internal import InternalClient
from brook.routing.router import Router

Got = list[tuple[bytes, bytes | None, bytes | None, bytes]]


def listener(router: Router, subject: bytes) -> Got:
    got: Got = []
    client = InternalClient(router, "test")

    def take(s: bytes, reply: bytes | None, header: bytes | None, payload: bytes) -> None:
        got.append((s, reply, header, payload))

    client.subscribe(subject, take)
    return got


def test_a_stream_import_delivers_under_its_prefix_and_nothing_else_crosses() -> None:
    a, b = Router(), Router()
    StreamImport(a, b, b"x.>", b"p.x.>")
    prefixed, plain, other = listener(b, b"p.>"), listener(b, b"x.>"), listener(b, b">")
    publisher = InternalClient(a, "publisher")
    publisher.publish(b"x.1", b"m", None, b"reply")
    publisher.publish(b"y.1", b"not exported")
    assert prefixed == [(b"p.x.1", b"reply", None, b"m")]
    assert plain == []
    assert other == prefixed


def test_a_message_no_one_imports_is_not_delivered_in_the_exporting_account() -> None:
    a, b = Router(), Router()
    StreamImport(a, b, b"x", b"x")
    assert InternalClient(a, "publisher").publish(b"x", b"m") == 0
    listener(b, b"x")
    assert InternalClient(a, "publisher").publish(b"x", b"m") == 1


async def test_a_service_request_gets_an_exporter_reply_and_one_singleton_response() -> None:
    a, b = Router(), Router()
    responses = Responses(a)
    ServiceImport(b, "B", b"local.svc", a, b"svc", responses)
    requests = listener(a, b"svc")
    answers = listener(b, b"_INBOX.>")
    requester = InternalClient(b, "requester")
    assert requester.publish(b"local.svc", b"q", None, b"_INBOX.1") == 1
    ((subject, reply, header, payload),) = requests
    assert subject == b"svc"
    assert payload == b"q"
    assert header == b'NATS/1.0\r\nNats-Request-Info: {"acc":"B"}\r\n\r\n'
    assert reply is not None
    assert re.fullmatch(rb"_R_\.[0-9a-zA-Z]{6}\.[0-9a-zA-Z]{6}", reply)
    responder = InternalClient(a, "responder")
    responder.publish(reply, b"first")
    responder.publish(reply, b"second")
    assert answers == [(b"_INBOX.1", None, None, b"first")]
    assert len(responses) == 0
    responses.close()


async def test_a_request_no_responder_takes_is_not_delivered_and_leaves_no_reply() -> None:
    a, b = Router(), Router()
    responses = Responses(a)
    ServiceImport(b, "B", b"svc", a, b"svc", responses)
    assert InternalClient(b, "requester").publish(b"svc", b"q", None, b"_INBOX.1") == 0
    assert len(responses) == 0
    responses.close()


async def test_streamed_responses_flow_until_an_empty_one_or_the_threshold() -> None:
    now = [0.0]
    a, b = Router(), Router()
    responses = Responses(a, clock=lambda: now[0])
    ServiceImport(b, "B", b"svc", a, b"svc", responses, response_type=STREAMED, threshold_s=5)
    requests = listener(a, b"svc")
    answers = listener(b, b"_INBOX.>")
    requester = InternalClient(b, "requester")
    requester.publish(b"svc", b"q", None, b"_INBOX.1")
    requester.publish(b"svc", b"q", None, b"_INBOX.2")
    first, second = (reply for _, reply, _, _ in requests)
    assert first is not None
    assert second is not None
    responder = InternalClient(a, "responder")
    for chunk in (b"1", b"2", b""):
        responder.publish(first, chunk)
    responder.publish(first, b"after the end")
    assert [p for s, _, _, p in answers if s == b"_INBOX.1"] == [b"1", b"2", b""]
    now[0] = 4.0
    responder.publish(second, b"in time")  # refreshes the wait
    now[0] = 8.0
    responses.expire()
    responder.publish(second, b"still in time")
    now[0] = 13.5
    responses.expire()
    responder.publish(second, b"too late")
    assert [p for s, _, _, p in answers if s == b"_INBOX.2"] == [b"in time", b"still in time"]
    assert len(responses) == 0
    responses.close()


async def test_replies_awaiting_responses_are_bounded() -> None:
    a, b = Router(), Router()
    responses = Responses(a, max_pending=2)
    requester = InternalClient(b, "requester")
    tokens = [responses.register(requester, b"_INBOX.%d" % i, SINGLETON, 60) for i in range(3)]
    answers = listener(b, b"_INBOX.>")
    responder = InternalClient(a, "responder")
    for token in tokens:
        responder.publish(token, b"r")
    assert [s for s, _, _, _ in answers] == [b"_INBOX.1", b"_INBOX.2"]  # the oldest went
    responses.close()


def test_service_import_subjects_with_wildcards_are_renamed_token_by_token() -> None:
    a, b = Router(), Router()
    ServiceImport(b, "B", b"local.*.>", a, b"svc.*.>", Responses(a))
    requests = listener(a, b"svc.>")
    InternalClient(b, "requester").publish(b"local.one.two.three", b"q")
    assert [s for s, _, _, _ in requests] == [b"svc.one.two.three"]


def test_a_loop_of_imports_stops_after_a_bounded_number_of_crossings() -> None:
    """Linked by hand past the config's cycle check: each crossing of the loop delivers
    once, and the message stops at `IMPORT_HOPS_MAX` rather than recursing."""
    a, b = Router(), Router()
    StreamImport(a, b, b"loop", b"loop")
    StreamImport(b, a, b"loop", b"loop")
    seen_a, seen_b = listener(a, b"loop"), listener(b, b"loop")
    InternalClient(a, "publisher").publish(b"loop", b"m")
    assert len(seen_a) + len(seen_b) == limits.IMPORT_HOPS_MAX + 1
