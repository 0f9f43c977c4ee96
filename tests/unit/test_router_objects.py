"""`Router.deliver_object`: messages handed in their in-process form to the one in-process
subscriber on a subject that takes them (a link taking its origin consumer's runs), and
to nobody when anyone else listens there too (the publisher then sends bytes)."""

from __future__ import annotations

from brook.routing.internal import InternalClient
from brook.routing.router import Router


def _bytes(subject: bytes, reply: bytes | None, header: bytes | None, data: bytes) -> None:
    raise AssertionError("an object is no message")


def test_the_only_subscriber_taking_objects_gets_them() -> None:
    router = Router()
    link = InternalClient(router, "link")
    got: list[object] = []

    def take(obj: object) -> int:
        got.append(obj)
        return 3

    sub = link.subscribe(b"$JS.M.x", _bytes, object_handler=take)
    run = object()
    assert router.deliver_object(b"$JS.M.x", run)
    assert got == [run]
    assert sub.delivered == 3
    assert not router.deliver_object(b"$JS.M.y", run)  # nobody there
    plain = link.subscribe(b"$JS.S.x", _bytes)  # takes bytes only
    assert not router.deliver_object(b"$JS.S.x", run)
    assert plain.delivered == 0
    link.unsubscribe(sub)
    assert not router.deliver_object(b"$JS.M.x", run)
    assert got == [run]


def test_nothing_goes_as_an_object_while_another_listens() -> None:
    router = Router()
    link = InternalClient(router, "link")
    watcher = InternalClient(router, "watcher")
    got: list[object] = []

    def take(obj: object) -> int:
        got.append(obj)
        return 1

    link.subscribe(b"$JS.M.x", _bytes, object_handler=take)
    for subject, queue in ((b"$JS.M.>", None), (b"$JS.M.x", b"q")):
        other = watcher.subscribe(subject, _bytes, queue)
        assert not router.deliver_object(b"$JS.M.x", object())
        watcher.unsubscribe(other)
    quota = link.subscribe(b"$JS.M.z", _bytes, object_handler=take)
    quota.max_msgs = 5  # an `UNSUB <sid> <max>` quota counts messages: bytes
    assert not router.deliver_object(b"$JS.M.z", object())
    assert got == []
    assert router.deliver_object(b"$JS.M.x", object())
    assert len(got) == 1
