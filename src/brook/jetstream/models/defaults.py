"""The JetStream API's defaults and bounds, each defined once, with nats-server's values.

What a stream or consumer gets when its request leaves a field unset, and the bounds the
API shares between streams and consumers (names, descriptions, metadata, pages of
NAMES and LIST answers). The name of nats-server's constant is given for each, so a
change there is found here. Brook's own server limits live in `brook.limits`.
"""

import re
from typing import Final

# Streams (stream.go: StreamDefaultDuplicatesWindow).
STREAM_DUPLICATE_WINDOW_DEFAULT_NS: Final = 120_000_000_000

# Consumers (consumer.go, setConsumerConfigDefaults).
CONSUMER_ACK_WAIT_DEFAULT_NS: Final = 30_000_000_000  # JsAckWaitDefault
CONSUMER_INACTIVE_THRESHOLD_DEFAULT_NS: Final = 5_000_000_000  # JsDeleteWaitTimeDefault
CONSUMER_MAX_ACK_PENDING_DEFAULT: Final = 1000  # JsDefaultMaxAckPending
CONSUMER_MAX_WAITING_DEFAULT: Final = 512  # JSWaitQueueDefaultMax
CONSUMER_PINNED_TTL_DEFAULT_NS: Final = 120_000_000_000  # JsDefaultPinnedTTL
# The idle heartbeat of a mirror's or source's consumer, and the only one the
# `flow_control` ack policy allows (its default too): sourceHealthHB.
SOURCING_HEARTBEAT_NS: Final = 1_000_000_000
# A priority group's name (consumer.go: validGroupName), at create and in CONSUMER.UNPIN.
GROUP_NAME: Final = re.compile(r"[a-zA-Z0-9/_=-]{1,16}")

# Shared by streams and consumers (jetstream_api.go).
NAME_BYTES_MAX: Final = 255  # JSMaxNameLen
DESCRIPTION_BYTES_MAX: Final = 4096  # JSMaxDescriptionLen
METADATA_BYTES_MAX: Final = 128 * 1024  # JSMaxMetadataLen
# Characters no stream or consumer name may hold (a consumer's also excludes path
# separators).
NAME_FORBIDDEN: Final = frozenset(" \t\r\n\f.*>")

# Pages of the NAMES and LIST endpoints (JSApiNamesLimit, JSApiListLimit).
NAMES_PAGE: Final = 1024
LIST_PAGE: Final = 256
