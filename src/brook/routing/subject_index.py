"""A token trie from subjects (literal or with wildcards) to values, asked two questions.

* `match(subject)`: the values of every pattern that matches a literal subject (which
  consumers of a stream a stored message concerns);
* `intersecting(pattern)`: the values of every entry that shares at least one subject
  with `pattern` (which cached subjects or watched deliver subjects a new subscription
  affects, which streams a new stream's subjects overlap).

Both cost what the answer costs, not what the index holds: a walk follows only the
branches the query's tokens allow (a `*` in the query visits every child of its node, a
`>` the whole subtree, as it must). Subjects are valid subscription subjects (a `>`
only as the last token). Entries are kept in insertion order per subject; a
value may be entered under several subjects. While no entry has a wildcard (a set of
literal subjects), `match` is one dict lookup.

The router's own subscription index is `sublist.py`, specialised for its hot path (queue
groups, a match cache); this one serves everything else that asks "which of these
subjects does that subject concern". Imports nothing of Brook.
"""

from __future__ import annotations

from typing import Generic, TypeVar

V = TypeVar("V")

_FWC = b">"
_PWC = b"*"


class _Node(Generic[V]):
    __slots__ = ("children", "values")

    def __init__(self) -> None:
        self.children: dict[bytes, _Node[V]] = {}
        self.values: list[V] = []


def is_literal(subject: bytes) -> bool:
    """No wildcard token (`*` or `>`) in `subject`. (`find`, not `in`: in CPython 3.11
    `bytes in bytes` first tries the needle as an integer and formats the TypeError, about
    1,800 instructions a test (ADR 0057); a sublist cache miss calls this three times.)"""
    if subject.find(b"*") < 0 and subject.find(b">") < 0:
        return True
    return all(t != _PWC and t != _FWC for t in subject.split(b"."))


class SubjectIndex(Generic[V]):
    def __init__(self) -> None:
        self._root: _Node[V] = _Node()
        self._exact: dict[bytes, list[V]] = {}  # subject -> its values (the leaf's list)
        self._wildcards = 0  # subjects held with a wildcard token

    def __len__(self) -> int:
        """How many distinct subjects hold values."""
        return len(self._exact)

    def __contains__(self, subject: bytes) -> bool:
        return subject in self._exact

    def get(self, subject: bytes) -> list[V]:
        """The values entered under exactly `subject` (a copy)."""
        return list(self._exact.get(subject, ()))

    def add(self, subject: bytes, value: V) -> None:
        values = self._exact.get(subject)
        if values is None:
            node = self._root
            for tok in subject.split(b"."):
                child = node.children.get(tok)
                if child is None:
                    child = node.children[tok] = _Node()
                node = child
            values = self._exact[subject] = node.values
            if not is_literal(subject):
                self._wildcards += 1
        values.append(value)

    def remove(self, subject: bytes, value: V) -> bool:
        """Remove one entry of `value` under `subject`; False when there is none."""
        values = self._exact.get(subject)
        if values is None or value not in values:
            return False
        values.remove(value)
        if values:
            return True
        del self._exact[subject]
        if not is_literal(subject):
            self._wildcards -= 1
        # Prune the nodes left empty, so the trie does not grow with every subject ever held.
        path: list[tuple[_Node[V], bytes]] = []
        node = self._root
        for tok in subject.split(b"."):
            path.append((node, tok))
            node = node.children[tok]
        for parent, tok in reversed(path):
            child = parent.children[tok]
            if child.values or child.children:
                break
            del parent.children[tok]
        return True

    def match(self, subject: bytes) -> list[V]:
        """The values of every entry whose subject matches the literal `subject`."""
        if not self._wildcards:
            return list(self._exact.get(subject, ()))
        out: list[V] = []
        tokens = subject.split(b".")
        if all(tokens):  # a subject with an empty token matches nothing (as the sublist)
            _match(self._root, tokens, 0, out)
        return out

    def intersecting(self, pattern: bytes) -> list[V]:
        """The values of every entry whose subject shares a subject with `pattern`."""
        if is_literal(pattern):
            return self.match(pattern)
        out: list[V] = []
        _intersect(self._root, pattern.split(b"."), 0, out)
        return out


def _match(node: _Node[V], tokens: list[bytes], i: int, out: list[V]) -> None:
    """Add the values under `node` whose subjects match the literal `tokens[i:]`."""
    last = len(tokens) - 1
    while True:
        children = node.children
        if not children:
            return
        fwc = children.get(_FWC)
        if fwc is not None:
            out += fwc.values
        pwc = children.get(_PWC)
        if pwc is not None:
            if i == last:
                out += pwc.values
            else:
                _match(pwc, tokens, i + 1, out)
        lit = children.get(tokens[i])
        if lit is None:
            return
        if i == last:
            out += lit.values
            return
        node = lit
        i += 1


def _intersect(node: _Node[V], tokens: list[bytes], i: int, out: list[V]) -> None:
    """Add the values under `node` whose subjects share a subject with `tokens[i:]`."""
    if i == len(tokens):
        out += node.values
        return
    tok = tokens[i]
    children = node.children
    if tok == _FWC:  # one or more tokens: every entry below, however long
        for child in children.values():
            _all(child, out)
        return
    fwc = children.get(_FWC)
    if fwc is not None:  # an entry's `>` takes this token and whatever follows
        out += fwc.values
    if tok == _PWC:
        for key, child in children.items():
            if key != _FWC:
                _intersect(child, tokens, i + 1, out)
        return
    lit = children.get(tok)
    if lit is not None:
        _intersect(lit, tokens, i + 1, out)
    pwc = children.get(_PWC)
    if pwc is not None:
        _intersect(pwc, tokens, i + 1, out)


def _all(node: _Node[V], out: list[V]) -> None:
    out += node.values
    for child in node.children.values():
        _all(child, out)
