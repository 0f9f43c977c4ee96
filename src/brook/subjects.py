"""Subject and token rules of the NATS protocol, as nats-server applies them.

A subject is `.`-separated tokens; tokens are non-empty and free of whitespace. `*` as a
whole token matches one token, `>` as the last whole token matches one or more. Subjects
are handled as `bytes` throughout the core so nothing is decoded on the hot path.
Governed by the wire reference §1.10. Imports nothing else of Brook.
"""

from __future__ import annotations

_WHITESPACE = b" \t\r\n\f\v"
_WS_TABLE = bytes(range(256))


def _has_whitespace(b: bytes) -> bool:
    # bytes.translate with a delete set and a length comparison is a C-speed membership test.
    return len(b.translate(_WS_TABLE, _WHITESPACE)) != len(b)


def is_valid_subject(subject: bytes) -> bool:
    """A subscription subject: wildcards allowed, `>` only as the last token."""
    if not subject or _has_whitespace(subject):
        return False
    tokens = subject.split(b".")
    last = len(tokens) - 1
    for i, tok in enumerate(tokens):
        if not tok:
            return False
        if tok == b">" and i != last:
            return False
    return True


def is_valid_literal_subject(subject: bytes) -> bool:
    """A publish subject: valid and without wildcard tokens."""
    if not is_valid_subject(subject):
        return False
    return all(tok not in (b"*", b">") for tok in subject.split(b"."))


def has_wildcard(subject: bytes) -> bool:
    return any(tok in (b"*", b">") for tok in subject.split(b"."))


def matches(pattern: bytes, subject: bytes) -> bool:
    """Does a literal `subject` match a subscription `pattern`? The naive reference matcher."""
    p_tokens = pattern.split(b".")
    s_tokens = subject.split(b".")
    for i, p in enumerate(p_tokens):
        if p == b">":
            return len(s_tokens) > i
        if i >= len(s_tokens):
            return False
        if p != b"*" and p != s_tokens[i]:
            return False
    return len(p_tokens) == len(s_tokens)


def subset_match(pattern: bytes, other: bytes) -> bool:
    """Is every subject matched by `other` (possibly wildcarded) also matched by `pattern`?"""
    p_tokens = pattern.split(b".")
    o_tokens = other.split(b".")
    for i, p in enumerate(p_tokens):
        if p == b">":
            return len(o_tokens) > i
        if i >= len(o_tokens):
            return False
        o = o_tokens[i]
        if o == b">":
            return False
        if p == b"*":
            continue
        if o == b"*" or p != o:
            return False
    return len(p_tokens) == len(o_tokens)
