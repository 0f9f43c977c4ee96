"""Properties of compiled subject transforms (routing/transform.py).

Any destination text compiles to a transform or fails with a TransformError (never
another exception: a stream configuration is client input); what a transform makes of a
subject its source matches is a function of the tokens its functions name, and the
functions keep every byte of their token (splits and slices only insert dots); a
mapping and its reverse give the subject back.
"""

from __future__ import annotations

from collections.abc import Callable

from hypothesis import given
from hypothesis import strategies as st

from brook.routing.transform import SubjectTransform, TransformError, fnv1a_32, validate_mapping

token = st.text(alphabet="abcdefgh-_0123456789", min_size=1, max_size=12).map(str.encode)
size = st.integers(min_value=-3, max_value=14)

# Destination text built from the pieces that matter to the parser.
PIECES = [
    "{{",
    "}}",
    "(",
    ")",
    ",",
    " ",
    ".",
    "$",
    "*",
    ">",
    "1",
    "2",
    "-1",
    "x",
    "wildcard",
    "partition",
    "split",
    "splitFromLeft",
    "sliceFromRight",
    "left",
    "Right",
    "random",
]
destination = st.lists(st.sampled_from(PIECES), min_size=1, max_size=12).map("".join)
source = st.sampled_from(["", ">", "a", "a.*", "a.*.*", "a.*.>", "*.b", "a..b", "a.>.b"])


def compiled(src: str, dest: str) -> SubjectTransform:
    transform = SubjectTransform.compile(src, dest)
    assert transform is not None
    return transform


def outcome(check: Callable[[], object]) -> object:
    """What `check` returns, or the text of the TransformError it raises."""
    try:
        return check()
    except TransformError as exc:
        return exc


@given(source, destination)
def test_any_destination_compiles_or_fails_with_a_transform_error(src: str, dest: str) -> None:
    for check in (
        lambda: SubjectTransform.compile(src, dest),
        lambda: SubjectTransform.compile(src, dest, strict=True),
        lambda: validate_mapping(src, dest),
    ):
        result = outcome(check)
        if isinstance(result, TransformError):
            assert result.text.startswith(("invalid subject", "invalid mapping destination"))
        elif isinstance(result, SubjectTransform) and src in ("a.*", "a.*.*"):
            subject = b"a.q" if src == "a.*" else b"a.q.r"
            assert isinstance(result.match(subject), bytes)


@given(token, size)
def test_splits_and_slices_keep_every_byte(value: bytes, n: int) -> None:
    subject = b"a." + value
    for function in ("splitFromLeft", "splitFromRight", "sliceFromLeft", "sliceFromRight"):
        out = compiled("a.*", f"{{{{{function}(1,{n})}}}}").match(subject)
        assert out is not None
        parts = out.split(b".")
        assert b"".join(parts) == value
        assert all(parts)
        if not 0 < n < len(value):
            assert out == value
        elif function.startswith("split"):
            assert len(parts) == 2
            assert len(parts[0] if function == "splitFromLeft" else parts[1]) == n
        else:
            whole = parts[:-1] if function == "sliceFromLeft" else parts[1:]
            assert all(len(p) == n for p in whole)
            assert 0 < len(parts[-1] if function == "sliceFromLeft" else parts[0]) <= n


@given(token, size)
def test_left_and_right_keep_an_end(value: bytes, n: int) -> None:
    left = compiled("a.*", f"{{{{left(1,{n})}}}}").match(b"a." + value)
    right = compiled("a.*", f"{{{{right(1,{n})}}}}").match(b"a." + value)
    keep = n if 0 < n < len(value) else len(value)
    assert left == value[:keep]
    assert right == value[len(value) - keep :]


@given(token, token, st.integers(min_value=1, max_value=1 << 20))
def test_partition_is_the_hash_of_the_named_tokens(one: bytes, two: bytes, n: int) -> None:
    out = compiled("a.*.*", f"p.{{{{partition({n},2,1)}}}}.$1").match(b"a." + one + b"." + two)
    assert out == b"p.%d.%b" % (fnv1a_32(two + one) % n, one)


@given(st.lists(token, min_size=1, max_size=5))
def test_a_reordering_and_its_reverse_give_the_subject_back(tokens: list[bytes]) -> None:
    if len(tokens) < 3:
        tokens = [*tokens, b"x", b"y"][:3]
    subject = b"a." + b".".join(tokens[:2]) + b"." + b".".join(tokens[2:])
    there = compiled("a.*.*.>", "b.{{wildcard(2)}}.$1.>").match(subject)
    assert there is not None
    back = compiled("b.*.*.>", "a.$2.$1.>").match(there)
    assert back == subject


@given(st.lists(token, min_size=1, max_size=4).map(b".".join))
def test_subjects_the_source_does_not_match_are_kept(subject: bytes) -> None:
    transform = compiled("zz.*", "yy.$1")
    assert transform.apply(subject) == subject
