"""docs/unsupported.md stays true: every key its checked table lists is refused at load,
and every clustering flag it names is refused with its words.

A key that Brook starts to serve fails this test until the page drops it.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from brook.config.conf import parse_conf, settings_from_conf
from brook.config.errors import ConfigError
from brook.config.flags import ArgumentError, parse_serve_args

PAGE = Path(__file__).resolve().parents[2] / "docs" / "unsupported.md"


def checked_keys() -> list[str]:
    text = PAGE.read_text()
    table = text[text.index("## Configuration keys refused, checked") :]
    return re.findall(r"^\| `([a-z_.A-Z]+)` \|$", table, re.MULTILINE)


def nested(path: str) -> str:
    """`a.b.c` as `a { b { c: 1 } }`."""
    *blocks, key = path.split(".")
    text = f"{key}: 1"
    for block in reversed(blocks):
        text = f"{block} {{ {text} }}"
    return text


def test_the_page_lists_keys() -> None:
    keys = checked_keys()
    assert len(keys) > 50
    assert len(set(keys)) == len(keys)


@pytest.mark.parametrize("path", checked_keys())
def test_each_listed_key_is_refused_at_load(path: str) -> None:
    with pytest.raises(ConfigError, match=r"unknown configuration key|not supported by Brook"):
        settings_from_conf(parse_conf(nested(path)))


@pytest.mark.parametrize(
    "flag",
    ["--cluster", "--cluster_name", "--cluster_listen", "--cluster_advertise", "--routes",
     "--no_advertise", "--connect_retries"],
)  # fmt: skip
def test_clustering_flags_are_refused(flag: str) -> None:
    assert f"`{flag}`" in PAGE.read_text()
    with pytest.raises(ArgumentError, match="clustering is not supported by Brook"):
        parse_serve_args([flag, "x"])
