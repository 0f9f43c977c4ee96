"""Options of the `jetstream` data source: parsed once, validated early, named in every error.

Spark hands a data source its options as strings with lower-cased keys. This module turns them
into frozen, picklable dataclasses before any connection is made, so a bad value fails the
query at planning time with a message that names the option, instead of surfacing as a
timeout in an executor. Names and meanings follow Spark's Kafka source where one exists
(`startingOffsets`, `maxRecordsPerTrigger`...), because that is what Spark users know; a name
the query does not take (a typo, a Kafka option, an option of another kind of query) is
refused with what to use instead (`check_names`, from the catalogue in `names.py`), never
ignored.

Nothing here imports pyspark, pyarrow or nats: the module is pure and unit-tested alone.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from brook_spark.names import Query, name_problem

DEFAULT_SERVERS = "nats://127.0.0.1:4222"
DEFAULT_MAX_RECORDS_PER_PARTITION = 100_000
DEFAULT_MAX_TRIGGER_DELAY_S = 15 * 60.0  # Kafka's default for maxTriggerDelay
DEFAULT_MAX_PENDING = 4096  # publishes in flight per writer task
DEFAULT_COMMIT_BUCKET = "SPARK_COMMITS"
DEFAULT_REQUEST_TIMEOUT_S = 30.0


# nats.connect keyword arguments that `nats.<name>` may set, with their types. Callbacks and
# objects cannot travel as strings, and the credentials have their own options (`names.py`).
NATS_PASS_THROUGH: dict[str, type] = {
    "name": str,
    "pedantic": bool,
    "verbose": bool,
    "allow_reconnect": bool,
    "connect_timeout": float,
    "reconnect_time_wait": float,
    "max_reconnect_attempts": int,
    "ping_interval": float,
    "max_outstanding_pings": int,
    "dont_randomize": bool,
    "flusher_queue_size": int,
    "no_echo": bool,
    "tls_handshake_first": bool,
    "drain_timeout": float,
    "inbox_prefix": str,
    "pending_size": int,
    "flush_timeout": float,
}

_STREAM_NAME = re.compile(r"^[^\s.*>/\\]+$")
_BUCKET_NAME = re.compile(r"^[a-zA-Z0-9_-]+$")
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|sec|m|min|h|d)?\s*$", re.IGNORECASE)
_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}


class OptionError(ValueError):
    """A bad or missing option; the message names the option as the user spells it."""


# --------------------------------------------------------------------------- value parsers


def _bool(name: str, value: str) -> bool:
    lowered = value.strip().lower()
    if lowered in ("true", "1", "yes"):
        return True
    if lowered in ("false", "0", "no"):
        return False
    raise OptionError(f"option '{name}' must be true or false, got {value!r}")


def _int(name: str, value: str, minimum: int) -> int:
    try:
        number = int(value.strip())
    except ValueError:
        raise OptionError(f"option '{name}' must be an integer, got {value!r}") from None
    if number < minimum:
        raise OptionError(f"option '{name}' must be at least {minimum}, got {number}")
    return number


def parse_duration_s(name: str, value: str) -> float:
    """'500ms', '10s', '15m', '1h', '2d' or plain seconds, as Spark's time strings."""
    match = _DURATION.match(value)
    if match is None:
        raise OptionError(f"option '{name}' must be a duration like '30s' or '15m', got {value!r}")
    unit = (match.group(2) or "s").lower()
    factor = 86400.0 if unit == "d" else _DURATION_UNITS[unit]
    return float(match.group(1)) * factor


def parse_timestamp_ns(name: str, value: str) -> int:
    """Epoch milliseconds (as Kafka's startingTimestamp) or an ISO-8601 time with a zone."""
    text = value.strip()
    if re.fullmatch(r"-?\d+", text):
        millis = int(text)
        if millis < 0:
            raise OptionError(f"option '{name}' must not be negative, got {value!r}")
        return millis * 1_000_000
    try:
        parsed = dt.datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise OptionError(
            f"option '{name}' must be epoch milliseconds or an ISO-8601 time such as "
            f"'2025-01-31T12:00:00Z', got {value!r}"
        ) from None
    if parsed.tzinfo is None:
        raise OptionError(
            f"option '{name}' needs a time zone (for example a trailing Z): {value!r}"
        )
    delta = parsed - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    return (delta.days * 86400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1000


def format_rfc3339_ns(ts_ns: int) -> str:
    """The RFC 3339 form with nanoseconds that JetStream's `start_time` accepts."""
    seconds, nanos = divmod(ts_ns, 1_000_000_000)
    base = dt.datetime.fromtimestamp(seconds, tz=dt.UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{base}.{nanos:09d}Z"


def validate_subject(subject: str, *, wildcards: bool) -> str | None:
    """None when valid; otherwise why not. Mirrors nats-server's subject rules."""
    if not subject:
        return "it is empty"
    if any(ch.isspace() for ch in subject):
        return "it contains whitespace"
    tokens = subject.split(".")
    for i, token in enumerate(tokens):
        if not token:
            return "it has an empty token"
        if token == ">" and i != len(tokens) - 1:
            return "'>' must be the last token"
        if not wildcards and token in ("*", ">"):
            return "wildcards cannot be published to"
        if len(token) > 1 and ("*" in token or ">" in token):
            return "wildcards must be whole tokens"
    return None


# --------------------------------------------------------------------------- offsets


@dataclass(frozen=True)
class OffsetSpec:
    """Where a read starts or ends: earliest, latest, or an explicit stream sequence."""

    kind: Literal["earliest", "latest", "seq"]
    seq: int = 0

    def resolve(self, first_seq: int, last_seq: int) -> int:
        if self.kind == "earliest":
            return max(first_seq, 1)
        if self.kind == "latest":
            return last_seq + 1
        return self.seq


def parse_offset(name: str, value: str, stream: str, *, allow_earliest: bool) -> OffsetSpec:
    """`earliest`, `latest`, a sequence, or Kafka-shaped JSON `{"<stream>": seq}`.

    In JSON, -2 means earliest and -1 latest, as in Kafka's per-partition offsets.
    """
    text = value.strip()
    lowered = text.lower()
    if lowered in ("earliest", "latest"):
        if lowered == "earliest" and not allow_earliest:
            raise OptionError(f"option '{name}' cannot be 'earliest'")
        return OffsetSpec(lowered)  # type: ignore[arg-type]
    if re.fullmatch(r"\d+", text):
        return _seq_offset(name, int(text))
    if text.startswith("{"):
        try:
            parsed = json.loads(text)
        except ValueError:
            raise OptionError(f"option '{name}' is not valid JSON: {value!r}") from None
        if not isinstance(parsed, dict) or set(parsed) != {stream}:
            raise OptionError(
                f"option '{name}' must name exactly the stream being read, as "
                f'{{"{stream}": <sequence>}}, got {value!r}'
            )
        seq = parsed[stream]
        if isinstance(seq, bool) or not isinstance(seq, int):
            raise OptionError(f"option '{name}': the sequence must be an integer, got {seq!r}")
        if seq == -2:
            if not allow_earliest:
                raise OptionError(f"option '{name}' cannot be earliest (-2)")
            return OffsetSpec("earliest")
        if seq == -1:
            return OffsetSpec("latest")
        return _seq_offset(name, seq)
    raise OptionError(
        f"option '{name}' must be 'earliest', 'latest', a stream sequence or JSON like "
        f'{{"{stream}": 42}}, got {value!r}'
    )


def _seq_offset(name: str, seq: int) -> OffsetSpec:
    if seq < 1:
        raise OptionError(f"option '{name}': stream sequences start at 1, got {seq}")
    return OffsetSpec("seq", seq)


# --------------------------------------------------------------------------- connection


@dataclass(frozen=True)
class ConnectOptions:
    """Everything needed to open a nats-py connection; hashable, so it keys the cache."""

    servers: tuple[str, ...]
    user: str | None = None
    password: str | None = None
    token: str | None = None
    nkey_seed: str | None = None
    nkey_seed_file: str | None = None
    creds_file: str | None = None
    tls_ca_file: str | None = None
    tls_cert_file: str | None = None
    tls_key_file: str | None = None
    tls_hostname: str | None = None
    extra: tuple[tuple[str, Any], ...] = ()
    request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S

    def connect_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for `nats.connect`, except the TLS context (built by the client)."""
        kwargs: dict[str, Any] = {"servers": list(self.servers), "allow_reconnect": True}
        if self.user is not None:
            kwargs["user"] = self.user
            kwargs["password"] = self.password or ""
        if self.token is not None:
            kwargs["token"] = self.token
        if self.nkey_seed is not None:
            kwargs["nkeys_seed_str"] = self.nkey_seed
        if self.nkey_seed_file is not None:
            kwargs["nkeys_seed"] = self.nkey_seed_file
        if self.creds_file is not None:
            kwargs["user_credentials"] = self.creds_file
        if self.tls_hostname is not None:
            kwargs["tls_hostname"] = self.tls_hostname
        kwargs.update(dict(self.extra))
        return kwargs

    @property
    def uses_tls(self) -> bool:
        return (
            any(s.startswith("tls://") for s in self.servers)
            or self.tls_ca_file is not None
            or self.tls_cert_file is not None
        )


def _pass_through(key: str, value: str) -> tuple[str, Any]:
    name = key[len("nats.") :]
    kind = NATS_PASS_THROUGH.get(name)
    if kind is None:
        known = ", ".join(f"nats.{k}" for k in sorted(NATS_PASS_THROUGH))
        raise OptionError(f"option 'nats.{name}' is not a nats.connect setting; known: {known}")
    option = f"nats.{name}"
    if kind is bool:
        return name, _bool(option, value)
    if kind is int:
        return name, _int(option, value, 0)
    if kind is float:
        return name, parse_duration_s(option, value)
    return name, value


def parse_connect(options: Mapping[str, str]) -> ConnectOptions:
    servers_text = options.get("servers", DEFAULT_SERVERS)
    servers = tuple(s.strip() for s in servers_text.split(",") if s.strip())
    if not servers:
        raise OptionError("option 'servers' is empty; give a URL such as nats://127.0.0.1:4222")
    for url in servers:
        if not re.fullmatch(r"(nats|tls|ws|wss)://[^\s/]+", url) and not re.fullmatch(
            r"[^\s/:]+:\d+", url
        ):
            raise OptionError(f"option 'servers': {url!r} is not a nats:// URL")
    if "password" in options and "user" not in options:
        raise OptionError("option 'password' needs option 'user'")
    if "tlskeyfile" in options and "tlscertfile" not in options:
        raise OptionError("option 'tlsKeyFile' needs option 'tlsCertFile'")
    if "tlscertfile" in options and "tlskeyfile" not in options:
        raise OptionError("option 'tlsCertFile' needs option 'tlsKeyFile'")
    extra = tuple(sorted(_pass_through(k, v) for k, v in options.items() if k.startswith("nats.")))
    timeout = parse_duration_s("requestTimeout", options.get("requesttimeout", "30s"))
    if timeout <= 0:
        raise OptionError("option 'requestTimeout' must be positive")
    return ConnectOptions(
        servers=servers,
        user=options.get("user"),
        password=options.get("password"),
        token=options.get("token"),
        nkey_seed=options.get("nkeyseed"),
        nkey_seed_file=options.get("nkeyseedfile"),
        creds_file=options.get("credsfile"),
        tls_ca_file=options.get("tlscafile"),
        tls_cert_file=options.get("tlscertfile"),
        tls_key_file=options.get("tlskeyfile"),
        tls_hostname=options.get("tlshostname"),
        extra=extra,
        request_timeout_s=timeout,
    )


def check_names(options: Mapping[str, str], query: Query) -> None:
    """Refuse an option name `query` does not take (`names.name_problem`)."""
    problem = name_problem(options, query)
    if problem is not None:
        raise OptionError(problem)


def _lowered(options: Mapping[str, str]) -> dict[str, str]:
    """Option names are case-insensitive in Spark; Spark hands them lower-cased, others may not."""
    return {key.lower(): value for key, value in options.items()}


# --------------------------------------------------------------------------- reader options


@dataclass(frozen=True)
class ReadOptions:
    connect: ConnectOptions
    stream: str
    filters: tuple[str, ...]
    starting: OffsetSpec
    starting_ts_ns: int | None
    ending: OffsetSpec
    ending_ts_ns: int | None
    max_records_per_trigger: int | None
    min_records_per_trigger: int | None
    max_trigger_delay_s: float
    min_partitions: int
    max_records_per_partition: int
    fail_on_data_loss: bool
    include_headers: bool

    def replace(self, **changes: Any) -> ReadOptions:
        return dataclasses.replace(self, **changes)


def _filters(value: str | None) -> tuple[str, ...]:
    if value is None or not value.strip():
        return ()
    text = value.strip()
    if text.startswith("["):
        try:
            parsed = json.loads(text)
        except ValueError:
            raise OptionError(
                f"option 'filterSubjects' is not a valid JSON list: {value!r}"
            ) from None
        if not isinstance(parsed, list) or not all(isinstance(s, str) for s in parsed):
            raise OptionError("option 'filterSubjects' must be a list of subjects")
        subjects = [s.strip() for s in parsed]
    else:
        subjects = [s.strip() for s in text.split(",")]
    for subject in subjects:
        problem = validate_subject(subject, wildcards=True)
        if problem:
            raise OptionError(f"option 'filterSubjects': {subject!r} is not a subject: {problem}")
    if len(set(subjects)) != len(subjects):
        raise OptionError("option 'filterSubjects' lists a subject twice")
    # One filter that takes everything is no filter; it keeps the direct-get path.
    if subjects == [">"]:
        return ()
    return tuple(subjects)


def parse_stream_name(options: Mapping[str, str]) -> str:
    stream = options.get("stream")
    if stream is None or not stream.strip():
        raise OptionError("option 'stream' is required: the name of the JetStream stream")
    stream = stream.strip()
    if not _STREAM_NAME.match(stream):
        raise OptionError(f"option 'stream': {stream!r} is not a valid stream name")
    return stream


def parse_read(options: Mapping[str, str], *, streaming: bool) -> ReadOptions:
    """Validate everything a batch (`streaming=False`) or streaming read needs."""
    options = _lowered(options)
    check_names(options, Query.READ_STREAM if streaming else Query.READ)
    connect = parse_connect(options)
    stream = parse_stream_name(options)
    default_start = "latest" if streaming else "earliest"
    starting = parse_offset(
        "startingOffsets",
        options.get("startingoffsets", default_start),
        stream,
        allow_earliest=True,
    )
    starting_ts = (
        parse_timestamp_ns("startingTimestamp", options["startingtimestamp"])
        if "startingtimestamp" in options
        else None
    )
    ending = parse_offset(
        "endingOffsets", options.get("endingoffsets", "latest"), stream, allow_earliest=False
    )
    ending_ts = (
        parse_timestamp_ns("endingTimestamp", options["endingtimestamp"])
        if "endingtimestamp" in options
        else None
    )
    max_rpt = (
        _int("maxRecordsPerTrigger", options["maxrecordspertrigger"], 1)
        if "maxrecordspertrigger" in options
        else None
    )
    min_rpt = (
        _int("minRecordsPerTrigger", options["minrecordspertrigger"], 1)
        if "minrecordspertrigger" in options
        else None
    )
    if max_rpt is not None and min_rpt is not None and min_rpt > max_rpt:
        raise OptionError(
            f"option 'minRecordsPerTrigger' ({min_rpt}) exceeds 'maxRecordsPerTrigger' ({max_rpt})"
        )
    if "maxtriggerdelay" in options and min_rpt is None:
        raise OptionError("option 'maxTriggerDelay' needs option 'minRecordsPerTrigger'")
    delay = (
        parse_duration_s("maxTriggerDelay", options["maxtriggerdelay"])
        if "maxtriggerdelay" in options
        else DEFAULT_MAX_TRIGGER_DELAY_S
    )
    return ReadOptions(
        connect=connect,
        stream=stream,
        filters=_filters(options.get("filtersubjects")),
        starting=starting,
        starting_ts_ns=starting_ts,
        ending=ending,
        ending_ts_ns=ending_ts,
        max_records_per_trigger=max_rpt,
        min_records_per_trigger=min_rpt,
        max_trigger_delay_s=delay,
        min_partitions=_int("minPartitions", options.get("minpartitions", "1"), 1),
        max_records_per_partition=_int(
            "maxRecordsPerPartition",
            options.get("maxrecordsperpartition", str(DEFAULT_MAX_RECORDS_PER_PARTITION)),
            1,
        ),
        fail_on_data_loss=_bool("failOnDataLoss", options.get("failondataloss", "true")),
        include_headers=_bool("includeHeaders", options.get("includeheaders", "true")),
    )


# --------------------------------------------------------------------------- writer options


@dataclass(frozen=True)
class WriteOptions:
    connect: ConnectOptions
    stream: str | None
    subject: str | None
    write_id: str | None
    msg_id_column: str | None
    max_pending: int
    commit_bucket: str
    fast_batch: bool = True  # fastbatch.py: a task's rows as one fast batch if the stream allows


def parse_write(options: Mapping[str, str], *, streaming: bool) -> WriteOptions:
    """Validate everything a batch (`streaming=False`) or streaming write needs."""
    options = _lowered(options)
    check_names(options, Query.WRITE_STREAM if streaming else Query.WRITE)
    connect = parse_connect(options)
    stream = parse_stream_name(options) if "stream" in options else None
    subject = options.get("subject")
    if subject is not None:
        problem = validate_subject(subject.strip(), wildcards=False)
        if problem:
            raise OptionError(f"option 'subject': {subject!r} cannot be published to: {problem}")
        subject = subject.strip()
    write_id = options.get("writeid")
    if write_id is not None and (not write_id.strip() or any(c.isspace() for c in write_id)):
        raise OptionError(f"option 'writeId' must be a non-empty word, got {write_id!r}")
    bucket = options.get("commitbucket", DEFAULT_COMMIT_BUCKET)
    if not _BUCKET_NAME.match(bucket):
        raise OptionError(f"option 'commitBucket': {bucket!r} is not a valid bucket name")
    column = options.get("msgidcolumn")
    if column is not None and not column.strip():
        raise OptionError("option 'msgIdColumn' is empty")
    return WriteOptions(
        connect=connect,
        stream=stream,
        subject=subject,
        write_id=write_id,
        msg_id_column=column,
        max_pending=_int("maxPending", options.get("maxpending", str(DEFAULT_MAX_PENDING)), 1),
        commit_bucket=bucket,
        fast_batch=_bool("fastBatch", options.get("fastbatch", "true")),
    )
