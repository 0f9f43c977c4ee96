"""The start-up log's summary lines (ADR 0041): what an operator checks first in a log,
in nats-server's words where it has the line (the JetStream block's `Max Memory`, `Max
Storage`, `Store Directory`, `API Level`), Brook's own where it has none (the client
limits, the fsync mode). The listen addresses are logged by each listener as it opens
("Listening for client connections on ...", as nats-server)."""

from __future__ import annotations

import logging
import math

from brook import _compiled, limits
from brook.config.conf import config_digest
from brook.config.settings import JetStreamSettings, Settings

__all__ = ["friendly_bytes", "log_config_file", "log_jetstream_summary", "log_limits"]

log = logging.getLogger("brook.server")


def friendly_bytes(n: int) -> str:
    """nats-server's `friendlyBytes`: `512 B`, `1.00 KB`, `17.66 GB` (1024-based)."""
    if n < 1024:
        return f"{n} B"
    exp = min(int(math.log(n) / math.log(1024)), 6)
    return f"{n / 1024**exp:.2f} {'KMGTPE'[exp - 1]}B"


def _limit(n: int) -> str:
    return "unlimited" if n < 0 else friendly_bytes(n)


def log_config_file(path: str | None) -> None:
    """nats-server's line naming the config file and its digest (the one `-t` prints)."""
    if path is None:
        return
    try:
        digest = config_digest(path)
    except (OSError, ValueError):  # changed or gone since it was loaded: the name alone
        log.info("Using configuration file: %s", path)
        return
    log.info("Using configuration file: %s (%s)", path, digest)


def log_limits(settings: Settings) -> None:
    """The client limits, beside the version and name in the header."""
    subs = settings.max_subscriptions
    log.info(
        "  Limits:   max_payload %s, max_connections %d, max_subscriptions %s, max_pending %s",
        friendly_bytes(settings.max_payload_bytes),
        settings.max_connections,
        subs if subs > 0 else "unlimited",
        friendly_bytes(settings.max_pending_bytes),
    )
    compiled = _compiled.status()
    if compiled["modules"]:
        log.info("  Compiled: %d hot-path modules (mypyc)", len(compiled["modules"]))
    else:
        log.info("  Compiled: none, pure Python (%s)", compiled["pure_python_because"])
    if settings.max_payload_bytes > limits.MAX_PAYLOAD_BYTES_WARN:
        log.warning(
            "Maximum payloads over %s are generally discouraged and could lead to poor performance",
            friendly_bytes(limits.MAX_PAYLOAD_BYTES_WARN),
        )


def log_jetstream_summary(js: JetStreamSettings) -> None:
    """nats-server's `---- JETSTREAM ----` block, with Brook's fsync mode in it."""
    if js.store_dir is None:
        log.warning("Temporary storage directory used, data could be lost on system reboot")
    log.info("---------------- JETSTREAM ----------------")
    log.info("  Max Memory:      %s", _limit(js.max_memory_store_bytes))
    log.info("  Max Storage:     %s", _limit(js.max_file_store_bytes))
    log.info('  Store Directory: "%s"', js.store_path)
    if js.domain:
        log.info("  Domain:          %s", js.domain)
    sync = "always" if js.sync_interval_s <= 0 else f"every {js.sync_interval_s:g}s"
    log.info("  Sync:            %s", sync)
    log.info("  API Level:       %d", limits.JETSTREAM_API_LEVEL)
    log.info("-------------------------------------------")
