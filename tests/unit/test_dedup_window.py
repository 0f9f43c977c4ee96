"""The duplicate window on a manual clock (dedup.py): an id is a duplicate exactly while
its message is inside the window, the expired ones are forgotten from the front as new
ids are remembered, and the number of ids is bounded however fast they come."""

from __future__ import annotations

from brook.jetstream.dedup import DedupWindow

WINDOW = 1_000


def test_an_id_is_a_duplicate_only_inside_the_window() -> None:
    now = [0]
    window = DedupWindow(lambda: WINDOW, lambda: now[0])
    window.remember("a", 1, 0)
    now[0] = WINDOW
    assert window.lookup("a") == 1  # at the window's edge: still inside
    now[0] = WINDOW + 1
    assert window.lookup("a") is None
    assert len(window) == 0  # the expired entry found is forgotten
    window.remember("a", 2, now[0])  # the same id, stored again
    assert window.lookup("a") == 2


def test_expired_ids_are_forgotten_as_new_ones_are_remembered() -> None:
    now = [0]
    window = DedupWindow(lambda: WINDOW, lambda: now[0])
    for i in range(10):
        window.remember(f"id-{i}", i + 1, i * 100)
    assert len(window) == 10
    now[0] = 1_450
    window.remember("late", 11, now[0])  # ids older than 450 leave: 0..400
    assert len(window) == 6
    assert [window.lookup(f"id-{i}") for i in (4, 5, 9)] == [None, 6, 10]


def test_a_window_changed_by_an_update_applies_at_once() -> None:
    now, size = [0], [WINDOW]
    window = DedupWindow(lambda: size[0], lambda: now[0])
    window.remember("a", 1, 0)
    now[0] = 500
    size[0] = 400
    assert window.lookup("a") is None
    size[0] = 0
    window.remember("b", 2, now[0])  # no window: nothing remembered
    assert window.lookup("b") is None


def test_the_number_of_ids_is_bounded() -> None:
    window = DedupWindow(lambda: WINDOW, lambda: 0, max_ids=3)
    for i in range(5):
        window.remember(f"id-{i}", i + 1, 0)
    assert len(window) == 3
    assert [window.lookup(f"id-{i}") for i in range(5)] == [None, None, 3, 4, 5]
