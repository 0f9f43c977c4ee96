"""Subject filters for the message stores, on `str` subjects.

The stores keep subjects as `str` (they come back in `StoredMessage` and STREAM.INFO), while
`brook.subjects.matches` works on `bytes` for the core's hot path. Encoding every stored
subject just to test it against a filter would be wasteful, so this module matches `str`
directly with the same rules (wire reference §1.10): `*` as a whole token matches one
token, `>` as the last whole token matches one or more, and, for the store API only, the
empty filter matches everything (nats-server treats `""` and `">"` alike in store calls).

A filter is compiled once (`compile_filter`, cached) into a `SubjectFilter` that tells the
store which strategy fits: `match_all` (use the sequence order), `literal` (use the
per-subject index) or a wildcard (test subjects with `matches`).
"""

from __future__ import annotations

from functools import lru_cache

__all__ = ["SubjectFilter", "compile_filter", "is_match_all", "subject_matches"]


def is_match_all(filter_subject: str | None) -> bool:
    """True for the filters that select every subject: None, `""` and `">"`."""
    return not filter_subject or filter_subject == ">"


class SubjectFilter:
    """A compiled filter. Immutable; share it freely (compile_filter caches instances).

    Attributes:
        pattern: the filter as given (`""` for None).
        match_all: every subject matches.
        literal: the filter itself when it has no wildcard token (and is not match-all),
            else None; a literal filter matches exactly one subject.
    """

    __slots__ = ("_fwc", "_tokens", "literal", "match_all", "pattern")

    def __init__(self, filter_subject: str | None) -> None:
        self.pattern = filter_subject or ""
        self.match_all = is_match_all(filter_subject)
        tokens = self.pattern.split(".")
        # A trailing ">" is kept out of the token tuple: it only demands more tokens.
        self._fwc = tokens[-1] == ">"
        self._tokens = tuple(tokens[:-1] if self._fwc else tokens)
        wild = self._fwc or "*" in self._tokens
        self.literal: str | None = None if (self.match_all or wild) else self.pattern

    def matches(self, subject: str) -> bool:
        """Does the literal `subject` match this filter?"""
        if self.match_all:
            return True
        if self.literal is not None:
            return subject == self.literal
        tokens = self._tokens
        s_tokens = subject.split(".")
        if self._fwc:
            if len(s_tokens) <= len(tokens):
                return False
        elif len(s_tokens) != len(tokens):
            return False
        return all(p == "*" or p == s for p, s in zip(tokens, s_tokens, strict=False))

    def __repr__(self) -> str:
        return f"SubjectFilter({self.pattern!r})"


@lru_cache(maxsize=1024)
def compile_filter(filter_subject: str | None) -> SubjectFilter:
    """The compiled filter for `filter_subject`; consumers repeat the same few filters, so
    instances are cached (bounded, the filters come from clients)."""
    return SubjectFilter(filter_subject)


def subject_matches(filter_subject: str | None, subject: str) -> bool:
    """One-off test: does `subject` match `filter_subject` (None/`""`/`">"` match all)?"""
    return compile_filter(filter_subject).matches(subject)
