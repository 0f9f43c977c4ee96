"""The JetStream error catalogue and typed request fields."""

from __future__ import annotations

import re

import pytest

from brook.jetstream.errors import ApiError, api_error, catalogue
from brook.jetstream.fields import get_field, invalid_json
from brook.jetstream.models import parse_stream_config


def test_every_catalogue_entry_is_well_formed_and_unique() -> None:
    entries = catalogue()
    assert len({err_code for _, err_code, _ in entries.values()}) == len(entries)
    for name, (code, err_code, template) in entries.items():
        assert name.isupper(), name
        assert code in (400, 404, 412, 429, 500, 503), name  # 429: nats-server's "too many"
        assert 10000 <= err_code < 20000, name
        fields = dict.fromkeys(re.findall(r"{(\w+)}", template), "x")
        assert "{" not in api_error(name, **fields).description


def test_error_json_is_exactly_code_err_code_description() -> None:
    err = api_error("STREAM_WRONG_LAST_SEQUENCE", seq=41)
    assert err.to_json() == {
        "code": 400,
        "err_code": 10071,
        "description": "wrong last sequence: 41",
    }


def test_missing_placeholder_is_a_bug_not_a_reply() -> None:
    with pytest.raises(ValueError, match="err"):
        api_error("INVALID_JSON")


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"name": "S", "max_msgs": "ten"}, "max_msgs: expected an integer, got str"),
        ({"name": "S", "max_msgs": True}, "max_msgs: expected an integer, got bool"),
        ({"name": "S", "subjects": "s"}, "subjects: expected an array, got str"),
        ({"name": "S", "subjects": [1]}, "subjects: expected an array of strings"),
        ({"name": "S", "storage": "disk"}, "storage: 'disk' is not one of file, memory"),
        ({"name": "S", "metadata": {"a": 1}}, "metadata: expected an object of strings"),
    ],
)
def test_wrong_types_are_invalid_json_errors(body: dict[str, object], fragment: str) -> None:
    with pytest.raises(ApiError) as raised:
        parse_stream_config(body, subject_name="S")
    assert raised.value.err_code == 10025
    assert raised.value.description == f"invalid JSON: {fragment}"


def test_get_field_treats_null_as_absent() -> None:
    assert get_field({"a": None}, "a", int, 7, invalid_json) == 7
    assert get_field({}, "a", str, "d", invalid_json) == "d"
