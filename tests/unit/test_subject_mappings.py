"""Subject mappings compiled and selected (routing/mappings.py), without a server.

The wire behaviour is compared with nats-server in
tests/conformance/test_mappings_conformance.py; here the weighted choice is driven by
chosen draws, so every bound is checked exactly.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from brook.config.conf import load_conf_file, parse_conf, settings_from_conf
from brook.config.settings import ConfigError, MapDestination, SubjectMapping
from brook.routing.mappings import NOWHERE, SubjectMappings


class Draws(random.Random):
    """A generator whose `randrange(100)` returns the draws given, in turn."""

    def __init__(self, *draws: int) -> None:
        super().__init__(0)
        self.draws = list(draws)

    def randrange(self, *args: object, **kwargs: object) -> int:
        return self.draws.pop(0)


def compiled(text: str, rng: random.Random | None = None) -> SubjectMappings:
    mappings = SubjectMappings.compile(settings_from_conf(parse_conf(text)).mappings, rng)
    assert mappings is not None
    return mappings


def test_no_mappings_compile_to_none() -> None:
    assert SubjectMappings.compile([]) is None


def test_weights_are_bounds_in_ascending_order() -> None:
    """nats-server sorts the destinations by weight and adds them up: with 70/30, draws
    0-29 go to the 30, 30-99 to the 70."""
    draws = Draws(0, 29, 30, 99)
    m = compiled(
        "mappings { w: [ {destination: big, weight: 70}, {destination: small, weight: 30} ] }",
        draws,
    )
    assert [m.select(b"w") for _ in range(4)] == [b"small", b"small", b"big", b"big"]


def test_weights_short_of_100_leave_the_rest_to_the_source() -> None:
    m = compiled('mappings { "a.*": [ {destination: "b.$1", weight: 20} ] }', Draws(19, 20, 99))
    assert [m.select(b"a.k") for _ in range(3)] == [b"b.k", b"a.k", b"a.k"]


def test_a_listed_source_takes_its_share_and_the_rest_goes_nowhere() -> None:
    m = compiled(
        "mappings { w: [ {destination: x, weight: 20}, {destination: w, weight: 30} ] }",
        Draws(19, 20, 49, 50),
    )
    assert [m.select(b"w") for _ in range(4)] == [b"x", b"w", b"w", NOWHERE]


def test_a_single_destination_takes_every_message_without_a_draw() -> None:
    m = compiled('mappings { foo: bar, "a.*.>": "b.{{wildcard(1)}}.>" }', Draws())
    assert m.select(b"foo") == b"bar"
    assert m.select(b"a.k.x.y") == b"b.k.x.y"
    assert m.select(b"a.k") is None  # `>` needs a token
    assert m.select(b"fo") is None


def test_cluster_scoped_destinations_are_never_chosen() -> None:
    """A single server has no cluster name; nats-server falls back to the unscoped
    destinations, here only the source itself."""
    m = compiled("mappings { c: [ {destination: cx, weight: 100, cluster: c1} ] }", Draws())
    assert m.select(b"c") == b"c"


def test_a_literal_source_is_tried_before_the_wildcard_ones_and_the_first_written_wins() -> None:
    m = compiled('mappings { "a.*": "first.$1", "*.k": "second.$1", "a.k": "literal" }')
    assert m.select(b"a.k") == b"literal"
    assert m.select(b"a.j") == b"first.j"
    assert m.select(b"z.k") == b"second.z"


def test_a_later_mapping_of_the_same_source_replaces_the_earlier() -> None:
    entries = [
        SubjectMapping("s", [MapDestination("one")]),
        SubjectMapping("s", [MapDestination("two")]),
    ]
    mappings = SubjectMappings.compile(entries)
    assert mappings is not None
    assert mappings.select(b"s") == b"two"


def test_errors_name_the_entry_and_its_line() -> None:
    settings = settings_from_conf(
        parse_conf('port: 4222\nmappings {\n  "a.*": "b.{{foo(1)}}"\n}\n')
    )
    with pytest.raises(ConfigError) as refused:
        SubjectMappings.compile(settings.mappings)
    assert str(refused.value) == (
        'mappings."a.*" (line 3): Error adding mapping for "a.*" to "b.{{foo(1)}}" : '
        "invalid mapping destination: unknown function in {{foo(1)}}"
    )


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ('mappings { w: "" }', 'mappings."w" (line 1): a mapping needs a destination subject'),
        (
            "mappings { w: [ {weight: 50} ] }",
            'mappings."w" (line 1)[0]: a mapping needs a destination subject',
        ),
        ("mappings { a: b }\nmaps { c: d }", "mappings are given twice"),
        ("mappings: 5", "mappings: expected a block"),
        ("mappings { w: [ {destination: 5, weight: 5} ] }", "expected a string, got integer 5"),
    ],
)
def test_what_nats_server_would_take_and_fail_on_is_refused(text: str, words: str) -> None:
    """nats-server starts with an empty destination and panics on the first message
    mapped there; it reads `mappings` and `maps` both, in random order; it reports wrong
    types as Go's interface conversions."""
    with pytest.raises(ConfigError) as refused:
        settings_from_conf(parse_conf(text))
    assert words in str(refused.value)


def test_the_sample_config_mappings_compile() -> None:
    sample = Path(__file__).resolve().parents[2] / "docs" / "examples" / "brook.conf"
    mappings = SubjectMappings.compile(load_conf_file(str(sample)).mappings)
    assert mappings is not None
    assert mappings.select(b"orders.legacy.42") == b"orders.42"
    assert {mappings.select(b"canary") for _ in range(200)} == {b"svc.v1", b"svc.v2"}


def test_a_random_destination_is_drawn_again_for_each_message() -> None:
    """Deterministic results are remembered per subject; `{{random(n)}}` ones are not."""
    m = compiled('mappings { r: "r.{{random(1000)}}", s: "t" }')
    assert len({m.select(b"r") for _ in range(50)}) > 1
    assert m.select(b"s") == m.select(b"s") == b"t"
    assert m.select(b"u") is None
