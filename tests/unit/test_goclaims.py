"""`decoded_jwt` (brook.jwt.goclaims) where no nats-server comparison reaches: values
jwt's Go types refuse make no decoded claim, as nats-server then shows none; the rest is
compared with nats-server in test_jwt_imports_conformance."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from brook.jwt import account_claims_json


def token(claims: Any) -> str:
    body = base64.urlsafe_b64encode(json.dumps(claims).encode()).decode().rstrip("=")
    return f"header.{body}.signature"


@pytest.mark.parametrize(
    "nats",
    [
        {"limits": {"conn": "5"}},  # a string for an int64
        {"limits": {"conn": 1.5}},
        {"exports": [{"subject": "x", "type": "neither"}]},
        {"exports": [{"subject": "x", "service_latency": {"sampling": 101}}]},
        {"signing_keys": [{"kind": "other_scope", "key": "K"}]},
        {"mappings": {"a": [{"subject": "b", "weight": 300}]}},
        {"tags": "one"},
    ],
)
def test_values_go_does_not_decode_leave_no_claims(nats: dict[str, Any]) -> None:
    assert account_claims_json(token({"sub": "A", "nats": {**nats, "version": 2}})) is None


def test_go_zero_values_and_empty_structs() -> None:
    decoded = account_claims_json(
        token(
            {
                "sub": "A",
                "exp": 0,
                "nats": {
                    "limits": {"conn": 0, "wildcards": False},
                    "default_permissions": {"resp": None},
                    "authorization": {"xkey": ""},
                    "user_scope_src": "ignored",
                    "version": 2,
                    "type": "account",
                },
            }
        )
    )
    assert decoded == {
        "sub": "A",
        "nats": {
            "limits": {},
            "default_permissions": {"pub": {}, "sub": {}},
            "authorization": {},
            "type": "account",
            "version": 2,
        },
    }
    assert account_claims_json("not a token") is None
