"""Subject transforms: a (source, destination) pair compiled once, applied per subject.

nats-server maps subjects in several places with one implementation
(server/subject_transform.go): a stream's `subject_transform`, the transforms of its
sources and mirror, the subject of a republished message, and account subject mappings.
This is Brook's one implementation of it, to be shared the same way. It follows the Go
code token for token, byte for byte (subjects are `bytes` here as everywhere in the core:
`left`, `right` and the slices count bytes, as Go's string indexing does):

* a destination token `$N` or `{{wildcard(N)}}` is the source's N-th `*` token;
* `{{partition(n,N...)}}` is a bucket in 0..n-1 from the 32-bit FNV-1a hash of the named
  wildcard tokens concatenated (of the whole subject, dots included, without tokens), so
  a subject lands in the same partition as with nats-server;
* `{{split(N,delim)}}`, `{{splitFromLeft(N,pos)}}`, `{{splitFromRight(N,pos)}}`,
  `{{sliceFromLeft(N,size)}}`, `{{sliceFromRight(N,size)}}` turn one token into several;
  `{{left(N,len)}}` and `{{right(N,len)}}` keep part of one; `{{random(n)}}` is a random
  bucket;
* a `>` ending the source (then also the destination) carries the rest of the subject.

Function names are matched as nats-server's regular expressions match them (the first
letter of each word in either case, blanks around the name and the parentheses), and the
arguments parsed as Go's `strconv` parses them. Compile errors carry nats-server's error
texts (`TransformError.text`), which the JetStream API puts in its error descriptions.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable

# nats-server's errors (server/errors.go), as texts.
BAD_SUBJECT = "invalid subject"
_INVALID_DESTINATION = "invalid mapping destination"
INVALID_TRANSFORM = f"{_INVALID_DESTINATION}: invalid transform"
NOT_USING_ALL_WILDCARDS = f"{_INVALID_DESTINATION}: not using all of the token wildcard(s)"
UNKNOWN_FUNCTION = f"{_INVALID_DESTINATION}: unknown function"
INDEX_OUT_OF_RANGE = f"{_INVALID_DESTINATION}: wildcard index out of range"
NOT_ENOUGH_ARGS = f"{_INVALID_DESTINATION}: not enough arguments passed to the function"
INVALID_ARG = f"{_INVALID_DESTINATION}: function argument is invalid or in the wrong format"
TOO_MANY_ARGS = f"{_INVALID_DESTINATION}: too many arguments passed to the function"
NOT_SUPPORTED_FOR_IMPORT = (
    f"{_INVALID_DESTINATION}: the only mapping function allowed for import transforms is "
    "{{Wildcard()}}"
)


class TransformError(ValueError):
    """A transform that cannot be compiled; `text` is nats-server's error string."""

    def __init__(self, error: str, token: bytes | None = None) -> None:
        # nats-server's mappingDestinationErr: "<error> in <token>" when it names one.
        self.text = error if not token else f"{error} in {_text(token)}"
        super().__init__(self.text)


def _text(b: bytes) -> str:
    return b.decode("utf-8", "surrogateescape")


# nats-server's function patterns (Go RE2; `\s` there is [\t\n\f\r ], `.` any byte but \n).
_S = rb"[\t\n\f\r ]*"


def _function(name: bytes) -> re.Pattern[bytes]:
    letters = b"".join(
        b"[%c%c]" % (c, c ^ 0x20) if i == 0 or chr(c).isupper() else bytes([c])
        for i, c in enumerate(name)
    )
    return re.compile(rb"{{" + _S + letters + _S + rb"\((.*)\)" + _S + rb"}}")


_PARTITION = _function(b"partition")
_WILDCARD = _function(b"wildcard")
_SPLIT_FROM_LEFT = _function(b"splitFromLeft")
_SPLIT_FROM_RIGHT = _function(b"splitFromRight")
_SLICE_FROM_LEFT = _function(b"sliceFromLeft")
_SLICE_FROM_RIGHT = _function(b"sliceFromRight")
_SPLIT = _function(b"split")
_LEFT = _function(b"left")
_RIGHT = _function(b"right")
_RANDOM = _function(b"random")
_COMMA = re.compile(rb",[\t\n\f\r ]*")
_INTEGER = re.compile(rb"[+-]?[0-9]+")
# What nats-server's ValidateMapping accepts as a function (left and right are missing
# from its list in the Go source, yet nats-server 2.15.1 accepts them: the server wins).
_KNOWN = (
    _PARTITION,
    _WILDCARD,
    _SPLIT_FROM_LEFT,
    _SPLIT_FROM_RIGHT,
    _SLICE_FROM_LEFT,
    _SLICE_FROM_RIGHT,
    _SPLIT,
    _LEFT,
    _RIGHT,
    _RANDOM,
)
_INT64 = 1 << 63
_INT32 = 1 << 31
_BLANKS = b"\t\n\f\r "

# Kinds of destination token.
LITERAL = "literal"
WILDCARD = "wildcard"
PARTITION = "partition"
SPLIT_FROM_LEFT = "splitFromLeft"
SPLIT_FROM_RIGHT = "splitFromRight"
SLICE_FROM_LEFT = "sliceFromLeft"
SLICE_FROM_RIGHT = "sliceFromRight"
SPLIT = "split"
LEFT = "left"
RIGHT = "right"
RANDOM = "random"


def _atoi(arg: bytes, bits: int = 64) -> int | None:
    """Go's strconv.Atoi (bits=64) or ParseInt(arg, 10, 32): None where Go returns an
    error (no blanks, no underscores, within range)."""
    if not _INTEGER.fullmatch(arg):
        return None
    value = int(arg)
    bound = _INT64 if bits == 64 else _INT32
    return value if -bound <= value < bound else None


def _int32(value: int) -> int:
    """Go's int32(value): wrapped into 32 bits."""
    return (value + _INT32) % (1 << 32) - _INT32


def _args(pattern: re.Pattern[bytes], token: bytes) -> list[bytes] | None:
    """The function's arguments, split at commas (blanks after them dropped), or None
    when `token` is not a call of it."""
    found = pattern.search(token)
    return None if found is None else _COMMA.split(found.group(1))


def _int_arg(arg: bytes, bits: int = 64) -> int | None:
    """An integer argument: nats-server trims it of spaces (only) before parsing."""
    return _atoi(arg.strip(b" "), bits)


# A parsed destination token: (kind, wildcard numbers, integer argument, string argument).
_Parsed = tuple[str, list[int], int, bytes]


def _index_int_args(token: bytes, args: list[bytes], kind: str) -> _Parsed:
    """A function of (wildcard number, integer)."""
    if len(args) < 2:
        raise TransformError(NOT_ENOUGH_ARGS, token)
    if len(args) > 2:
        raise TransformError(TOO_MANY_ARGS, token)
    index = _int_arg(args[0])
    number = _int_arg(args[1], 32)
    if index is None or number is None:
        raise TransformError(INVALID_ARG, token)
    return kind, [index], number, b""


def parse_token(token: bytes) -> _Parsed:
    """One destination token, as nats-server's indexPlaceHolders reads it."""
    length = len(token)
    if length <= 1:
        return LITERAL, [-1], -1, b""
    if token[0] == 0x24:  # "$N": the old form of wildcard(N); "$x" is a literal
        number = _atoi(token[1:])
        return (LITERAL, [-1], -1, b"") if number is None else (WILDCARD, [number], -1, b"")
    if not (length > 4 and token.startswith(b"{{") and token.endswith(b"}}")):
        return LITERAL, [-1], -1, b""
    args = _args(_WILDCARD, token)
    if args is not None:
        if len(args) == 1 and args[0] == b"":
            raise TransformError(NOT_ENOUGH_ARGS, token)
        if len(args) > 1:
            raise TransformError(TOO_MANY_ARGS, token)
        index = _int_arg(args[0])
        if index is None:
            raise TransformError(INVALID_ARG, token)
        return WILDCARD, [index], -1, b""
    args = _args(_PARTITION, token)
    if args is not None:
        buckets = _int_arg(args[0])
        if buckets is None or buckets >= _INT32:
            raise TransformError(INVALID_ARG, token)
        indexes = [_int_arg(a) for a in args[1:]]
        if any(i is None for i in indexes):
            raise TransformError(INVALID_ARG, token)
        return PARTITION, [i for i in indexes if i is not None], _int32(buckets), b""
    for pattern, kind in (
        (_SPLIT_FROM_LEFT, SPLIT_FROM_LEFT),
        (_SPLIT_FROM_RIGHT, SPLIT_FROM_RIGHT),
        (_SLICE_FROM_LEFT, SLICE_FROM_LEFT),
        (_SLICE_FROM_RIGHT, SLICE_FROM_RIGHT),
        (_RIGHT, RIGHT),
        (_LEFT, LEFT),
    ):
        args = _args(pattern, token)
        if args is not None:
            return _index_int_args(token, args, kind)
    args = _args(_SPLIT, token)
    if args is not None:
        if len(args) < 2:
            raise TransformError(NOT_ENOUGH_ARGS, token)
        if len(args) > 2:
            raise TransformError(TOO_MANY_ARGS, token)
        index = _int_arg(args[0])
        if index is None or b" " in args[1] or b"." in args[1]:
            raise TransformError(INVALID_ARG, token)
        return SPLIT, [index], -1, args[1]
    args = _args(_RANDOM, token)
    if args is not None:
        if len(args) != 1:
            raise TransformError(NOT_ENOUGH_ARGS, token)
        buckets = _int_arg(args[0])
        if buckets is None or buckets >= _INT32:
            raise TransformError(INVALID_ARG, token)
        return RANDOM, [], _int32(buckets), b""
    raise TransformError(UNKNOWN_FUNCTION, token)


def _subject_info(subject: bytes) -> tuple[list[bytes], int, bool] | None:
    """nats-server's subjectInfo: tokens, number of `*`, whether it ends in `>`; None if
    a token is empty or follows `>` (blanks are not checked here)."""
    if not subject:
        return None
    tokens = subject.split(b".")
    wildcards = 0
    full = False
    for token in tokens:
        if not token or full:
            return None
        if token == b">":
            full = True
        elif token == b"*":
            wildcards += 1
    return tokens, wildcards, full


def fnv1a_32(data: bytes) -> int:
    """The 32-bit FNV-1a hash (Go's hash/fnv New32a), nats-server's partition hash."""
    h = 0x811C9DC5
    for byte in data:
        h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
    return h


def _bucket(key: bytes, buckets: int) -> bytes:
    if buckets == 0:
        return b"0"
    return b"%d" % (fnv1a_32(key) % (buckets & 0xFFFFFFFF))


def _go_split(token: bytes, sep: bytes) -> list[bytes]:
    """Go's strings.Split: an empty separator splits after each UTF-8 sequence (each
    byte of an invalid one on its own)."""
    if sep:
        return token.split(sep)
    return [c.encode("utf-8", "surrogateescape") for c in _text(token)]


# One destination token's output from the subject's tokens.
_Emit = Callable[[list[bytes]], bytes]


def _emitter(kind: str, positions: list[int], number: int, text: bytes, literal: bytes) -> _Emit:
    """The function writing one destination token (nats-server's TransformTokenizedSubject,
    one case per kind)."""
    if kind == LITERAL:
        return lambda tokens: literal
    if kind == RANDOM:  # Go: rand.Int31() % n, never negative
        return lambda tokens: b"%d" % (random.getrandbits(31) % abs(number)) if number else b"0"
    if kind == PARTITION:
        if positions:
            return lambda tokens: _bucket(b"".join(tokens[p] for p in positions), number)
        return lambda tokens: _bucket(b".".join(tokens), number)
    at = positions[0]
    if kind == WILDCARD:
        return lambda tokens: tokens[at] if at < len(tokens) else b""
    if kind == SPLIT:
        return lambda tokens: _split(tokens[at], text)
    size = number
    if kind == SPLIT_FROM_LEFT:
        return lambda tokens: _split_from_left(tokens[at], size)
    if kind == SPLIT_FROM_RIGHT:
        return lambda tokens: _split_from_right(tokens[at], size)
    if kind == SLICE_FROM_LEFT:
        return lambda tokens: _slice_left(tokens[at], size)
    if kind == SLICE_FROM_RIGHT:
        return lambda tokens: _slice_right(tokens[at], size)
    if kind == LEFT:
        return lambda tokens: tokens[at][:size] if 0 < size < len(tokens[at]) else tokens[at]
    assert kind == RIGHT
    return lambda tokens: tokens[at][-size:] if 0 < size < len(tokens[at]) else tokens[at]


def _split_from_left(token: bytes, position: int) -> bytes:
    """Two tokens, cut `position` bytes from the left, unless that is not inside it."""
    if 0 < position < len(token):
        return token[:position] + b"." + token[position:]
    return token


def _split_from_right(token: bytes, position: int) -> bytes:
    if 0 < position < len(token):
        cut = len(token) - position
        return token[:cut] + b"." + token[cut:]
    return token


def _slice_left(token: bytes, size: int) -> bytes:
    if not 0 < size < len(token):
        return token
    return b".".join(token[i : i + size] for i in range(0, len(token), size))


def _slice_right(token: bytes, size: int) -> bytes:
    if not 0 < size < len(token):
        return token
    head = len(token) % size
    parts = [token[:head]] if head else []
    parts += [token[i : i + size] for i in range(head, len(token), size)]
    return b".".join(parts)


def _split(token: bytes, delimiter: bytes) -> bytes:
    """nats-server's split: the non-empty pieces, a dot before each one but the first;
    except that empty pieces at the start leave a dot before the first non-empty one
    when there are two or more of them ("--a" by "-" is ".a"), as its loop writes it."""
    pieces = _go_split(token, delimiter)
    out = bytearray()
    last = len(pieces) - 1
    for j, piece in enumerate(pieces):
        out += piece
        if j < last and pieces[j + 1] and not (j == 0 and not piece):
            out += b"."
    return bytes(out)


class SubjectTransform:
    """A compiled transform (nats-server's subjectTransform); `compile` makes one."""

    __slots__ = (
        "_emitters",
        "_full",
        "_identity",
        "_rest_from",
        "_stokens",
        "dest",
        "random",
        "src",
    )

    def __init__(
        self, src: bytes, dest: bytes, emitters: list[_Emit], rest_from: int, *, random: bool
    ) -> None:
        self.src = src
        self.dest = dest
        self._stokens = src.split(b".")
        self._emitters = emitters
        # With a `>`: the destination's own `>` token is replaced by the subject's tokens
        # from the source's `>` on.
        self._full = rest_from >= 0
        self._rest_from = rest_from
        self._identity = src == b">" and dest == b">"
        self.random = random  # a `{{random(n)}}` token: the same subject may map elsewhere

    @classmethod
    def compile(
        cls, src: str | bytes, dest: str | bytes, *, strict: bool = False
    ) -> SubjectTransform | None:
        """nats-server's NewSubjectTransformWithStrict: None for an empty destination (no
        transform), a TransformError for an invalid pair. An empty source is `>`.
        `strict` (reversible import mappings) allows only wildcards and needs them all."""
        src_b = src.encode("utf-8", "surrogateescape") if isinstance(src, str) else src
        dest_b = dest.encode("utf-8", "surrogateescape") if isinstance(dest, str) else dest
        if not dest_b:
            return None
        src_b = src_b or b">"
        source = _subject_info(src_b)
        destination = _subject_info(dest_b)
        if source is None or destination is None or destination[1] > 0:
            raise TransformError(BAD_SUBJECT)
        stokens, wildcards, src_full = source
        dtokens, _, dest_full = destination
        if src_full != dest_full:
            raise TransformError(BAD_SUBJECT)
        # Source token position of each `*`, by its number (1-based).
        star_at: dict[int, int] = {}
        for i, token in enumerate(stokens):
            if token == b"*":
                star_at[len(star_at) + 1] = i
        emitters: list[_Emit] = []
        used = 0
        random_used = False
        for token in dtokens:
            kind, numbers, number, text = parse_token(token)
            random_used = random_used or kind == RANDOM
            if wildcards or src_full:
                if strict and kind not in (LITERAL, WILDCARD):
                    raise TransformError(NOT_SUPPORTED_FOR_IMPORT, token)
                positions: list[int] = []
                if kind not in (LITERAL, RANDOM):
                    used += len(numbers)
                    for n in numbers:
                        if n > wildcards:
                            raise TransformError(INDEX_OUT_OF_RANGE, b"%b: [%d]" % (token, n))
                        # nats-server looks the number up in a map: 0 or below is token 0.
                        positions.append(star_at.get(n, 0))
            elif kind in (LITERAL, RANDOM, PARTITION):
                positions = []  # without wildcards a partition hashes the whole subject
            else:
                raise TransformError(INDEX_OUT_OF_RANGE, token)
            emitters.append(_emitter(kind, positions, number, text, token))
        if strict and (wildcards or src_full) and used < wildcards:
            raise TransformError(NOT_USING_ALL_WILDCARDS, dest_b)
        if dest_full:
            emitters.pop()  # the `>`: the rest of the subject instead
        rest_from = len(stokens) - 1 if dest_full else -1
        return cls(src_b, dest_b, emitters, rest_from, random=random_used)

    def match(self, subject: bytes) -> bytes | None:
        """The transformed subject, or None when `subject` is not a literal subject (an
        empty or wildcard token) or not one the source matches (nats-server's Match
        errors)."""
        if self._identity:
            return subject
        tokens = subject.split(b".")
        if b"" in tokens or b"*" in tokens or b">" in tokens:
            return None
        if not self._source_matches(tokens):
            return None
        return self.transform_tokens(tokens)

    def _source_matches(self, tokens: list[bytes]) -> bool:
        source = self._stokens
        for i, pattern in enumerate(source):
            if pattern == b">":
                return len(tokens) > i
            if i >= len(tokens) or (pattern != b"*" and pattern != tokens[i]):
                return False
        return len(source) == len(tokens)

    def apply(self, subject: bytes) -> bytes:
        """What a stream stores a message under: the transformed subject when the source
        matches, the subject unchanged otherwise (nats-server's stream input transform)."""
        mapped = self.match(subject)
        return subject if mapped is None else mapped

    def transform_tokens(self, tokens: list[bytes]) -> bytes:
        """The destination for a subject's tokens (which the source matches)."""
        out = [emit(tokens) for emit in self._emitters]
        if self._full:
            out.extend(tokens[self._rest_from :])
        return b".".join(out)


def tokenized(subject: bytes) -> bytes:
    """nats-server's transformTokenize: each `*` of a subject as its `$N`, so that a
    subject with wildcards can be a transform's destination (a mapping's source as its
    own destination, an import's subjects)."""
    out = []
    n = 0
    for token in subject.split(b"."):
        if token == b"*":
            n += 1
            token = b"$%d" % n
        out.append(token)
    return b".".join(out)


def validate_mapping(src: str, dest: str) -> None:
    """nats-server's ValidateMapping (a stream's `subject_transform`): the destination's
    tokens checked, then the pair compiled; raises TransformError."""
    if not dest:
        return
    dest_b = dest.encode("utf-8", "surrogateescape")
    full = False
    for token in dest_b.split(b"."):
        if not token or full:
            raise TransformError(INVALID_TRANSFORM, token)
        if len(token) > 4 and token.startswith(b"{{") and token.endswith(b"}}"):
            if not any(pattern.search(token) for pattern in _KNOWN):
                raise TransformError(UNKNOWN_FUNCTION, token)
            continue
        if token == b">":
            full = True
        elif any(c in _BLANKS for c in token):
            raise TransformError(INVALID_TRANSFORM)
    SubjectTransform.compile(src, dest)
