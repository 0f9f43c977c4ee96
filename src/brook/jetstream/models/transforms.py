"""A stream's `subject_transform` and `republish`: decoding, nats-server's checks, JSON.

Both are (src, dest) subject mappings (routing/transform.py compiles them). nats-server's
`checkStreamCfg` checks them last, after the subjects: the transform's source must be a
valid subject (10155) and its destination a valid mapping (10156, `ValidateMapping`); a
republish with no source republishes everything (`>`; refused with `pedantic`), one from
`>` to `>` on a stream whose only subject is the transform's source republishes under the
transformed subject (the "implicit" republish), and a republish destination that could
match one of the stream's own subjects would loop (10052). An empty destination is no
mapping at all, yet kept in the configuration as sent, as nats-server keeps it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from brook.jetstream.errors import api_error
from brook.jetstream.fields import get_field, invalid_json
from brook.routing.transform import SubjectTransform as CompiledTransform
from brook.routing.transform import TransformError, validate_mapping
from brook.subjects import is_valid_subject

_TRANSFORM_KEYS = ("src", "dest")
_REPUBLISH_KEYS = ("src", "dest", "headers_only")


@dataclass(frozen=True, slots=True)
class SubjectTransformConfig:
    src: str
    dest: str


@dataclass(frozen=True, slots=True)
class RepublishConfig:
    src: str
    dest: str
    headers_only: bool = False


def _object(body: dict[str, Any], key: str, known: tuple[str, ...]) -> dict[str, Any] | None:
    """`body[key]`, an object of `known` keys; None when absent or null."""
    if body.get(key) is None:
        return None
    raw: dict[str, Any] = get_field(body, key, dict, {}, invalid_json)
    for name in raw:
        if name not in known:  # nats-server's strict decoder, nested objects included
            raise invalid_json(f'json: unknown field "{name}"')
    return raw


def parse_subject_transform(body: dict[str, Any]) -> SubjectTransformConfig | None:
    raw = _object(body, "subject_transform", _TRANSFORM_KEYS)
    if raw is None:
        return None
    return SubjectTransformConfig(
        get_field(raw, "src", str, "", invalid_json), get_field(raw, "dest", str, "", invalid_json)
    )


def parse_republish(body: dict[str, Any]) -> RepublishConfig | None:
    raw = _object(body, "republish", _REPUBLISH_KEYS)
    if raw is None:
        return None
    return RepublishConfig(
        get_field(raw, "src", str, "", invalid_json),
        get_field(raw, "dest", str, "", invalid_json),
        get_field(raw, "headers_only", bool, False, invalid_json),
    )


def check_subject_transform(transform: SubjectTransformConfig | None) -> None:
    """nats-server's checks of a stream's input transform (10155, 10156)."""
    if transform is None:
        return
    if transform.src and not is_valid_subject(transform.src.encode()):
        raise api_error("STREAM_TRANSFORM_INVALID_SOURCE", err=f"invalid subject {transform.src}")
    try:
        validate_mapping(transform.src, transform.dest)
    except TransformError as exc:
        raise api_error("STREAM_TRANSFORM_INVALID_DESTINATION", err=exc.text) from None


def check_republish(
    republish: RepublishConfig | None,
    subjects: list[str],
    transform: SubjectTransformConfig | None,
    *,
    pedantic: bool,
    overlaps: Callable[[str, str], bool],
) -> RepublishConfig | None:
    """nats-server's checks of `republish` (10157, 10052), returning it as nats-server
    keeps it (source defaulted, the implicit republish spelt out). `overlaps(a, b)`: can
    one subject match both (stream_config's own test, passed in to keep one)."""
    if republish is None:
        return None
    src, dest = republish.src, republish.dest
    if not src:
        if pedantic:
            raise api_error("PEDANTIC", err="republish source can not be empty")
        src = ">"
    if (
        src == ">"
        and dest == ">"
        and transform is not None
        and len(subjects) == 1
        and transform.src == subjects[0]
    ):
        if pedantic:
            raise api_error("PEDANTIC", err="implicit republish based on subject transform")
        src = dest = transform.dest
    if any(overlaps(dest, subject) for subject in subjects):
        raise api_error(
            "STREAM_INVALID_CONFIG",
            err="stream configuration for republish destination forms a cycle",
        )
    try:
        CompiledTransform.compile(src, dest)
    except TransformError:
        raise api_error(
            "STREAM_INVALID_CONFIG",
            err=f"stream configuration for republish with transform from '{src}' to '{dest}'"
            " not valid",
        ) from None
    return RepublishConfig(src, dest, republish.headers_only)


def subject_transform_json(transform: SubjectTransformConfig) -> dict[str, Any]:
    return {"src": transform.src, "dest": transform.dest}


def republish_json(republish: RepublishConfig) -> dict[str, Any]:
    """nats-server's RePublish: `src` and `headers_only` only when set."""
    out: dict[str, Any] = {}
    if republish.src:
        out["src"] = republish.src
    out["dest"] = republish.dest
    if republish.headers_only:
        out["headers_only"] = True
    return out
