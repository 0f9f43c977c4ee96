"""Stream configuration: parse, default, validate, compare, update-check and serialise.

Follows nats-server 2.15 (wire reference §3.1, §2.5, checked against the real server):
fields may be `null` for "not set", durations are in nanoseconds where 0 means "default",
and a field nats-server does not know is refused with 10025, as its strict decoder does (a
misspelt limit is an error, never silently dropped). Defaults are applied before
validation and before comparing configs (idempotent create). Serialisation emits the keys
the reference server emits, in its order, and nothing else, because the `nats` CLI
validates responses against schemas that forbid extra keys.

A `subject_transform` and `republish` are decoded and checked by `transforms.py`,
`mirror` and `sources` by `sources.py` (a valid mirror or source is still refused with
10052 until Brook copies messages, ADR 0020). `allow_atomic` streams take atomic batch
publishes (`batch.py`), `allow_batched` ones fast batches (`fast_batch.py`),
`allow_msg_schedules` ones message schedules (`schedules.py`). `placement` is kept and
shown as nats-server does on a server without a cluster, where it places nothing.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

from brook.jetstream import versioning
from brook.jetstream.errors import ApiError, api_error
from brook.jetstream.fields import get_field, invalid_json
from brook.jetstream.models import sources as stream_sources
from brook.jetstream.models import transforms
from brook.jetstream.models.defaults import (
    DESCRIPTION_BYTES_MAX,
    METADATA_BYTES_MAX,
    NAME_BYTES_MAX,
    NAME_FORBIDDEN,
    STREAM_DUPLICATE_WINDOW_DEFAULT_NS,
)
from brook.subjects import is_valid_subject, subset_match

MIN_DURATION_NS = 100_000_000  # max_age and duplicate_window, when set
MIN_MARKER_TTL_NS = 1_000_000_000  # subject_delete_marker_ttl, when set
# nats-server's StreamConfigRequest: its StreamConfig plus `pedantic`. Any other key is
# refused (10025), as nats-server's strict decoder refuses it.
_REQUEST_KEYS = frozenset(
    {
        "pedantic",
        "name",
        "description",
        "subjects",
        "retention",
        "max_consumers",
        "max_msgs",
        "max_bytes",
        "max_age",
        "max_msgs_per_subject",
        "max_msg_size",
        "discard",
        "storage",
        "num_replicas",
        "no_ack",
        "duplicate_window",
        "placement",
        "mirror",
        "sources",
        "compression",
        "first_seq",
        "subject_transform",
        "republish",
        "allow_direct",
        "mirror_direct",
        "discard_new_per_subject",
        "sealed",
        "deny_delete",
        "deny_purge",
        "allow_rollup_hdrs",
        "consumer_limits",
        "allow_msg_ttl",
        "subject_delete_marker_ttl",
        "allow_msg_counter",
        "allow_atomic",
        "allow_msg_schedules",
        "persist_mode",
        "allow_batched",
        "metadata",
    }
)
_PLACEMENT_KEYS = frozenset({"cluster", "tags", "preferred"})
_CONSUMER_LIMITS_KEYS = ("inactive_threshold", "max_ack_pending")  # nats-server's order
PERSIST_MODES = ("default", "async")


@dataclass(slots=True)
class StreamConfig:
    name: str
    description: str = ""
    subjects: list[str] = field(default_factory=list)
    retention: str = "limits"
    max_consumers: int = -1
    max_msgs: int = -1
    max_bytes: int = -1
    max_age: int = 0
    max_msgs_per_subject: int = -1
    max_msg_size: int = -1
    discard: str = "old"
    storage: str = "file"
    num_replicas: int = 1
    no_ack: bool = False
    duplicate_window: int = 0
    compression: str = "none"
    first_seq: int = 0
    allow_direct: bool = False
    mirror_direct: bool = False
    discard_new_per_subject: bool = False
    sealed: bool = False
    deny_delete: bool = False
    deny_purge: bool = False
    allow_rollup_hdrs: bool = False
    # `inactive_threshold` and `max_ack_pending` when set (not 0), in nats-server's order.
    consumer_limits: dict[str, Any] = field(default_factory=dict)
    allow_msg_ttl: bool = False
    # Subject delete markers: when max_age (or a message's own TTL) removes the last
    # message of a subject, a marker with this TTL (ns) takes its place. 0: no markers.
    subject_delete_marker_ttl: int = 0
    allow_msg_counter: bool = False  # counters.py
    allow_atomic: bool = False  # batch.py: atomic batch publishes
    allow_msg_schedules: bool = False  # schedules.py: messages that publish messages
    allow_batched: bool = False  # fast_batch.py: fast batch publishes
    # "async": PubAcks do not wait for the fsync (persist.py); fixed at creation.
    persist_mode: str = "default"
    metadata: dict[str, str] = field(default_factory=dict)
    # `cluster` and `tags` when set; nothing to place on a server without a cluster.
    placement: dict[str, Any] = field(default_factory=dict)
    subject_transform: transforms.SubjectTransformConfig | None = None
    republish: transforms.RepublishConfig | None = None
    mirror: stream_sources.StreamSource | None = None
    sources: list[stream_sources.StreamSource] = field(default_factory=list)


def _no_streams(name: str) -> stream_sources.Origin | None:
    return None


def _invalid(err: str) -> ApiError:
    return api_error("STREAM_INVALID_CONFIG", err=err)


def _get(body: dict[str, Any], key: str, kind: type, default: Any) -> Any:
    return get_field(body, key, kind, default, invalid_json)


def _enum(body: dict[str, Any], key: str, allowed: tuple[str, ...], default: str) -> str:
    value = _get(body, key, str, default) or default
    if value not in allowed:
        raise invalid_json(f"{key}: {value!r} is not one of {', '.join(allowed)}")
    return str(value)


def valid_stream_name(name: str) -> bool:
    return bool(name) and len(name.encode()) <= NAME_BYTES_MAX and not (NAME_FORBIDDEN & set(name))


def parse_stream_config(
    body: dict[str, Any],
    *,
    subject_name: str | None = None,
    streams: stream_sources.Lookup = _no_streams,
) -> StreamConfig:
    """A request body → a defaulted, validated config (raises ApiError with nats-server's
    codes); `streams` finds the server's streams by name, for the checks of a mirror or
    source against its origin."""
    _refuse_unknown(body, _REQUEST_KEYS)  # decoding errors first, as nats-server
    persist_mode = _persist_mode(body)
    pedantic = _get(body, "pedantic", bool, False)
    name = _get(body, "name", str, "")
    if subject_name is not None and name != subject_name:
        raise api_error("STREAM_MISMATCH")  # an empty body too, as nats-server
    if name and ("/" in name or "\\" in name):
        raise api_error("STREAM_NAME_CONTAINS_PATH_SEPARATORS")
    if not valid_stream_name(name):
        raise _invalid("stream name is required and can not contain '.', '*', '>', '\\', '/'")
    subjects = _get(body, "subjects", list, [])
    if not all(isinstance(s, str) for s in subjects):
        raise invalid_json("subjects: expected an array of strings")
    mirror = stream_sources.parse_mirror(body)
    sourced = stream_sources.parse_sources(body)
    metadata = _get(body, "metadata", dict, {})
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
        raise invalid_json("metadata: expected an object of strings")
    config = StreamConfig(
        name=name,
        description=_get(body, "description", str, ""),
        subjects=list(subjects) or ([] if mirror is not None or sourced else [name]),
        retention=_enum(body, "retention", ("limits", "interest", "workqueue"), "limits"),
        max_consumers=_get(body, "max_consumers", int, -1),
        max_msgs=_get(body, "max_msgs", int, -1),
        max_bytes=_get(body, "max_bytes", int, -1),
        max_age=_get(body, "max_age", int, 0),
        max_msgs_per_subject=_get(body, "max_msgs_per_subject", int, -1),
        max_msg_size=_get(body, "max_msg_size", int, -1),
        discard=_enum(body, "discard", ("old", "new"), "old"),
        storage=_enum(body, "storage", ("file", "memory"), "file"),
        num_replicas=_get(body, "num_replicas", int, 1) or 1,
        no_ack=_get(body, "no_ack", bool, False),
        duplicate_window=_get(body, "duplicate_window", int, 0),
        compression=_enum(body, "compression", ("none", "s2"), "none"),
        first_seq=_get(body, "first_seq", int, 0),
        allow_direct=_get(body, "allow_direct", bool, False),
        mirror_direct=_get(body, "mirror_direct", bool, False),
        discard_new_per_subject=_get(body, "discard_new_per_subject", bool, False),
        sealed=_get(body, "sealed", bool, False),
        deny_delete=_get(body, "deny_delete", bool, False),
        deny_purge=_get(body, "deny_purge", bool, False),
        allow_rollup_hdrs=_get(body, "allow_rollup_hdrs", bool, False),
        allow_msg_ttl=_get(body, "allow_msg_ttl", bool, False),
        subject_delete_marker_ttl=_get(body, "subject_delete_marker_ttl", int, 0),
        allow_msg_counter=_get(body, "allow_msg_counter", bool, False),
        allow_atomic=_get(body, "allow_atomic", bool, False),
        allow_msg_schedules=_get(body, "allow_msg_schedules", bool, False),
        allow_batched=_get(body, "allow_batched", bool, False),
        persist_mode=persist_mode,
        metadata=versioning.user_metadata(metadata),
        placement=_placement(body),
        consumer_limits=_consumer_limits(body),
        subject_transform=transforms.parse_subject_transform(body),
        republish=transforms.parse_republish(body),
        mirror=mirror,
    )
    _validate_head(config)
    _normalise(config, sourced, pedantic=pedantic)
    _validate(config, sourced, streams, pedantic=pedantic)
    _imply_marker_settings(config, pedantic=pedantic)
    transforms.check_subject_transform(config.subject_transform)  # last, as nats-server
    config.republish = transforms.check_republish(
        config.republish,
        config.subjects,
        config.subject_transform,
        pedantic=pedantic,
        overlaps=_pair_overlaps,
    )
    return config


def _refuse_unknown(body: dict[str, Any], known: frozenset[str] | tuple[str, ...]) -> None:
    for key in body:
        if key not in known:
            raise invalid_json(f'json: unknown field "{key}"')


def _persist_mode(body: dict[str, Any]) -> str:
    """`persist_mode` as nats-server decodes it: "default" (also "" or absent) or "async";
    anything else, `null` included, is refused by its decoder (10025)."""
    if "persist_mode" not in body:
        return "default"
    value = body["persist_mode"]
    if value == "":
        return "default"
    if not isinstance(value, str) or value not in PERSIST_MODES:
        raw = json.dumps(value).replace("\\", "\\\\").replace('"', '\\"')
        raise invalid_json(f'can not unmarshal "{raw}"')
    return value


def _placement(body: dict[str, Any]) -> dict[str, Any]:
    """`placement`, its empty parts left out (an empty one is none, as nats-server has it)."""
    raw = _get(body, "placement", dict, {})
    _refuse_unknown(raw, _PLACEMENT_KEYS)
    out: dict[str, Any] = {}
    cluster = _get(raw, "cluster", str, "")
    if cluster:
        out["cluster"] = cluster
    tags = _get(raw, "tags", list, [])
    if not all(isinstance(t, str) for t in tags):
        raise invalid_json("placement.tags: expected an array of strings")
    if tags:
        out["tags"] = list(tags)
    if _get(raw, "preferred", str, ""):
        raise _invalid("preferred server not permitted in placement")
    return out


def _consumer_limits(body: dict[str, Any]) -> dict[str, Any]:
    """`consumer_limits` (the defaults and caps of the stream's consumers, applied by
    consumer_rules.py): integers, the unset (0) ones left out, in nats-server's order."""
    raw = _get(body, "consumer_limits", dict, {})
    _refuse_unknown(raw, _CONSUMER_LIMITS_KEYS)
    values = {key: _get(raw, key, int, 0) for key in _CONSUMER_LIMITS_KEYS}
    return {key: value for key, value in values.items() if value}


def _normalise(
    c: StreamConfig, sourced: list[stream_sources.StreamSource | None], *, pedantic: bool
) -> None:
    """nats-server's defaults; with `pedantic` (the request's), it refuses instead of
    changing a value the request set (10157)."""
    for key in ("max_msgs", "max_msgs_per_subject", "max_bytes", "max_msg_size", "max_consumers"):
        value = getattr(c, key)
        if value == 0 or value < -1:  # nats-server: 0 and other negatives mean "unlimited"
            if pedantic and value < -1:
                raise api_error("PEDANTIC", err=f"{key} must be set to -1")
            setattr(c, key, -1)
    if c.max_age < 0:
        raise _invalid("max age can not be negative")
    if 0 < c.max_age < MIN_DURATION_NS:
        raise _invalid("max age needs to be >= 100ms")
    if c.duplicate_window == 0 and c.mirror is None and not sourced:
        window = STREAM_DUPLICATE_WINDOW_DEFAULT_NS
        if 0 < c.max_age < window:
            if pedantic:
                raise api_error("PEDANTIC", err="duplicate window cannot be bigger than max age")
            window = c.max_age
        c.duplicate_window = window
    if c.duplicate_window < 0:
        raise _invalid("duplicates window can not be negative")


def _imply_marker_settings(c: StreamConfig, *, pedantic: bool) -> None:
    """Markers are TTL'd rollup messages, and schedules rollup messages, so nats-server
    turns on what they need, after validating the request as sent (an explicit
    `allow_rollup_hdrs` with `deny_purge` is refused; `deny_purge` alone is silently
    dropped), unless the request is pedantic."""
    if c.subject_delete_marker_ttl > 0:
        if not c.allow_msg_ttl:
            if pedantic:
                raise _invalid("subject delete marker cannot be set if message TTLs are disabled")
            c.allow_msg_ttl = True
        if not c.allow_rollup_hdrs:
            if pedantic:
                raise _invalid("subject delete marker cannot be set if roll-ups are disabled")
            c.allow_rollup_hdrs = True
            c.deny_purge = False
    if c.allow_msg_schedules and not c.allow_rollup_hdrs:
        if pedantic:
            raise _invalid("message scheduling cannot be set if roll-ups are disabled")
        c.allow_rollup_hdrs = True
        c.deny_purge = False


def _validate_head(c: StreamConfig) -> None:
    """What nats-server's `checkStreamCfg` checks before it applies defaults."""
    if len(c.description.encode()) > DESCRIPTION_BYTES_MAX:
        raise _invalid(
            f"stream description is too long, maximum allowed is {DESCRIPTION_BYTES_MAX}"
        )
    meta_size = sum(len(k.encode()) + len(v.encode()) for k, v in c.metadata.items())
    if meta_size > METADATA_BYTES_MAX:
        raise _invalid(f"stream metadata exceeds maximum size of {METADATA_BYTES_MAX} bytes")
    if c.num_replicas > 5:
        raise _invalid("maximum replicas is 5")
    if c.num_replicas < 0:
        raise api_error("REPLICAS_COUNT_CANNOT_BE_NEGATIVE")
    if c.num_replicas > 1:
        if c.persist_mode == "async":
            raise _invalid("async persist mode is not supported on replicated streams")
        raise api_error("STREAM_REPLICAS_NOT_SUPPORTED")


def _validate(
    c: StreamConfig,
    sourced: list[stream_sources.StreamSource | None],
    streams: stream_sources.Lookup,
    *,
    pedantic: bool,
) -> None:
    """nats-server's checks after the defaults; `sourced` are the decoded `sources`, kept
    in `c` once they pass."""
    if 0 < c.duplicate_window < MIN_DURATION_NS:
        raise _invalid("duplicates window needs to be >= 100ms")
    if c.max_age and c.duplicate_window > c.max_age:
        raise _invalid("duplicates window can not be larger then max age")
    if c.sealed:
        raise _invalid("stream configuration for create can not be sealed")
    if c.mirror_direct and c.mirror is None:
        raise _invalid("stream has no mirror but does have mirror direct")
    if c.deny_purge and c.allow_rollup_hdrs:
        raise _invalid("roll-ups require the purge permission")
    if c.allow_msg_counter:
        _validate_counter(c)
    if c.subject_delete_marker_ttl < 0:
        raise _invalid("subject delete marker TTL must not be negative")
    if 0 < c.subject_delete_marker_ttl < MIN_MARKER_TTL_NS:
        raise _invalid("subject delete marker TTL must be at least 1 second")
    if c.discard_new_per_subject and (c.discard != "new" or c.max_msgs_per_subject <= 0):
        raise _invalid(
            "discard new per subject requires discard new policy to be set"
            if c.discard != "new"
            else "discard new per subject requires max msgs per subject > 0"
        )
    if c.allow_msg_schedules and c.discard == "new":
        raise _invalid("message scheduling cannot use discard new")
    if c.persist_mode == "async" and c.storage != "file":
        raise _invalid("async persist mode is only supported on file storage")
    if c.persist_mode == "async" and c.allow_atomic:
        raise _invalid("async persist mode is not supported with atomic batch publish")
    if c.first_seq < 0:
        raise _invalid("first sequence must be positive")
    shape = stream_sources.StreamShape(
        name=c.name,
        first_seq=c.first_seq,
        subjects=c.subjects,
        max_msg_size=c.max_msg_size,
        allow_msg_counter=c.allow_msg_counter,
        subject_delete_marker_ttl=c.subject_delete_marker_ttl,
        mirror_direct=c.mirror_direct,
        allow_msg_schedules=c.allow_msg_schedules,
        allow_atomic=c.allow_atomic,
        allow_batched=c.allow_batched,
    )
    c.mirror_direct = stream_sources.check_mirror_and_sources(
        c.mirror, sourced, shape, overlaps=_pair_overlaps, lookup=streams, pedantic=pedantic
    )
    c.sources = [s for s in sourced if s is not None]
    for subject in c.subjects:
        if not is_valid_subject(subject.encode()):
            raise _invalid("invalid subject")
        if subject == ">" and not c.no_ack:
            raise _invalid("subjects that overlap with jetstream api require no-ack to be true")
        if _overlaps_system(subject) and not c.no_ack:
            raise _invalid("subjects that overlap with jetstream api require no-ack to be true")
    for i, a in enumerate(c.subjects):
        for b in c.subjects[i + 1 :]:
            if _pair_overlaps(a, b):
                raise _invalid(f'subject "{a}" overlaps with "{b}"')


def _validate_counter(c: StreamConfig) -> None:
    """What a counter stream cannot be (nats-server's order)."""
    if c.discard == "new":
        raise _invalid("counter stream cannot use discard new")
    if c.allow_msg_ttl:
        raise _invalid("counter stream cannot use message TTLs")
    if c.allow_msg_schedules:
        raise _invalid("counter stream cannot use message schedules")
    if c.retention != "limits":
        raise _invalid("counter stream can only use limits retention")


def _overlaps_system(subject: str) -> bool:
    for reserved, allowed in (("$JS.>", "$JS.EVENT.>"), ("$JSC.>", None), ("$NRG.>", None)):
        if _pair_overlaps(subject, reserved):
            if allowed is not None and subset_match(allowed.encode(), subject.encode()):
                continue
            return True
    return False


def _pair_overlaps(a: str, b: str) -> bool:
    """Could one subject be matched by both patterns?"""
    ta, tb = a.split("."), b.split(".")
    for i in range(max(len(ta), len(tb))):
        x = ta[i] if i < len(ta) else None
        y = tb[i] if i < len(tb) else None
        if x == ">" or y == ">":
            return x is not None and y is not None
        if x is None or y is None:
            return False
        if x != "*" and y != "*" and x != y:
            return False
    return True


def subjects_overlap(a: list[str], b: list[str]) -> bool:
    return any(_pair_overlaps(x, y) for x in a for y in b)


def same_config(a: StreamConfig, b: StreamConfig) -> bool:
    """Equal after defaults, ignoring server-managed `_nats.*` metadata (idempotent create)."""
    return dataclasses.asdict(a) == dataclasses.asdict(b)


def check_update(old: StreamConfig, new: StreamConfig) -> None:
    """Raise 10052 (or 10055) for changes nats-server does not allow on STREAM.UPDATE."""
    if new.storage != old.storage:
        raise _invalid("stream configuration update can not change storage type")
    if (old.retention == "workqueue") != (new.retention == "workqueue"):
        raise _invalid(
            "stream configuration update can not change retention policy to/from workqueue"
        )
    if old.sealed and not new.sealed:
        raise _invalid("stream configuration update can not unseal a sealed stream")
    if old.deny_delete and not new.deny_delete:
        raise _invalid("stream configuration update can not cancel deny message deletes")
    if old.deny_purge and not new.deny_purge:
        raise _invalid("stream configuration update can not cancel deny purge")
    if new.mirror is not None and new.mirror != old.mirror:  # removing it promotes a mirror
        raise api_error("STREAM_MIRROR_NOT_UPDATABLE")
    if old.allow_msg_ttl and not new.allow_msg_ttl:
        raise _invalid("stream configuration update can not disable message TTL")
    if new.allow_msg_counter != old.allow_msg_counter:
        raise _invalid("stream configuration update can not change message counter setting")
    if old.allow_msg_schedules and not new.allow_msg_schedules:
        raise _invalid("message schedules can not be disabled")
    if new.persist_mode != old.persist_mode:
        raise _invalid("stream configuration update can not change persist mode")
    if new.first_seq != old.first_seq and new.first_seq:
        raise _invalid("stream configuration update can not change first sequence")


def parse_stream_update(
    body: dict[str, Any],
    *,
    subject_name: str,
    streams: stream_sources.Lookup = _no_streams,
) -> StreamConfig:
    """Like create, except that `sealed: true` is allowed (sealing happens by update)."""
    sealed = body.get("sealed") is True
    # nats-server validates the configuration before it compares the names.
    config = parse_stream_config({**body, "sealed": False}, streams=streams)
    if config.name != subject_name:
        raise api_error("STREAM_MISMATCH")
    if sealed:
        # As nats-server: a sealed stream also denies deletes and purges and discards new.
        config.sealed = config.deny_delete = config.deny_purge = True
        config.discard = "new"
    return config


def stream_config_to_json(
    c: StreamConfig, *, server_version: str | None = None, api_level: int | None = None
) -> dict[str, Any]:
    """The reference server's key order; optional keys only when set (wire reference §3.1)."""
    out: dict[str, Any] = {"name": c.name}
    if c.description:
        out["description"] = c.description
    if c.subjects:
        out["subjects"] = list(c.subjects)
    out.update(
        retention=c.retention,
        max_consumers=c.max_consumers,
        max_msgs=c.max_msgs,
        max_bytes=c.max_bytes,
        max_age=c.max_age,
        max_msgs_per_subject=c.max_msgs_per_subject,
        max_msg_size=c.max_msg_size,
        discard=c.discard,
        storage=c.storage,
        num_replicas=c.num_replicas,
    )
    if c.no_ack:
        out["no_ack"] = True
    if c.duplicate_window:  # 0 only for a mirror or a sourcing stream that leaves it unset
        out["duplicate_window"] = c.duplicate_window
    if c.placement:
        out["placement"] = dict(c.placement)
    if c.mirror is not None:
        out["mirror"] = stream_sources.source_json(c.mirror)
    if c.sources:
        out["sources"] = [stream_sources.source_json(s) for s in c.sources]
    out["compression"] = c.compression
    if c.first_seq:
        out["first_seq"] = c.first_seq
    if c.subject_transform is not None:
        out["subject_transform"] = transforms.subject_transform_json(c.subject_transform)
    if c.republish is not None:
        out["republish"] = transforms.republish_json(c.republish)
    out["allow_direct"] = c.allow_direct
    out["mirror_direct"] = c.mirror_direct
    if c.discard_new_per_subject:
        out["discard_new_per_subject"] = True
    out.update(
        sealed=c.sealed,
        deny_delete=c.deny_delete,
        deny_purge=c.deny_purge,
        allow_rollup_hdrs=c.allow_rollup_hdrs,
        consumer_limits=dict(c.consumer_limits),
        allow_msg_ttl=c.allow_msg_ttl,
    )
    if c.subject_delete_marker_ttl:
        out["subject_delete_marker_ttl"] = c.subject_delete_marker_ttl
    if c.allow_msg_counter:
        out["allow_msg_counter"] = True
    if c.allow_atomic:
        out["allow_atomic"] = True
    if c.allow_msg_schedules:
        out["allow_msg_schedules"] = True
    if c.persist_mode != "default":
        out["persist_mode"] = c.persist_mode
    if c.allow_batched:
        out["allow_batched"] = True
    metadata = dict(c.metadata)
    metadata["_nats.req.level"] = str(_required_api_level(c))
    if server_version is not None:
        metadata["_nats.ver"] = server_version
        metadata["_nats.level"] = str(api_level or 0)
    out["metadata"] = dict(sorted(metadata.items()))
    return out


def _required_api_level(c: StreamConfig) -> int:
    """nats-server's `_nats.req.level`: the API level of the newest feature the stream
    uses (TTLs 1; counters, atomic batches, schedules and async persistence 2, nats-server
    2.12; fast batches 4, nats-server 2.14)."""
    if c.allow_batched:
        return 4
    if c.allow_msg_counter or c.allow_atomic or c.allow_msg_schedules or c.persist_mode == "async":
        return 2
    return 1 if c.allow_msg_ttl else 0
