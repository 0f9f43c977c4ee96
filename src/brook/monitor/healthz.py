"""`/healthz`: nats-server's health probe (server/monitor.go `healthz`), for one server.

A probe that cannot fail is worse than none, so this one answers as nats-server does:
`?account=&stream=&consumer=` ask for one asset and get 404 when it is missing, 400 when
the query names a consumer without its stream or a stream without its account, and 503
("could not be recovered") when a stream's directory is in the store but the stream did
not open at start. `js-server-only` checks the server alone, `js-enabled-only` (and the
deprecated `js-enabled`) JetStream's being on; `details=true` lists typed errors instead
of one message. Status texts, error texts and field order are nats-server's.

Every account with JetStream is checked (`account=` names one). Deliberate differences,
each where nats-server's answer comes from scanning its store directory rather than from
what it serves: an account with JetStream is found while no file stream of its exists
yet, and a memory stream is found (nats-server answers 404 for both).
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any

from brook.monitor.params import go_bool
from brook.server.statistics import JetStreamAssets

__all__ = ["build_healthz"]

log = logging.getLogger("brook.monitor")

_MUST_NOT_BE_EMPTY = '"%s" must not be empty when checking %s health'


class _Probe:
    """One evaluation: the first failure, or with `details` every failure, typed."""

    def __init__(self, details: bool) -> None:
        self.details = details
        self.code = 200
        self.status = "ok"
        self.error = ""
        self.errors: list[dict[str, str]] = []

    def fail(self, code: int, status: str, kind: str, error: str, **asset: str) -> None:
        self.code = code
        if self.details:
            if code == 404:  # nats-server reports a missing asset alone
                self.errors.clear()
            self.errors.append({"type": kind, **{k: v for k, v in asset.items() if v}})
            self.errors[-1]["error"] = error
        else:
            self.status, self.error = status, error

    def body(self) -> dict[str, Any]:
        if self.details:
            self.status = "error" if self.errors else "ok"
        body: dict[str, Any] = {"status": self.status}
        if self.error:
            body["error"] = self.error
        if self.errors:
            body["errors"] = self.errors
        return body


def build_healthz(
    js: list[JetStreamAssets] | None, query: dict[str, list[str]]
) -> tuple[int, dict[str, Any]]:
    """(HTTP status, body) for `/healthz?query` on a server whose accounts' JetStream
    hold `js` (None: JetStream off); raises `BadParameter` for a bad flag."""
    js_enabled = go_bool(query, "js-enabled")
    if js_enabled:
        log.warning("Healthcheck: js-enabled deprecated, use js-enabled-only instead")
    js_enabled_only = go_bool(query, "js-enabled-only")
    js_server_only = go_bool(query, "js-server-only")
    go_bool(query, "js-meta-only")  # checked for its form; there is no meta layer
    probe = _Probe(go_bool(query, "details"))
    account, stream, consumer = (query.get(k, [""])[0] for k in ("account", "stream", "consumer"))
    if not account and stream:
        probe.fail(400, "error", "BAD_REQUEST", _MUST_NOT_BE_EMPTY % ("account", "stream"))
    elif not stream and consumer:
        probe.fail(400, "error", "BAD_REQUEST", _MUST_NOT_BE_EMPTY % ("stream", "consumer"))
    elif not (js_server_only or js is None or js_enabled_only or js_enabled):
        _check_assets(js, probe, account, stream, consumer)
    body = probe.body()
    if probe.error:
        log.warning("Healthcheck failed: %s", json.dumps(probe.error, ensure_ascii=False))
    elif probe.errors:
        log.warning("Healthcheck failed: %d errors", len(probe.errors))
    return probe.code, body


def _check_assets(
    assets: list[JetStreamAssets], probe: _Probe, account: str, stream: str, consumer: str
) -> None:
    """Every stream whose directory is in an account's store must be open (in the asked-for
    account only, when one is); the asked-for ones exist. Accounts in nats-server's
    directory order (by name)."""
    account_found = stream_found = consumer_found = False
    for js in sorted(assets, key=_account_name):
        if account and js.account != account:
            continue
        account_found = True
        opened = js.streams
        on_disk = {e.name for e in os.scandir(js.root) if e.is_dir()} if js.root.is_dir() else set()
        for name in sorted(on_disk.union(opened)):  # nats-server: in directory order
            if stream and name != stream:
                continue
            stream_found = bool(stream)
            if name not in opened:
                error = f"JetStream stream '{js.account} > {name}' could not be recovered"
                probe.fail(503, "unavailable", "STREAM", error, account=js.account, stream=name)
                if not probe.details:
                    return
                continue
            if stream_found:
                consumer_found = bool(consumer) and consumer in js.consumers.get(name, {})
                break
        if account:
            break
    if account and not account_found:
        error = f"JetStream account {json.dumps(account)} not found"
        probe.fail(404, "unavailable", "ACCOUNT", error, account=account)
    elif stream and not stream_found:
        error = f"JetStream stream {json.dumps(stream)} not found on account {json.dumps(account)}"
        probe.fail(404, "unavailable", "STREAM", error, account=account, stream=stream)
    elif consumer and not consumer_found:
        error = (
            f"JetStream consumer {json.dumps(consumer)} not found for stream "
            f"{json.dumps(stream)} on account {json.dumps(account)}"
        )
        probe.fail(
            404, "unavailable", "CONSUMER", error, account=account, stream=stream, consumer=consumer
        )


def _account_name(assets: JetStreamAssets) -> str:
    return assets.account
