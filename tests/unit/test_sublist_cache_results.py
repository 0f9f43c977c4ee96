"""`Subscription(cache_results=False)`: results that include such a subscription are not
cached (ack subjects are each published once), everything else is, and `match` returns
the same either way."""

from __future__ import annotations

from brook.routing.sublist import Sublist, Subscription
from tests.support.subscribers import NeverDelivered

CLIENT = NeverDelivered()


def test_one_off_subjects_stay_out_of_the_cache() -> None:
    sl = Sublist(cache_entries_max=4)
    acks = Subscription(CLIENT, b"$JS.ACK.S.C.>", b"1", cache_results=False)
    hot = Subscription(CLIENT, b"_INBOX.hot", b"2")
    sl.insert(acks)
    sl.insert(hot)
    for _ in range(2):  # cached on its second miss
        assert sl.match(b"_INBOX.hot").plain == (hot,)
    for i in range(100):
        assert sl.match(b"$JS.ACK.S.C.1.%d.%d.1700.0" % (i, i)).plain == (acks,)
    assert sl.statistics()["num_cache"] == 1  # only the hot subject, never evicted
    misses = sl.cache_misses
    assert sl.match(b"_INBOX.hot").plain == (hot,)
    assert sl.cache_misses == misses


def test_a_result_with_any_uncached_member_is_not_cached() -> None:
    sl = Sublist()
    watcher = Subscription(CLIENT, b"$JS.ACK.>", b"1")
    acks = Subscription(CLIENT, b"$JS.ACK.S.C.>", b"2", b"q", cache_results=False)
    sl.insert(watcher)
    sl.insert(acks)
    result = sl.match(b"$JS.ACK.S.C.1.1.1.1.0")
    assert result.plain == (watcher,)
    assert result.queues == ((acks,),)
    assert sl.match(b"$JS.ACK.S.C.1.1.1.1.0").queues == ((acks,),)
    assert sl.statistics()["num_cache"] == 0  # not even on its second miss
    for _ in range(2):  # the watcher alone: cached on its second miss
        assert sl.match(b"$JS.ACK.other.x").plain == (watcher,)
    assert sl.statistics()["num_cache"] == 1
    sl.remove(acks)  # results stay right after removal
    assert not sl.match(b"$JS.ACK.S.C.1.1.1.1.0").queues
