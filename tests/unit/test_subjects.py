"""Subject rules: validity of subscription and publish subjects, matching, subset matching."""

from __future__ import annotations

import pytest

from brook.subjects import (
    has_wildcard,
    is_valid_literal_subject,
    is_valid_subject,
    matches,
    subset_match,
)

# (subject, valid as a subscription subject, valid as a publish subject)
VALIDITY = [
    (b"foo", True, True),
    (b"foo.bar", True, True),
    (b"foo.bar.baz", True, True),
    (b"$JS.API.INFO", True, True),
    (b"_INBOX.abc123", True, True),
    (b"foo-bar_baz", True, True),
    (b"f\xc3\xa9e", True, True),  # UTF-8 is fine
    (b"foo>", True, True),  # `>` inside a token is an ordinary character
    (b"foo*", True, True),
    (b">foo", True, True),
    (b"*foo.bar", True, True),
    (b"foo.b*r", True, True),
    (b"*", True, False),
    (b">", True, False),
    (b"foo.*", True, False),
    (b"*.bar", True, False),
    (b"foo.>", True, False),
    (b"*.>", True, False),
    (b"foo.*.bar", True, False),
    (b"*.*.*", True, False),
    (b"", False, False),
    (b".", False, False),
    (b"..", False, False),
    (b"foo..bar", False, False),
    (b".foo", False, False),
    (b"foo.", False, False),
    (b"foo.>.bar", False, False),
    (b">.foo", False, False),
    (b">.>", False, False),
    (b"foo.>.", False, False),
    (b"foo bar", False, False),
    (b" foo", False, False),
    (b"foo ", False, False),
    (b"foo\tbar", False, False),
    (b"foo\rbar", False, False),
    (b"foo\nbar", False, False),
    (b"foo.\r\n", False, False),
    (b"foo\x0cbar", False, False),
    (b"foo. .bar", False, False),
    (b"foo.*. ", False, False),
]


@pytest.mark.parametrize(("subject", "valid", "literal"), VALIDITY)
def test_validity(subject: bytes, valid: bool, literal: bool) -> None:
    assert is_valid_subject(subject) is valid
    assert is_valid_literal_subject(subject) is literal


@pytest.mark.parametrize(("subject", "valid", "literal"), VALIDITY)
def test_has_wildcard(subject: bytes, valid: bool, literal: bool) -> None:
    if valid:
        assert has_wildcard(subject) is not literal


# (pattern, subject, matches)
MATCHES = [
    (b"foo", b"foo", True),
    (b"foo", b"bar", False),
    (b"foo", b"foo.bar", False),
    (b"foo.bar", b"foo", False),
    (b"foo.bar", b"foo.bar", True),
    (b"foo.bar", b"foo.baz", False),
    (b"*", b"foo", True),
    (b"*", b"foo.bar", False),
    (b"foo.*", b"foo.bar", True),
    (b"foo.*", b"foo", False),
    (b"foo.*", b"foo.bar.baz", False),
    (b"*.bar", b"foo.bar", True),
    (b"*.bar", b"foo.baz", False),
    (b"*.*", b"a.b", True),
    (b"foo.*.baz", b"foo.bar.baz", True),
    (b"foo.*.baz", b"foo.bar.qux", False),
    (b">", b"foo", True),
    (b">", b"foo.bar.baz", True),
    (b"foo.>", b"foo", False),
    (b"foo.>", b"foo.bar", True),
    (b"foo.>", b"foo.bar.baz", True),
    (b"foo.>", b"bar.baz", False),
    (b"*.>", b"foo", False),
    (b"*.>", b"foo.bar", True),
    (b"foo.*.>", b"foo.bar", False),
    (b"foo.*.>", b"foo.bar.baz", True),
    (b"foo>", b"foo.bar", False),  # not a wildcard token
    (b"foo>", b"foo>", True),
    (b"foo*", b"foox", False),
    # Wildcard tokens in the published subject are matched by wildcard patterns only.
    (b"foo.*", b"foo.*", True),
    (b"foo.>", b"foo.>", True),
    (b"foo.bar", b"foo.*", False),
    (b"foo.bar", b"foo.>", False),
    (b"foo.*", b"foo.>", True),
]


@pytest.mark.parametrize(("pattern", "subject", "expected"), MATCHES)
def test_matches(pattern: bytes, subject: bytes, expected: bool) -> None:
    assert matches(pattern, subject) is expected


# (pattern, other, every subject matched by `other` is matched by `pattern`)
SUBSETS = [
    (b"foo", b"foo", True),
    (b"foo", b"bar", False),
    (b"foo.*", b"foo.bar", True),
    (b"foo.*", b"foo.*", True),
    (b"foo.bar", b"foo.*", False),
    (b"foo.*", b"foo.>", False),
    (b"foo.>", b"foo.*", True),
    (b"foo.>", b"foo.>", True),
    (b"foo.>", b"foo.bar.baz", True),
    (b"foo.>", b"foo.*.>", True),
    (b"foo.>", b"foo", False),
    (b"foo.>", b">", False),
    (b">", b">", True),
    (b">", b"foo", True),
    (b">", b"*.*.>", True),
    (b"*", b"foo", True),
    (b"*", b"*", True),
    (b"*", b">", False),
    (b"*", b"foo.bar", False),
    (b"*.*", b"foo.*", True),
    (b"*.*", b"*.>", False),
    (b"*.bar", b"foo.*", False),
    (b"foo.*.baz", b"foo.bar.baz", True),
    (b"foo.bar.baz", b"foo.bar", False),
    (b"foo.bar", b"foo.bar.baz", False),
]


@pytest.mark.parametrize(("pattern", "other", "expected"), SUBSETS)
def test_subset_match(pattern: bytes, other: bytes, expected: bool) -> None:
    assert subset_match(pattern, other) is expected


@pytest.mark.parametrize(("pattern", "other", "expected"), SUBSETS)
def test_subset_match_agrees_with_matches_on_literal_others(
    pattern: bytes, other: bytes, expected: bool
) -> None:
    if not has_wildcard(other):
        assert matches(pattern, other) is expected
