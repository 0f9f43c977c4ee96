"""A stream's `mirror` and `sources`: decoding and nats-server's checks (ADR 0020).

Both are lists of `StreamSource` in nats-server (a mirror is one): the origin's `name`,
where to start (`opt_start_seq` or `opt_start_time`), what to take (`filter_subject`, or
`subject_transforms`, each a source filter with a destination), `external` (`api` and
`deliver` prefixes: another account or JetStream domain) and `consumer` (a durable
consumer on the origin, ADR-60). `check_mirror_and_sources` runs nats-server's
`checkStreamCfg` checks in its order, those that need no other stream; the checks that
look at other streams (max message size, cycles, `mirror_direct` inherited from the
origin) are the engine's, which knows them. An internal name (`iname`) identifies a
source, as nats-server's `composeIName`: it refuses duplicates and is the first three
fields of the `Nats-Stream-Source` header.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from brook.jetstream.errors import api_error
from brook.jetstream.fields import get_field, invalid_json
from brook.jetstream.models.consumer_config import parse_go_time
from brook.jetstream.models.consumer_json import format_time_with_offset
from brook.jetstream.models.defaults import NAME_FORBIDDEN
from brook.jetstream.models.transforms import SubjectTransformConfig, subject_transform_json
from brook.routing.subject_index import is_literal
from brook.routing.transform import TransformError, validate_mapping
from brook.subjects import is_valid_subject, subset_match

_SOURCE_KEYS = (
    "name",
    "opt_start_seq",
    "opt_start_time",
    "filter_subject",
    "subject_transforms",
    "external",
    "consumer",
)
_TRANSFORM_KEYS = ("src", "dest")
_EXTERNAL_KEYS = ("api", "deliver")
_CONSUMER_KEYS = ("name", "deliver_subject")
_JS_API_PREFIX = "$JS.API"
_ASSET_NAME_FORBIDDEN = NAME_FORBIDDEN | {"\\", "/"}
_HASH_DIGITS = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


@dataclass(frozen=True, slots=True)
class ExternalStream:
    api: str
    deliver: str


@dataclass(frozen=True, slots=True)
class ConsumerSource:
    name: str
    deliver_subject: str


@dataclass(frozen=True, slots=True)
class StreamSource:
    name: str
    opt_start_seq: int = 0
    opt_start_time: int | None = None  # ns since the epoch
    opt_start_time_offset: int = 0  # the UTC offset it was given in, echoed back
    filter_subject: str = ""
    subject_transforms: tuple[SubjectTransformConfig, ...] = field(default_factory=tuple)
    external: ExternalStream | None = None
    consumer: ConsumerSource | None = None

    @property
    def iname(self) -> str:
        """nats-server's `composeIName`: name (with the hash of an external API prefix and
        of a durable consumer's name), the filters and the destinations."""
        name = self.name
        if self.external is not None:
            name += ":" + go_hash(self.external.api)
        if self.consumer is not None:
            name += ":C=" + go_hash(self.consumer.name)
        if not self.subject_transforms:
            return f"{name} {self.filter_subject or '>'} >"
        sources = "\f".join(t.src or ">" for t in self.subject_transforms)
        dests = "\f".join(t.dest or ">" for t in self.subject_transforms)
        return f"{name} {sources} {dests}"


def go_hash(name: str) -> str:
    """nats-server's `getHash`: 8 characters of base 62 from the SHA-256 of `name`."""
    digest = hashlib.sha256(name.encode()).digest()
    return "".join(_HASH_DIGITS[b % 62] for b in digest[:8])


def _object(raw: Any, key: str, known: tuple[str, ...]) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise invalid_json(f"{key}: expected an object")
    for name in raw:
        if name not in known:  # nats-server's strict decoder, nested objects included
            raise invalid_json(f'json: unknown field "{name}"')
    return raw


def _str(raw: dict[str, Any], key: str) -> str:
    return str(get_field(raw, key, str, "", invalid_json) or "")


def parse_source(raw: Any, key: str) -> StreamSource:
    """One `StreamSource` object as nats-server decodes it (unknown keys refused)."""
    body = _object(raw, key, _SOURCE_KEYS)
    start_seq = get_field(body, "opt_start_seq", int, 0, invalid_json) or 0
    if start_seq < 0:  # a uint64 in nats-server
        raise invalid_json(
            f"json: cannot unmarshal number {start_seq} into Go struct field "
            f"StreamSource.{key}.opt_start_seq of type uint64"
        )
    start_time, offset = parse_go_time(body, "opt_start_time")
    transforms = []
    for item in get_field(body, "subject_transforms", list, [], invalid_json) or []:
        t = _object(item, "subject_transforms", _TRANSFORM_KEYS)
        transforms.append(SubjectTransformConfig(_str(t, "src"), _str(t, "dest")))
    external = None
    if body.get("external") is not None:
        e = _object(body["external"], "external", _EXTERNAL_KEYS)
        external = ExternalStream(_str(e, "api"), _str(e, "deliver"))
    consumer = None
    if body.get("consumer") is not None:
        c = _object(body["consumer"], "consumer", _CONSUMER_KEYS)
        consumer = ConsumerSource(_str(c, "name"), _str(c, "deliver_subject"))
    return StreamSource(
        name=_str(body, "name"),
        opt_start_seq=start_seq,
        opt_start_time=start_time,
        opt_start_time_offset=offset,
        filter_subject=_str(body, "filter_subject"),
        subject_transforms=tuple(transforms),
        external=external,
        consumer=consumer,
    )


def parse_mirror(body: dict[str, Any]) -> StreamSource | None:
    if body.get("mirror") is None:
        return None
    return parse_source(body["mirror"], "mirror")


def parse_sources(body: dict[str, Any]) -> list[StreamSource | None]:
    """`sources`; a `null` entry is kept as None and refused by the checks (10141), as
    nats-server refuses it."""
    raw = get_field(body, "sources", list, [], invalid_json) or []
    return [None if item is None else parse_source(item, "sources") for item in raw]


@dataclass(frozen=True, slots=True)
class StreamShape:
    """What of the stream's own configuration the checks look at."""

    name: str
    first_seq: int
    subjects: list[str]
    max_msg_size: int
    allow_msg_counter: bool
    subject_delete_marker_ttl: int
    mirror_direct: bool
    allow_msg_schedules: bool = False
    allow_atomic: bool = False
    allow_batched: bool = False


class Origin(Protocol):
    """What the checks read of a stream this server has (its StreamConfig)."""

    @property
    def name(self) -> str: ...
    @property
    def subjects(self) -> Sequence[str]: ...
    @property
    def max_msg_size(self) -> int: ...
    @property
    def allow_direct(self) -> bool: ...
    @property
    def mirror(self) -> StreamSource | None: ...
    @property
    def sources(self) -> Sequence[StreamSource]: ...


Lookup = Callable[[str], Origin | None]


def check_mirror_and_sources(
    mirror: StreamSource | None,
    sources: list[StreamSource | None],
    shape: StreamShape,
    *,
    overlaps: Callable[[str, str], bool],
    lookup: Lookup,
    pedantic: bool,
) -> bool:
    """nats-server's checks of `mirror` and `sources` in its order (`checkStreamCfg`),
    those against the streams `lookup` finds included; `overlaps` is its SubjectsCollide.
    Returns the stream's `mirror_direct`: a mirror of a stream found here inherits its
    origin's `allow_direct`, as in nats-server."""
    delivery: list[str] = []
    apis: list[str] = []
    origin_subjects: list[str] = []
    mirror_direct = shape.mirror_direct
    if mirror is not None:
        _check_mirror(mirror, sources, shape, overlaps)
        if mirror.external is None:
            if not valid_asset_name(mirror.name):
                raise api_error("MIRROR_INVALID_STREAM_NAME")
            origin = lookup(mirror.name)
            if origin is not None:
                origin_subjects += origin.subjects
                if _smaller_max_msg_size(shape.max_msg_size, origin.max_msg_size):
                    raise api_error("MIRROR_MAX_MESSAGE_SIZE_TOO_BIG")
                if pedantic and mirror_direct != origin.allow_direct:
                    raise api_error(
                        "PEDANTIC",
                        err="origin stream has direct get set, mirror has it disabled",
                    )
                mirror_direct = origin.allow_direct
        else:
            delivery += [mirror.external.deliver] if mirror.external.deliver else []
            apis += [mirror.external.api] if mirror.external.api else []
    if sources and shape.allow_msg_schedules:
        raise api_error("SOURCE_WITH_MSG_SCHEDULES")
    inames: set[str] = set()
    cnames: set[str] = set()
    for source in sources:
        if source is None or not valid_asset_name(source.name):
            raise api_error("SOURCE_INVALID_STREAM_NAME")
        if source.iname in inames:
            raise api_error("SOURCE_DUPLICATE_DETECTED")
        inames.add(source.iname)
        _check_transforms(source, "SOURCE")
        for outer, a in enumerate(source.subject_transforms):
            for inner, b in enumerate(source.subject_transforms):
                if inner != outer and subset_match(b.src.encode(), a.src.encode()):
                    raise api_error("SOURCE_OVERLAPPING_SUBJECT_FILTERS")
        if source.consumer is not None:
            _check_consumer(source, "SOURCE_DURABLE_CONSUMER_CFG_INVALID")
            cname = f"{source.name} {source.consumer.name}"
            if cname in cnames:
                raise api_error("SOURCE_DURABLE_CONSUMER_DUPLICATE_DETECTED")
            cnames.add(cname)
        if source.external is None:
            origin = lookup(source.name)
            if origin is not None:
                origin_subjects += origin.subjects
                if _smaller_max_msg_size(shape.max_msg_size, origin.max_msg_size):
                    raise api_error("SOURCE_MAX_MESSAGE_SIZE_TOO_BIG")
        else:
            delivery += [source.external.deliver] if source.external.deliver else []
            apis += [source.external.api] if source.external.api else []
    for prefix in delivery:
        if not _valid_publish_subject(prefix):
            raise api_error("STREAM_INVALID_EXTERNAL_DELIVERY_SUBJ", prefix=prefix)
        for subject in origin_subjects:
            if overlaps(subject, f"{prefix}.{subject}"):
                raise api_error(
                    "STREAM_EXTERNAL_DEL_PREFIX_OVERLAPS", prefix=prefix, subject=subject
                )
    for prefix in apis:
        if not _valid_publish_subject(prefix):
            raise api_error(
                "STREAM_INVALID_CONFIG",
                err=f'stream external api prefix "{prefix}" must be a valid subject '
                "without wildcards",
            )
        if overlaps(prefix, _JS_API_PREFIX):
            raise api_error("STREAM_EXTERNAL_API_OVERLAP", prefix=prefix, subject=_JS_API_PREFIX)
    _check_cycles(shape, mirror, [s for s in sources if s is not None], lookup, overlaps)
    return mirror_direct


def _smaller_max_msg_size(own: int, origin: int) -> bool:
    return own > 0 and origin > 0 and own < origin


def _check_cycles(
    shape: StreamShape,
    mirror: StreamSource | None,
    sources: list[StreamSource],
    lookup: Lookup,
    overlaps: Callable[[str, str], bool],
) -> None:
    """nats-server's walk from the new configuration through the local streams it
    sources or mirrors: a stream seen again is a cycle (for a source, only if its filter
    can match the subjects of the stream that sources it)."""
    to_visit: list[tuple[str, Sequence[str], StreamSource | None, Sequence[StreamSource]]]
    to_visit = [(shape.name, shape.subjects, mirror, sources)]
    visited: set[str] = set()
    while to_visit:
        name, subjects, node_mirror, node_sources = to_visit.pop(0)
        visited.add(name)
        for source in node_sources:
            if source.external is not None:
                continue
            if source.name in visited:
                if not source.filter_subject or any(
                    overlaps(subject, source.filter_subject) for subject in subjects
                ):
                    raise api_error("STREAM_INVALID_CONFIG", err="detected cycle")
            elif (origin := lookup(source.name)) is not None:
                to_visit.append((origin.name, origin.subjects, origin.mirror, origin.sources))
        if node_mirror is not None and node_mirror.external is None:
            if node_mirror.name in visited:
                raise api_error("STREAM_INVALID_CONFIG", err="detected cycle")
            if (origin := lookup(node_mirror.name)) is not None:
                to_visit.append((origin.name, origin.subjects, origin.mirror, origin.sources))


def _check_mirror(
    mirror: StreamSource,
    sources: list[StreamSource | None],
    shape: StreamShape,
    overlaps: Callable[[str, str], bool],
) -> None:
    if shape.first_seq > 0:
        raise api_error("MIRROR_WITH_FIRST_SEQ")
    if shape.subjects:
        raise api_error("MIRROR_WITH_SUBJECTS")
    if sources:
        raise api_error("MIRROR_WITH_SOURCES")
    if shape.allow_msg_counter:
        raise api_error("MIRROR_WITH_COUNTERS")
    if shape.allow_atomic:
        raise api_error("MIRROR_WITH_ATOMIC_PUBLISH")
    if shape.allow_batched:
        raise api_error("MIRROR_WITH_BATCH_PUBLISH")
    if shape.allow_msg_schedules:
        raise api_error("MIRROR_WITH_MSG_SCHEDULES")
    if mirror.consumer is not None:
        _check_consumer(mirror, "MIRROR_DURABLE_CONSUMER_CFG_INVALID")
    if mirror.filter_subject and mirror.subject_transforms:
        raise api_error("MIRROR_MULTIPLE_FILTERS_NOT_ALLOWED")
    if shape.subject_delete_marker_ttl > 0:
        raise api_error("STREAM_INVALID_CONFIG", err="subject delete markers forbidden on mirrors")
    for outer, a in enumerate(mirror.subject_transforms):
        _check_transform(a, "MIRROR")
        for inner, b in enumerate(mirror.subject_transforms):
            if inner != outer and overlaps(a.src, b.src):
                raise api_error("MIRROR_OVERLAPPING_SUBJECT_FILTERS")


def _check_consumer(source: StreamSource, code: str) -> None:
    consumer = source.consumer
    assert consumer is not None
    if (
        not valid_asset_name(consumer.name)
        or not _valid_publish_subject(consumer.deliver_subject)
        or source.opt_start_seq != 0
        or source.opt_start_time is not None
        or source.filter_subject
    ):
        raise api_error(code)


def _check_transforms(source: StreamSource, kind: str) -> None:
    if source.filter_subject and source.subject_transforms:
        raise api_error(f"{kind}_MULTIPLE_FILTERS_NOT_ALLOWED")
    for transform in source.subject_transforms:
        _check_transform(transform, kind)


def _check_transform(transform: SubjectTransformConfig, kind: str) -> None:
    if transform.src and not is_valid_subject(transform.src.encode()):
        raise api_error(f"{kind}_INVALID_SUBJECT_FILTER", err=f"invalid subject {transform.src}")
    try:
        validate_mapping(transform.src, transform.dest)
    except TransformError as exc:
        raise api_error(f"{kind}_INVALID_TRANSFORM_DESTINATION", err=exc.text) from None


def valid_asset_name(name: str) -> bool:
    """nats-server's isValidAssetName: no length limit here, path separators refused."""
    return bool(name) and not (_ASSET_NAME_FORBIDDEN & set(name))


def _valid_publish_subject(subject: str) -> bool:
    return is_valid_subject(subject.encode()) and is_literal(subject.encode())


def source_json(source: StreamSource) -> dict[str, Any]:
    """nats-server's StreamSource JSON: optional keys only when set, in its order."""
    out: dict[str, Any] = {"name": source.name}
    if source.opt_start_seq:
        out["opt_start_seq"] = source.opt_start_seq
    if source.opt_start_time is not None:
        out["opt_start_time"] = format_time_with_offset(
            source.opt_start_time, source.opt_start_time_offset
        )
    if source.filter_subject:
        out["filter_subject"] = source.filter_subject
    if source.subject_transforms:
        out["subject_transforms"] = [subject_transform_json(t) for t in source.subject_transforms]
    if source.external is not None:
        out["external"] = {"api": source.external.api, "deliver": source.external.deliver}
    if source.consumer is not None:
        consumer: dict[str, str] = {}
        if source.consumer.name:
            consumer["name"] = source.consumer.name
        if source.consumer.deliver_subject:
            consumer["deliver_subject"] = source.consumer.deliver_subject
        out["consumer"] = consumer
    return out
