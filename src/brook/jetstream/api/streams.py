"""Stream endpoints of the JetStream API and `$JS.API.INFO` (wire reference §2.4-§2.5, §7.1).

Handlers take a parsed `Request` and return the response body without `type`; errors are
raised as `ApiError` and written by the dispatcher. Response keys and their order follow
the reference server's responses recorded in `transcripts/js-*.txt`.
"""

from __future__ import annotations

import base64
from typing import Any

from brook.jetstream import models
from brook.jetstream.api.dispatch import ApiDispatcher, Endpoint, Request
from brook.jetstream.engine import JetStream
from brook.jetstream.errors import api_error
from brook.jetstream.fields import get_field, invalid_json
from brook.jetstream.models.defaults import LIST_PAGE, NAMES_PAGE
from brook.jetstream.sources import sources_info
from brook.jetstream.store.base import StoredMessage
from brook.jetstream.stream import Stream

SUBJECTS_PAGE = 100_000


def _int(body: dict[str, Any], key: str) -> int:
    return get_field(body, key, int, 0, invalid_json)


def _str(body: dict[str, Any], key: str) -> str:
    return get_field(body, key, str, "", invalid_json)


class StreamApi:
    def __init__(self, js: JetStream, *, server_name: str, version: str, api_level: int) -> None:
        self.js = js
        self.server_name = server_name
        self.version = version
        self.api_level = api_level

    def register(self, api: ApiDispatcher) -> None:
        self._api = api
        api.serve(self, ENDPOINTS)

    # ------------------------------------------------------------------ shapes

    def _info(self, stream: Stream, *, server_metadata: bool, cluster: bool = False,
              state: Any = None, domain: bool = True) -> dict[str, Any]:  # fmt: skip
        """nats-server's `StreamInfo`; its `domain` in the replies but a create's and a
        restore's."""
        config = models.stream_config_to_json(
            stream.config,
            server_version=self.version if server_metadata else None,
            api_level=self.api_level,
        )
        out: dict[str, Any] = {
            "config": config,
            "created": models.format_ts_ns(stream.created_ns),
            "state": models.stream_state_to_json(
                state if state is not None else stream.store.state(), stream.consumer_count
            ),
        }
        if domain and self.js.domain:
            out["domain"] = self.js.domain
        if cluster:
            out["cluster"] = {"leader": self.server_name}
        mirror = self.js.mirror_info(stream)
        if mirror is not None:
            out["mirror"] = mirror
        sourced = self.js.sourced(stream.name)
        if sourced is not None:
            out["sources"] = sources_info(sourced, self.js.now_ns())
        out["ts"] = models.format_ts_ns(self.js.now_ns())
        return out

    def created_info(self, stream: Stream) -> dict[str, Any]:
        """The info of a stream just added (create, restore), as nats-server sends it."""
        return self._info(stream, server_metadata=True, domain=False)

    def detail(self, stream: Stream, *, config: bool) -> dict[str, Any]:
        """The stream as monitoring's `/jsz` shows it (nats-server's `StreamDetail` but its
        consumers): its configuration as stored (no server metadata), only when asked."""
        info = self._info(stream, server_metadata=False, cluster=True)
        out = {"name": stream.name, "created": info["created"], "cluster": info["cluster"]}
        if config:
            out["config"] = info["config"]
        out["state"] = info["state"]
        for key in ("mirror", "sources"):
            if key in info:
                out[key] = info[key]
        return out

    def _stream(self, request: Request, index: int = 2) -> Stream:
        return self.js.get(request.tokens[index])

    # ------------------------------------------------------------------ handlers

    def account_info(self, request: Request) -> dict[str, Any]:
        api = {"level": self.api_level, "total": self._api.total, "errors": self._api.errors}
        domain = {"domain": self.js.domain} if self.js.domain else {}
        usage = self.js.account_usage()
        tiers = usage.pop("tiers", None)
        return {**usage, **domain, "api": api, **({"tiers": tiers} if tiers else {})}

    def _origin(self, name: str) -> models.StreamConfig | None:
        """The configuration of the stream `name` here, for the checks of a mirror or
        source (ADR 0020)."""
        stream = self.js.streams.get(name)
        return None if stream is None else stream.config

    def create(self, request: Request) -> dict[str, Any]:
        body = request.json()  # empty: `{}`, refused as nats-server does (10056)
        replicas = body.get("num_replicas") if isinstance(body, dict) else None
        self.js.check_tier(replicas if type(replicas) is int else 1)
        config = models.parse_stream_config(
            body, subject_name=request.tokens[2], streams=self._origin
        )
        stream, _ = self.js.create(config)
        return {**self._info(stream, server_metadata=True, domain=False), "did_create": True}

    def update(self, request: Request) -> dict[str, Any]:
        body = request.json()  # empty: `{}`, refused as nats-server does (10052)
        config = models.parse_stream_update(
            body, subject_name=request.tokens[2], streams=self._origin
        )
        stream = self.js.update(config)
        return self._info(stream, server_metadata=True)

    def info(self, request: Request) -> dict[str, Any]:
        stream = self._stream(request)
        body = request.json()
        subjects_filter = _str(body, "subjects_filter")
        offset = max(_int(body, "offset"), 0)
        state = stream.store.state(
            deleted_details=bool(body.get("deleted_details")),
            subjects_filter=subjects_filter or None,
        )
        # As nats-server: with no subject matching, no page at all (total, offset and limit
        # 0); otherwise the requested offset as sent, and `subjects` only when the page
        # has some (an empty map is left out, never sent as `{}`).
        total = limit = 0
        if state.subjects:
            total = len(state.subjects)
            limit = SUBJECTS_PAGE
            page = sorted(state.subjects.items())[offset : offset + SUBJECTS_PAGE]
            state.subjects = dict(page) or None
        else:
            state.subjects = None
            offset = 0
        return {
            "total": total,
            "offset": offset,
            "limit": limit,
            **self._info(stream, server_metadata=True, cluster=True, state=state),
        }

    def delete(self, request: Request) -> dict[str, Any]:
        if request.body.strip() not in (b"", b"{}"):
            raise api_error("NOT_EMPTY_REQUEST")
        self.js.delete(request.tokens[2])
        return {"success": True}

    def _filtered_names(self, body: dict[str, Any]) -> list[str]:
        subject = _str(body, "subject")
        names = sorted(self.js.streams)
        if subject:
            names = [
                n
                for n in names
                if models.subjects_overlap([subject], self.js.streams[n].config.subjects)
            ]
        return names

    def names(self, request: Request) -> dict[str, Any]:
        body = request.json()
        names = self._filtered_names(body)
        offset = min(max(_int(body, "offset"), 0), len(names))
        page = names[offset : offset + NAMES_PAGE]
        return {
            "total": len(names),
            "offset": offset,
            "limit": NAMES_PAGE,
            "streams": page or None,
        }

    def list(self, request: Request) -> dict[str, Any]:
        body = request.json()
        names = self._filtered_names(body)
        offset = min(max(_int(body, "offset"), 0), len(names))
        page = names[offset : offset + LIST_PAGE]
        infos = []
        for name in page:
            info = self._info(self.js.streams[name], server_metadata=False)
            infos.append(info)
        return {
            "total": len(names),
            "offset": offset,
            "limit": LIST_PAGE,
            "streams": infos,
        }

    def purge(self, request: Request) -> dict[str, Any]:
        stream = self._stream(request)
        body = request.json()
        if stream.config.sealed:
            raise api_error("STREAM_SEALED")
        if stream.config.deny_purge:
            raise api_error("STREAM_PURGE_FAILED", err="stream purge not permitted")
        subject = _str(body, "filter")
        seq = _int(body, "seq")
        keep = _int(body, "keep")
        if seq and keep:
            raise api_error("BAD_REQUEST")
        result = stream.purge(subject, seq, keep)
        return {"success": True, "purged": result.purged}

    def msg_get(self, request: Request) -> dict[str, Any]:
        stream = self._stream(request, 3)
        body = request.json(required=True)
        msg = _lookup(stream, body)
        if msg is None:
            raise api_error("NO_MESSAGE_FOUND")
        message: dict[str, Any] = {"subject": msg.subject, "seq": msg.seq}
        if msg.header and not body.get("no_hdr"):
            message["hdrs"] = base64.b64encode(msg.header).decode()
        if msg.data:
            message["data"] = base64.b64encode(msg.data).decode()
        message["time"] = models.format_ts_ns(msg.ts_ns)
        return {"message": message}

    def msg_delete(self, request: Request) -> dict[str, Any]:
        stream = self._stream(request, 3)
        body = request.json(required=True)
        if stream.config.sealed:
            raise api_error("STREAM_SEALED")
        if stream.config.deny_delete:
            raise api_error("STREAM_MSG_DELETE_FAILED", err="message delete not permitted")
        seq = _int(body, "seq")
        if seq <= 0:
            raise api_error("BAD_REQUEST")
        if seq > stream.store.state().last_seq:
            raise api_error("STREAM_MSG_DELETE_FAILED", err="stream store EOF")
        if not stream.remove(seq, erase=not body.get("no_erase", False)):
            raise api_error("SEQUENCE_NOT_FOUND", seq=seq)
        return {"success": True}


_PAGED = {"total": 0, "offset": 0, "limit": 0}

ENDPOINTS: tuple[Endpoint[StreamApi], ...] = (
    Endpoint("INFO", "account_info_response", StreamApi.account_info),
    Endpoint("STREAM.CREATE.*", "stream_create_response", StreamApi.create),
    Endpoint("STREAM.UPDATE.*", "stream_update_response", StreamApi.update),
    Endpoint("STREAM.INFO.*", "stream_info_response", StreamApi.info, _PAGED),
    Endpoint("STREAM.DELETE.*", "stream_delete_response", StreamApi.delete),
    Endpoint("STREAM.NAMES", "stream_names_response", StreamApi.names, _PAGED),
    Endpoint("STREAM.LIST", "stream_list_response", StreamApi.list, _PAGED),
    Endpoint("STREAM.PURGE.*", "stream_purge_response", StreamApi.purge, {"purged": 0}),
    Endpoint("STREAM.MSG.GET.*", "stream_msg_get_response", StreamApi.msg_get, counts="errors"),
    Endpoint("STREAM.MSG.DELETE.*", "stream_msg_delete_response", StreamApi.msg_delete),
)
"""The stream endpoints (and the account's INFO), as `StreamApi` serves them."""


def _lookup(stream: Stream, body: dict[str, Any]) -> StoredMessage | None:
    """STREAM.MSG.GET: by `seq`, `last_by_subj`, `next_by_subj` (+`seq`) or `start_time`."""
    seq = _int(body, "seq")
    last_by = _str(body, "last_by_subj")
    next_by = _str(body, "next_by_subj")
    start_time = _str(body, "start_time")
    store = stream.store
    if last_by:
        if seq or next_by:
            raise api_error("BAD_REQUEST")
        return store.load_last(last_by)
    if next_by:
        return store.load_next(next_by, max(seq, 1))
    if start_time:
        try:
            start_ns = models.parse_ts(start_time)
        except ValueError:
            raise api_error("BAD_REQUEST") from None
        msg = store.load_next(">", 0)
        while msg is not None and msg.ts_ns < start_ns:
            msg = store.load_next(">", msg.seq + 1)
        return msg
    if seq <= 0:
        raise api_error("BAD_REQUEST")
    return store.load(seq)
