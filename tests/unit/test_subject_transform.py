"""routing/transform.py on its own: what nats-server's subject_transform.go does.

The stored subjects of every mapping function are compared with nats-server's in
tests/conformance/test_transform_conformance.py; here are the parts a stream does not
show: the errors of `compile` (strict import mappings included), the FNV-1a hash, the
random buckets, `match` of subjects the source does not match or that are not literal.
"""

from __future__ import annotations

import pytest

from brook.routing.transform import SubjectTransform, TransformError, fnv1a_32, validate_mapping


def mapped(src: str, dest: str, subject: bytes) -> bytes | None:
    transform = SubjectTransform.compile(src, dest)
    assert transform is not None
    return transform.match(subject)


def error_of(src: str, dest: str, *, strict: bool = False) -> str:
    with pytest.raises(TransformError) as caught:
        SubjectTransform.compile(src, dest, strict=strict)
    return caught.value.text


def test_fnv1a_32_matches_the_reference_vectors() -> None:
    # The FNV test suite (Go's hash/fnv New32a): "", "a", "foobar".
    assert fnv1a_32(b"") == 0x811C9DC5
    assert fnv1a_32(b"a") == 0xE40C292C
    assert fnv1a_32(b"foobar") == 0xBF9CF968


def test_an_empty_destination_is_no_transform_and_an_empty_source_is_everything() -> None:
    assert SubjectTransform.compile("foo", "") is None
    assert mapped("", "x.>", b"a.b") == b"x.a.b"


def test_identity_and_unmatched_subjects() -> None:
    assert mapped(">", ">", b"any.thing") == b"any.thing"
    transform = SubjectTransform.compile("a.*", "b.$1")
    assert transform is not None
    assert transform.match(b"c.d") is None
    assert transform.apply(b"c.d") == b"c.d"  # a stream stores it unchanged
    assert transform.match(b"a.*") is None  # not a literal subject
    assert transform.match(b"a..") is None


RANGE = "invalid mapping destination: wildcard index out of range in "
ARG = "invalid mapping destination: function argument is invalid or in the wrong format in "


@pytest.mark.parametrize(
    ("src", "dest", "text"),
    [
        ("a..b", "x", "invalid subject"),
        ("a.*", "x.*", "invalid subject"),
        ("a.>", "x", "invalid subject"),
        ("a.*", "x.{{wildcard(2)}}", RANGE + "{{wildcard(2)}}: [2]"),
        ("a", "x.$1", RANGE + "$1"),
        ("a", "x.{{split(1,-)}}", RANGE + "{{split(1,-)}}"),
        ("a.*", "x.{{nope(1)}}", "invalid mapping destination: unknown function in {{nope(1)}}"),
        ("a.*", "{{partition(2147483648)}}", ARG + "{{partition(2147483648)}}"),
        ("a.*", "{{left(1,2147483648)}}", ARG + "{{left(1,2147483648)}}"),
        ("a.*", "{{left(1_0,2)}}", ARG + "{{left(1_0,2)}}"),
    ],
)
def test_compile_errors_carry_nats_server_texts(src: str, dest: str, text: str) -> None:
    assert error_of(src, dest) == text


def test_strict_mappings_allow_only_wildcards_and_need_them_all() -> None:
    assert error_of("a.*.*", "b.$1", strict=True) == (
        "invalid mapping destination: not using all of the token wildcard(s) in b.$1"
    )
    assert error_of("a.*", "b.{{partition(2,1)}}", strict=True) == (
        "invalid mapping destination: the only mapping function allowed for import "
        "transforms is {{Wildcard()}} in {{partition(2,1)}}"
    )
    transform = SubjectTransform.compile("a.*.*", "b.$2.{{wildcard(1)}}", strict=True)
    assert transform is not None
    assert transform.match(b"a.x.y") == b"b.y.x"


def test_partition_hashes_the_named_tokens_concatenated() -> None:
    assert mapped("a.*.*", "{{partition(1000,1,2)}}", b"a.x.y") == b"%d" % (fnv1a_32(b"xy") % 1000)
    assert mapped("a.*.*", "{{partition(1000)}}", b"a.x.y") == b"%d" % (fnv1a_32(b"a.x.y") % 1000)
    assert mapped("a.*", "{{partition(0,1)}}", b"a.x") == b"0"


def test_random_buckets_stay_in_range() -> None:
    transform = SubjectTransform.compile("a.*", "r.{{random(3)}}.$1")
    assert transform is not None
    seen = {transform.match(b"a.k") for _ in range(200)}
    assert seen == {b"r.0.k", b"r.1.k", b"r.2.k"}
    assert mapped("a.*", "{{random(0)}}", b"a.k") == b"0"
    assert {mapped("a.*", "{{random(-2)}}", b"a.k") for _ in range(100)} == {b"0", b"1"}


def test_functions_count_bytes_not_characters() -> None:
    assert mapped("a.*", "{{left(1,3)}}", "a.h\u00e9llo".encode()) == "h\u00e9".encode()
    assert mapped("a.*", "{{split(1,)}}", "a.h\u00e9".encode()) == "h.\u00e9".encode()


def test_validate_mapping_checks_the_destination_tokens_first() -> None:
    with pytest.raises(TransformError) as caught:
        validate_mapping("a.*", "b ar.$1")
    assert caught.value.text == "invalid mapping destination: invalid transform"
    with pytest.raises(TransformError) as caught:
        validate_mapping("a.*", "b.>.c")
    assert caught.value.text == "invalid mapping destination: invalid transform in c"
    validate_mapping("a.*", "")  # no mapping
