"""The admission of messages by the store limits (jetstream/quota.py): decisions on the
real figure, and the real figure measured only when the running total says no."""

from __future__ import annotations

import pytest

from brook.jetstream.errors import ApiError
from brook.jetstream.quota import Ledger, Quota


class Scope:
    """The bytes a scope holds, and how often they were measured."""

    def __init__(self) -> None:
        self.held = 0
        self.measures = 0

    def measure(self) -> int:
        self.measures += 1
        return self.held


def admit(quota: Quota, scope: Scope, nbytes: int) -> str:
    try:
        quota.admit(nbytes)
    except ApiError as err:
        return err.name
    scope.held += nbytes
    return "ok"


def test_far_from_the_limit_admission_measures_once() -> None:
    scope = Scope()
    quota = Quota(None, Ledger(1_000_000, scope.measure))
    assert all(admit(quota, scope, 100) == "ok" for _ in range(5000))
    assert scope.measures == 1  # the first admission: the total is unknown at start


def test_account_limit_counts_the_message_itself() -> None:
    scope = Scope()
    quota = Quota(None, Ledger(1000, scope.measure))
    assert [admit(quota, scope, 300) for _ in range(4)] == ["ok"] * 3 + [
        "ACCOUNT_RESOURCES_EXCEEDED"
    ]
    assert admit(quota, scope, 100) == "ok"  # exactly 1000
    assert admit(quota, scope, 1) == "ACCOUNT_RESOURCES_EXCEEDED"


def test_server_limit_refuses_once_past_it() -> None:
    scope = Scope()
    quota = Quota(Ledger(1000, scope.measure), None)
    assert [admit(quota, scope, 300) for _ in range(5)] == ["ok"] * 4 + ["INSUFFICIENT_RESOURCES"]


@pytest.mark.parametrize("freed", [300, 1200])
def test_removals_are_seen_by_the_next_measure(freed: int) -> None:
    scope = Scope()
    quota = Quota(Ledger(1000, scope.measure), Ledger(1200, scope.measure))
    while admit(quota, scope, 300) == "ok":
        pass
    scope.held -= freed  # a purge, discard-old limits, acks: not reported to the ledger
    assert admit(quota, scope, 300) == "ok"


def test_a_refusal_by_the_account_takes_nothing_from_the_server() -> None:
    server, account = Scope(), Scope()
    quota = Quota(Ledger(10_000, server.measure), Ledger(500, account.measure))
    assert admit(quota, account, 400) == "ok"
    server.held += 400
    for _ in range(100):
        assert admit(quota, account, 400) == "ACCOUNT_RESOURCES_EXCEEDED"
    assert quota.server is not None
    assert quota.server.tracked == 400
