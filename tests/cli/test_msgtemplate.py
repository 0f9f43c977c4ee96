"""The `nats` CLI's body templates and `K:V` headers as `brook pub|req|reply` expand them."""

from __future__ import annotations

import re
import time

import pytest

from brook.cli.msgtemplate import TemplateError, expand, parse_headers


def test_template_functions() -> None:
    assert expand("n={{Count}} {{ Cnt }} {{.Count}}", 7) == "n=7 7 7"
    assert expand("plain {text}", 1) == "plain {text}"
    unix = int(expand("{{Unix}}", 1))
    assert abs(unix - time.time()) < 5
    assert len(expand("{{UnixNano}}", 1)) >= 19
    assert re.fullmatch(r"\d{1,2}:\d\dAM|\d{1,2}:\d\dPM", expand("{{Time}}", 1))
    assert re.fullmatch(
        r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(Z|[+-]\d\d:\d\d)", expand("{{TimeStamp}}", 1)
    )
    first, second = expand("{{ID}}", 1), expand("{{ID}}", 1)
    assert len(first) == 22
    assert first != second
    for _ in range(20):
        assert 3 <= len(expand("{{Random 3 6}}", 1)) <= 6
    assert expand("got {{Request}} / {{.Request}}", 1, request="q") == "got q / q"


def test_unknown_actions_are_errors() -> None:
    with pytest.raises(TemplateError, match=r"\{\{if \.X\}\}"):
        expand("{{if .X}}", 1)
    with pytest.raises(TemplateError):
        expand("{{Request}}", 1)  # only replies have a request


def test_headers() -> None:
    assert parse_headers(["A:1", " B : two words ", "C:x:y", "N:{{Count}}"], 4) == {
        "A": "1", "B": "two words", "C": "x:y", "N": "4",
    }  # fmt: skip
    for bad in ("novalue", ":empty-key"):
        with pytest.raises(ValueError, match="invalid header"):
            parse_headers([bad])
