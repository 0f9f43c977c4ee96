"""Every default and hard limit of Brook, in one place, units in names: the core server's,
monitoring's and JetStream's (streams, consumers, snapshots, the store's free space).

Values follow nats-server's `const.go` and `opts.go` where Brook mirrors a nats-server
setting, so a client tuned for nats-server sees the same envelope. A leaf: nothing here
imports anything else of Brook (an import-linter contract, `pyproject.toml`).
"""

from typing import Final

DEFAULT_HOST: Final = "0.0.0.0"
DEFAULT_PORT: Final = 4222

# The nats-server release Brook presents itself as, in INFO and /varz, and with it the
# JetStream API level of that release ($JS.API.INFO, `_nats.level`; ADR-44): one decision
# (ADR 0003). The rule: the newest release whose client-gated features Brook serves.
# 2.12.0 (level 2): counters, atomic batches, schedules, persist_mode, the `prioritized`
# priority policy and mirror promotion are served. 2.12.5 (level 3) would promise a
# source's `window_size`, which Brook does not serve.
NATS_COMPAT_VERSION: Final = "2.12.0"
# nats-server releases and the API level each brought (its `JSApiLevel`).
NATS_API_LEVELS: Final = {"2.11.0": 1, "2.12.0": 2, "2.12.5": 3, "2.14.0": 4, "2.15.0": 5}
JETSTREAM_API_LEVEL: Final = NATS_API_LEVELS[NATS_COMPAT_VERSION]
PROTOCOL_VERSION: Final = 1

MAX_PAYLOAD_BYTES: Final = 1024 * 1024
MAX_PAYLOAD_BYTES_HARD: Final = 64 * 1024 * 1024
# Above this, the start-up log warns (nats-server's MAX_PAYLOAD_MAX_SIZE).
MAX_PAYLOAD_BYTES_WARN: Final = 8 * 1024 * 1024
MAX_CONTROL_LINE_BYTES: Final = 4096
MAX_CONNECTIONS: Final = 64 * 1024
MAX_SUBSCRIPTIONS_PER_CONNECTION: Final = 0  # 0 = unlimited, as nats-server
MAX_PENDING_BYTES: Final = 64 * 1024 * 1024
WRITE_DEADLINE_S: Final = 10.0
# Output queued for one connection within a loop turn is written at once past this size.
OUTPUT_FLUSH_EAGER_BYTES: Final = 64 * 1024
PING_INTERVAL_S: Final = 120.0
FIRST_PING_INTERVAL_S: Final = 2.0
MAX_PINGS_OUT: Final = 2
AUTH_TIMEOUT_S: Final = 2.0
TLS_TIMEOUT_S: Final = 2.0  # nats-server's TLS_TIMEOUT: the whole handshake, once begun
# `handshake_first: auto`: how long a client may stay silent before it gets INFO in plain
# text (nats-server's DEFAULT_TLS_HANDSHAKE_FIRST_FALLBACK_DELAY).
TLS_HANDSHAKE_FIRST_FALLBACK_S: Final = 0.05

# Permissions (nats-server's values): publish decisions cached per connection, delivery
# decisions of subscribe denies cached per connection, and allow_responses' defaults and
# the pruning of a connection's granted reply subjects (every REPLY_PERMS_PRUNE_EVERY
# grants or REPLY_PERMS_PRUNE_S seconds, whichever comes first).
PUB_PERMS_CACHE_ENTRIES_MAX: Final = 128
DENY_PERMS_CACHE_ENTRIES_MAX: Final = 256
ALLOW_RESPONSES_MAX_MSGS: Final = 1
ALLOW_RESPONSES_EXPIRES_S: Final = 120.0
# Service imports (routing/imports.py): how long a streamed or chunked export's reply
# waits for its next response (nats-server's DEFAULT_SERVICE_EXPORT_RESPONSE_THRESHOLD),
# and how many replies an account keeps awaiting responses (Brook's bound: the oldest goes).
SERVICE_RESPONSE_THRESHOLD_S: Final = 120.0
SERVICE_RESPONSES_MAX: Final = 100_000
# The URL account resolver's bound on one fetch of an account JWT (nats-server's
# DEFAULT_ACCOUNT_FETCH_TIMEOUT).
ACCOUNT_FETCH_TIMEOUT_S: Final = 1.9
# Subjects whose subject mapping is remembered per account (routing/mappings.py; Brook's
# bound: the cache is emptied when full).
MAPPING_CACHE_ENTRIES_MAX: Final = 4096
# How many imports one message may cross in a row (Brook's bound: nats-server refuses
# cycles of imports at start, and a chain longer than this is no design).
IMPORT_HOPS_MAX: Final = 16
REPLY_PERMS_PRUNE_EVERY: Final = 4096
REPLY_PERMS_PRUNE_S: Final = 1.0

# Routing: the subject-match cache in front of the subscription trie.
SUBLIST_CACHE_ENTRIES_MAX: Final = 1024

# Monitoring: closed client connections /connz keeps (nats-server's
# DEFAULT_MAX_CLOSED_CLIENTS; `max_closed_clients`), and the most it may be set to.
MAX_CLOSED_CLIENTS: Final = 10_000
MAX_CLOSED_CLIENTS_MAX: Final = 1_000_000
# Monitoring: /connz paging.
CONNZ_LIMIT_DEFAULT: Final = 1024
CONNZ_LIMIT_MAX: Final = 65536
# Monitoring HTTP (ADR 0039). Requests are small GETs: a request line or one header line
# longer than this is refused with 431, as are more header lines than HTTP_HEADERS_MAX
# (so a request head is at most ~1 MiB, nats-server's MaxHeaderBytes); a body is never
# read, and the connection is closed after the answer to a request that sent one.
HTTP_REQUEST_BYTES_MAX: Final = 16 * 1024
HTTP_HEADERS_MAX: Final = 64
# A connection must complete a request head within this long of connecting or of its
# previous answer (nats-server's ReadHeaderTimeout of 5 s, which also bounds idle
# keep-alive connections here), and take each answer within this long.
HTTP_REQUEST_TIMEOUT_S: Final = 5.0
# Answers at least this large are gzipped for a client that asks (Accept-Encoding: gzip).
HTTP_GZIP_MIN_BYTES: Final = 1400
# Shutdown: how long graceful shutdown waits for pending output to drain.
SHUTDOWN_FLUSH_S: Final = 5.0
# Lame-duck mode (nats-server's defaults): clients are closed over the duration, after
# the grace period, in which they learn of it (`ldm` in INFO) and may leave on their own.
# A config file may not set a duration under the minimum (nats-server's rule).
LAME_DUCK_DURATION_S: Final = 120.0
LAME_DUCK_GRACE_PERIOD_S: Final = 10.0
LAME_DUCK_DURATION_MIN_S: Final = 30.0
# Between two clients closed in lame-duck mode, at most this long (nats-server's).
LAME_DUCK_CLOSE_INTERVAL_MAX_S: Final = 1.0

# JetStream.
# Nats-Msg-Id values remembered per stream for dedup, beyond the duplicate window's own
# bound, so a flood of unique ids within the window cannot grow memory without limit.
DEDUP_IDS_MAX: Final = 1_000_000
# Worker threads that run fsyncs (group commits) for all streams.
SYNC_THREADS: Final = 4
# A durable consumer's state file is rewritten at most this often while only plain acks
# and deliveries change it (nats-server's consumer store: about ten writes a second); an
# ack that asks for a confirmation is written at once.
CONSUMER_FLUSH_INTERVAL_S: Final = 0.1
# Push flow control (wire reference §6.6): the window of delivered-but-unconfirmed bytes
# starts here, doubles with every flow-control response, and never exceeds the maximum.
# A request goes out when half the window is used; delivery stops when all of it is.
CONSUMER_FC_WINDOW_START_BYTES: Final = 2 * 1024 * 1024
CONSUMER_FC_WINDOW_MAX_BYTES: Final = 32 * 1024 * 1024
# Stream snapshots (`$JS.API.STREAM.SNAPSHOT`), with nats-server's values: a request's chunk
# size and window are clamped to these bounds; a snapshot that gets no flow-control ack for
# SNAPSHOT_ACK_TIMEOUT_S ends with `408 No Flow Response`; a deliver subject nobody listens
# to yet is given SNAPSHOT_INTEREST_WAIT_S to get a subscriber before chunks go out.
SNAPSHOT_CHUNK_BYTES_DEFAULT: Final = 128 * 1024
SNAPSHOT_CHUNK_BYTES_MIN: Final = 1024
SNAPSHOT_CHUNK_BYTES_MAX: Final = 1024 * 1024
SNAPSHOT_WINDOW_BYTES_DEFAULT: Final = 8 * 1024 * 1024
SNAPSHOT_WINDOW_BYTES_MIN: Final = 1024
SNAPSHOT_WINDOW_BYTES_MAX: Final = 32 * 1024 * 1024
SNAPSHOT_ACK_TIMEOUT_S: Final = 5.0
SNAPSHOT_INTEREST_WAIT_S: Final = 2.0
# Stream restores (`$JS.API.STREAM.RESTORE`): abandoned after this long without a chunk
# (nats-server's stall watchdog), and refused past this many uploaded bytes (Brook's own:
# the upload is staged on the store's disk). Both configurable (jetstream block).
RESTORE_IDLE_TIMEOUT_S: Final = 5.0
RESTORE_MAX_BYTES: Final = 64 * 1024 * 1024 * 1024
# File-stream PubAcks waiting for their group commit, across all streams: past this, the
# connections publishing to file streams stop being read until half have been sent
# (`jetstream.max_acks_awaiting_sync`; jetstream/backlog.py). 0: no bound.
MAX_ACKS_AWAITING_SYNC: Final = 65536
# File stores save their index (`index.snap`, ADR 0046) this often while running, so a
# restart after a crash replays only the log written since: nats-server writes its
# stream state (`index.db`) every 2 minutes (filestore.go `flushStreamStateLoop`).
# `jetstream.index_snapshot_interval` sets it; 0 turns the periodic snapshots off.
INDEX_SNAPSHOT_INTERVAL_S: Final = 120.0
INDEX_SNAPSHOT_INTERVAL_MAX_S: Final = 24 * 3600.0
# Sealed segments of each file stream whose index columns stay unpacked, 20 bytes per
# message; the others are kept packed, about 3.5 (ADR 0054: nats-server loads its blocks'
# indexes on demand). `jetstream.index_hot_segments` sets it.
INDEX_HOT_SEGMENTS: Final = 2
INDEX_HOT_SEGMENTS_MAX: Final = 1024
# A file stream's segment rolls at this many message slots as well as at its bytes, so
# the active segment's unpacked index columns (20 bytes a slot) stay small (ADR 0061:
# a 64 MB segment of small messages held about 850k). `jetstream.segment_slots_max`.
SEGMENT_SLOTS: Final = 131072
SEGMENT_SLOTS_MIN: Final = 1024
SEGMENT_SLOTS_MAX: Final = 1 << 26
# Worker threads that read, compress, stage and check snapshots (apart from the fsyncs').
TRANSFER_THREADS: Final = 2
# Full disk. The JetStream store's filesystem keeps this much free: below it, publishes
# to file streams are refused with 10023 (insufficient resources), so removals, consumer
# state and metadata always find room. The default is the smaller of this and a twentieth
# of the filesystem (`jetstream.free_space_reserve` sets it).
STORE_RESERVE_BYTES: Final = 64 * 1024 * 1024
STORE_RESERVE_SHARE: Final = 20  # the default reserve is at most 1/20 of the filesystem
# Writes resume once this much more than the reserve is free again (no flapping).
STORE_RESUME_MARGIN_BYTES: Final = 1024 * 1024
# Free space is read again at least after this many bytes were admitted to file streams.
STORE_SPACE_CHECK_BYTES: Final = 1024 * 1024
# A file store's appends wait in memory until a sync starts or this many are pending,
# then reach the file in one write; the disk space they go to is reserved this far ahead
# (ADR 0051). A write buffer of 0 writes every record through at once.
# `jetstream.write_buffer` sets it, up to the maximum.
STORE_WRITE_BUFFER_BYTES: Final = 1024 * 1024
STORE_WRITE_BUFFER_MAX_BYTES: Final = 64 * 1024 * 1024
STORE_PREALLOCATE_BYTES: Final = 64 * 1024
# A store write failure (other than a full disk) is logged at most this often, as
# nats-server does; a durable consumer's failed state write is retried this often.
STORE_ERROR_LOG_INTERVAL_S: Final = 10.0
CONSUMER_WRITE_RETRY_S: Final = 1.0

# Atomic batch publishes (jetstream/batch.py), nats-server's defaults (stream.go): messages
# in one batch, batches staged at once per stream and per server, and how long a batch
# may wait for its next message before it is dropped.
ATOMIC_BATCH_SIZE_MAX: Final = 1000
ATOMIC_BATCH_INFLIGHT_PER_STREAM: Final = 50
ATOMIC_BATCH_INFLIGHT_TOTAL: Final = 1000
ATOMIC_BATCH_TIMEOUT_NS: Final = 10_000_000_000
# Fast batch publishes (jetstream/fast_batch.py), nats-server's defaults: batches in flight
# per stream and per server (the timeout is the atomic batches').
FAST_BATCH_INFLIGHT_PER_STREAM: Final = 1000
FAST_BATCH_INFLIGHT_TOTAL: Final = 50_000

# Leafnodes (ADR 0032), nats-server's values: the pause before a spoke dials its hub again
# (`reconnect_delay`, DEFAULT_LEAF_NODE_RECONNECT; after a failed dial, plus a random
# jitter of up to as much again), the wait after a loop was detected, and how long a
# dialled hub has to send its INFO (DEFAULT_LEAFNODE_INFO_WAIT).
LEAF_RECONNECT_DELAY_S: Final = 1.0
LEAF_LOOP_DELAY_S: Final = 30.0
LEAF_FIRST_INFO_TIMEOUT_S: Final = 1.0
# How long a spoke's dial (the TCP connect) may take (nats-server's DEFAULT_ROUTE_DIAL): a
# dial into a silent partition is given up and made afresh, not left to TCP's SYN
# retries, whose backoff would delay the reconnect by seconds after the heal.
LEAF_DIAL_TIMEOUT_S: Final = 1.0
