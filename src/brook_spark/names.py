"""The option names of the `jetstream` data source: which each kind of query takes, and what
to tell a user who gives another.

Apart from `options.py`, which parses the values, because a name is judged before any
value, against this catalogue alone: every name the query does not take (a typo, a Kafka
option, an option of another kind of query) is refused with what to use instead. Pure data
and one function that says what is wrong (`name_problem`); `options.py` raises it as an
`OptionError`.
"""

from __future__ import annotations

import difflib
import enum
from collections.abc import Mapping


class Query(enum.Enum):
    """The four kinds of query a data source serves; the value says it in the user's terms."""

    READ = "batch reads (spark.read)"
    READ_STREAM = "streaming reads (spark.readStream)"
    WRITE = "batch writes (df.write)"
    WRITE_STREAM = "streaming writes (df.writeStream)"


READS = frozenset({Query.READ, Query.READ_STREAM})
WRITES = frozenset({Query.WRITE, Query.WRITE_STREAM})
ALL_QUERIES = READS | WRITES

# Every option the source takes, as users spell it, and the queries it applies to. Any other
# name is refused: an option that is silently ignored gives a different job than asked for.
OPTIONS: dict[str, frozenset[Query]] = {
    "servers": ALL_QUERIES,
    "requestTimeout": ALL_QUERIES,
    **dict.fromkeys(
        (
            "user",
            "password",
            "token",
            "nkeySeed",
            "nkeySeedFile",
            "credsFile",
            "tlsCaFile",
            "tlsCertFile",
            "tlsKeyFile",
            "tlsHostname",
        ),
        ALL_QUERIES,
    ),
    "stream": ALL_QUERIES,  # writes: every publish expects this stream
    "filterSubjects": READS,
    "startingOffsets": READS,
    "startingTimestamp": READS,
    "endingOffsets": frozenset({Query.READ}),
    "endingTimestamp": frozenset({Query.READ}),
    "maxRecordsPerTrigger": frozenset({Query.READ_STREAM}),
    "minRecordsPerTrigger": frozenset({Query.READ_STREAM}),
    "maxTriggerDelay": frozenset({Query.READ_STREAM}),
    "minPartitions": READS,
    "maxRecordsPerPartition": READS,
    "failOnDataLoss": READS,
    "includeHeaders": READS,
    "subject": WRITES,
    "msgIdColumn": WRITES,
    "maxPending": WRITES,
    "fastBatch": WRITES,
    "writeId": frozenset({Query.WRITE}),
    "commitBucket": frozenset({Query.WRITE_STREAM}),
    # Spark's own, put on a streaming sink's options by `.option("checkpointLocation", ...)`
    # and `.queryName(...)`; Spark hands a source nothing else of its own (a `path` only
    # when the user passes one to load()/save()/start()).
    "checkpointLocation": frozenset({Query.WRITE_STREAM}),
    "queryName": frozenset({Query.WRITE_STREAM}),
}
_SPELLED = {name.lower(): name for name in OPTIONS}

_CONNECTION = (
    "the connection options: 'user' + 'password', 'token', 'nkeySeed', 'nkeySeedFile', "
    "'credsFile', 'tlsCaFile', 'tlsCertFile' + 'tlsKeyFile', 'tlsHostname', "
    "or a nats.connect setting as 'nats.<name>'"
)
_NO_GROUPS = "none: offsets are stream sequences kept in Spark's checkpoint; no group is joined"
_NO_RETRIES = "none: a request waits up to 'requestTimeout' for its reply"

# Options of Spark's Kafka source and sink (lower-cased), their spelling, and what the
# jetstream source takes instead, for users moving a job over. `kafka.<setting>` options
# other than these are connection settings.
KAFKA_OPTIONS: dict[str, tuple[str, str]] = {
    name.lower(): (name, instead)
    for name, instead in (
        ("subscribe", "'stream' (one stream per query), and 'filterSubjects' for its subjects"),
        (
            "subscribePattern",
            "'stream' (one stream per query); wildcard subjects in it go in 'filterSubjects'",
        ),
        (
            "assign",
            "'stream'; a stream has no partitions (Spark's partitions are sequence ranges: "
            "'minPartitions', 'maxRecordsPerPartition')",
        ),
        ("topic", "'subject' or a 'subject' column (writes); 'stream' (reads)"),
        ("maxOffsetsPerTrigger", "'maxRecordsPerTrigger'"),
        ("minOffsetsPerTrigger", "'minRecordsPerTrigger'"),
        ("startingOffsetsByTimestamp", "'startingTimestamp' (one time for the stream)"),
        ("endingOffsetsByTimestamp", "'endingTimestamp' (one time for the stream)"),
        (
            "startingOffsetsByTimestampStrategy",
            "none: a read starts at the first message stored at or after 'startingTimestamp'",
        ),
        ("groupIdPrefix", _NO_GROUPS),
        ("kafka.group.id", _NO_GROUPS),
        ("kafka.bootstrap.servers", "'servers' (comma-separated nats:// URLs)"),
        ("kafkaConsumer.pollTimeoutMs", "'requestTimeout'"),
        ("fetchOffset.numRetries", _NO_RETRIES),
        ("fetchOffset.retryIntervalMs", _NO_RETRIES),
    )
}


def name_problem(options: Mapping[str, str], query: Query) -> str | None:
    """None when `query` takes every option name (keys lower-cased, as Spark hands them);
    otherwise the refusal of the first it does not take, saying what to use instead: the
    queries it applies to, the jetstream source's counterpart of a Kafka option, the known
    name it looks like a misspelling of, or the known names."""
    for key in options:
        if key.startswith("nats."):
            continue  # checked with the connection options (`options._pass_through`)
        name = _SPELLED.get(key)
        if name is not None:
            if query not in OPTIONS[name]:
                return f"option '{name}' applies only to {_where(OPTIONS[name])}"
            continue
        if key in KAFKA_OPTIONS:
            kafka, instead = KAFKA_OPTIONS[key]
            return (
                f"unknown option '{kafka}' (Spark's Kafka source); the jetstream source "
                f"uses {instead}"
            )
        if key.startswith("kafka."):
            return (
                f"unknown option '{key}' (a Kafka client setting); the jetstream source "
                f"uses {_CONNECTION}"
            )
        if key == "path":
            return (
                "the jetstream source takes no path (load()/save()/start() without one): "
                "name the stream with option 'stream' (reads), the subject with option "
                "'subject' or a 'subject' column (writes)"
            )
        close = difflib.get_close_matches(key, list(_SPELLED), n=1, cutoff=0.8)
        if close:
            return f"unknown option '{key}'; did you mean '{_SPELLED[close[0]]}'?"
        known = ", ".join(sorted((n for n, q in OPTIONS.items() if query in q), key=str.lower))
        return (
            f"unknown option '{key}' for {query.value}; the jetstream source takes {known} "
            "and 'nats.<setting>' (docs/spark.md)"
        )
    return None


def _where(queries: frozenset[Query]) -> str:
    if queries == READS:
        return "reads (spark.read and spark.readStream)"
    if queries == WRITES:
        return "writes (df.write and df.writeStream)"
    return " and ".join(q.value for q in Query if q in queries)
