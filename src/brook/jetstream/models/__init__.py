"""Wire models of the JetStream API: stream configuration (`stream_config.py`), stream
state and stream info JSON (`info.py`), consumer configuration, its rules and
JSON (`consumer_config.py`, `consumer_rules.py`, `consumer_json.py`). The stream models are
re-exported here; the consumer ones are imported from their modules."""

from brook.jetstream.models.info import (
    ZERO_TIME,
    format_ts_ns,
    parse_ts,
    stream_state_to_json,
)
from brook.jetstream.models.stream_config import (
    StreamConfig,
    check_update,
    parse_stream_config,
    parse_stream_update,
    same_config,
    stream_config_to_json,
    subjects_overlap,
    valid_stream_name,
)

__all__ = [
    "ZERO_TIME",
    "StreamConfig",
    "check_update",
    "format_ts_ns",
    "parse_stream_config",
    "parse_stream_update",
    "parse_ts",
    "same_config",
    "stream_config_to_json",
    "stream_state_to_json",
    "subjects_overlap",
    "valid_stream_name",
]
