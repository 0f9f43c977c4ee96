"""One client connection: an `asyncio.Protocol` around the sans-I/O parser.

Responsibilities: the handshake (INFO, CONNECT, authentication, the PONG before anything
else, the async INFO with `connect_info`), applying each operation to the router of the
account it logged in to (server/accounts.py), keep-alive, and output. Output is appended
to a per-connection buffer and written once per event-loop iteration; a connection whose
unsent output exceeds `max_pending_bytes`, or whose socket stays unwritable past
`write_deadline_s`, is a slow consumer and is dropped without affecting anyone else (wire
reference §1.15). Protocol violations end in the exact `-ERR` text nats-server sends, or a
silent close where nats-server closes silently. Two parts of the class have modules of
their own (ADR 0031): the login (CONNECT and what it binds, `server/login.py`) and the TLS
upgrade (`server/tls_upgrade.py`).
A bug in Brook while handling one connection closes that connection only.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import TYPE_CHECKING, Any, cast

from brook.config.settings import NkeyUser, Settings
from brook.protocol import encoder
from brook.protocol import errors as perr
from brook.protocol.parser import ClientParser, ProtocolError
from brook.routing.output import QueuedOutput
from brook.routing.sublist import Subscription
from brook.routing.subscriber import Subscriber
from brook.server.auth import Login
from brook.server.client_core import ClientCore
from brook.server.keepalive import PingAction, ping_decision
from brook.server.listen import peer_host
from brook.server.login import ClientLogin
from brook.server.permissions import (
    ConnectionPermissions,
    may_subscribe,
)
from brook.server.tls import CertificateNames, PeerCertificate
from brook.server.tls_upgrade import ClientTLS
from brook.subjects import is_valid_subject

if TYPE_CHECKING:
    from brook.jetstream.backlog import CommitBacklog
    from brook.routing.mappings import SubjectMappings
    from brook.server.jwtauth import JwtUser
    from brook.server.server import Server
    from brook.server.websocket import WebSocketListener

log = logging.getLogger("brook.connection")

_TRACE_BYTES_MAX = 512


# ClientCore after the mixins: their `_send`, `_flush` and `_require_connect` override its
# declarations of them (server/client_core.py).
class ClientConnection(ClientLogin, ClientTLS, QueuedOutput, ClientCore, Subscriber):
    def __init__(self, server: Server, websocket: WebSocketListener | None = None) -> None:
        self.server = server
        self.websocket = websocket  # the listener of a WebSocket client (server/websocket.py)
        self.authenticator = server.authenticator if websocket is None else websocket.authenticator
        settings = server.settings
        self._trace = settings.trace  # -V: log protocol bytes, per chunk not per message
        # nats-server: a WebSocket listener's own ping_interval, if set, for its clients.
        ws_ping = websocket.ping_interval_s if websocket is not None else None
        self.ping_interval_s = settings.ping_interval_s if ws_ping is None else ws_ping
        self.cid = server.next_client_id()
        self.parser = ClientParser(
            self,
            max_payload=settings.max_payload_bytes,
            max_control_line=settings.max_control_line_bytes,
            run_prefixes=server.accounts.run_prefixes(),
        )
        self.transport: asyncio.Transport | None = None
        self.loop = asyncio.get_running_loop()
        self.subs: dict[bytes, Subscription] = {}
        # The most subscriptions this connection may hold, -1 for no bound: the server's
        # max_subscriptions, lowered by a user JWT's and its account's `subs`.
        self.max_subs = settings.max_subscriptions or -1
        # The account whose subjects this client uses (server/accounts.py): its login's,
        # bound by CONNECT; `$G` until then (nothing before CONNECT is routed elsewhere).
        self.account = server.accounts.global_account
        self.router = self.account.router
        # Options before CONNECT are nats-server's client defaults: verbose, pedantic, echo.
        self.verbose = True
        self.pedantic = True
        self.echo = True
        self.headers = False
        self.no_responders = False
        self.protocol = 0
        self.name = ""
        self.lang = ""
        self.version = ""
        self.user = ""  # the authorized user's name (or nkey) once logged in
        self.login: Login | None = None  # whom CONNECT logged in as
        # A user JWT's login counted against its account's connection limit until closed.
        self._admitted: JwtUser | None = None
        self.nonce = ""  # sent in INFO for nkey users to sign; fresh per connection
        # The user's publish/subscribe permissions; None: no restriction (the hot paths
        # test only this).
        self.perms: ConnectionPermissions | None = None
        # The account's subject mappings, applied to every publish (ADR 0030); None: none.
        self.mappings: SubjectMappings | None = self.account.mappings
        self.connected = False  # a valid CONNECT was processed
        self._connect_options: dict[str, Any] = {}
        # A WebSocket client's credentials from its upgrade request's cookies, by CONNECT
        # key (the listener's user_cookie, pass_cookie, token_cookie, jwt_cookie).
        self.credential_cookies: dict[str, str] = {}
        self.closed = False
        self.close_reason = ""
        self._info_sent_after_pong = False
        # Output buffering.
        self._init_output()
        self._write_paused_handle: asyncio.TimerHandle | None = None
        self._written = 0  # bytes handed to the transport, ever
        self._sent_at_check = 0  # bytes the kernel had taken at the last deadline check
        # Keep-alive and timers.
        self.started_mono = time.monotonic()
        self.started_at = time.time()
        self.last_in = self.started_mono
        self.pings_out = 0
        self.ping_sent_at = 0.0
        self.rtt_s: float | None = None
        self.rtt_measured_at: float | None = None
        self._ping_handle: asyncio.TimerHandle | None = None
        self._auth_handle: asyncio.TimerHandle | None = None
        # Not read until the group commits have sent what they owe (`_wait_for_commits`).
        self._commit_wait: CommitBacklog | None = None
        # Statistics (read by monitoring).
        self.in_msgs = 0
        self.in_bytes = 0
        self.out_msgs = 0
        self.out_bytes = 0
        self.host = ""
        self.port = 0
        # TLS (server/tls.py): the handshake in progress (a close ends it by closing its
        # transport), what the peer's certificate offers verify_and_map, and whether the
        # server's count of live transports still has this one.
        self._tls_task: asyncio.Task[None] | None = None
        self._tls_pending = False  # TLS or not is still to be decided (next loop turn)
        self.tls = False
        self.tls_first = False  # the handshake came before INFO (handshake_first)
        self.tls_version = ""  # for /connz, once the handshake is done
        self.tls_cipher_suite = ""
        self.peer_certificates: tuple[PeerCertificate, ...] = ()  # /connz?auth=true
        self.certificate: CertificateNames | None = None
        self._released = False

    # ------------------------------------------------------------------ lifecycle

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it.
        transport = cast(asyncio.Transport, transport)
        self.transport = transport
        peer = transport.get_extra_info("peername")
        if isinstance(peer, tuple):
            self.host, self.port = peer_host(str(peer[0])), int(peer[1])
        server = self.server
        if self.authenticator.nonce_required:
            self.nonce = self.authenticator.new_nonce()
        if transport.get_extra_info("ssl_object") is not None:
            self.tls = self.tls_first = True  # handshake_first: the listener did it
        self._send(encoder.info(server.client_info(self)))
        if not server.register(self):
            self.close_with_error(perr.MAX_CONNECTIONS, "maximum connections exceeded")
            return
        if self.websocket is not None:  # its listener's TLS, if any, is done
            if self.tls:
                self._tls_established(transport)
            else:
                self._start_session()
        elif server.tls_context is None:
            self._start_session()
        elif self.tls:
            self._tls_established(transport)
        else:
            # uvloop starts reading only once connection_made has returned, so the choice
            # between TLS and plain text is made on the next turn: reading is paused there
            # before the INFO (queued above, written first) can have been answered.
            self._tls_pending = True
            self.loop.call_soon(self._sniff_tls if server.tls_optional else self._begin_tls)

    def _start_session(self) -> None:
        """The connection is ready for the protocol: the auth and PING timers start
        (after the TLS handshake, as nats-server does)."""
        server = self.server
        settings = server.settings
        if self.authenticator.required:
            ws = self.websocket
            timeout = settings.client_auth_timeout_s if ws is None else ws.auth_timeout_s
            self._auth_handle = self.loop.call_later(timeout, self._auth_timeout)
        # The short first PING comes after CONNECT (`_finish_connect`), as nats-server's
        # `setFirstPingTimer`: none is sent while a client is still to log in.
        self._ping_handle = self.loop.call_later(self.ping_interval_s, self._ping_tick)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed:
            self.close_reason = self.close_reason or ("client closed" if exc is None else str(exc))
        self._teardown()
        self._release()

    def _release(self) -> None:
        """Tell the server this transport is gone, once (a failed TLS handshake closes
        its transport without `connection_lost` reaching this protocol)."""
        if not self._released:
            self._released = True
            self.server.transport_closed()

    def _teardown(self) -> None:
        if self.closed and self.transport is None:
            return
        self.closed = True
        for handle in (self._ping_handle, self._auth_handle, self._write_paused_handle):
            if handle is not None:
                handle.cancel()
        if self._commit_wait is not None:
            self._commit_wait.forget(self._commits_drained)
            self._commit_wait = None
        router = self.router
        subs, self.subs = self.subs, {}  # the closed-connections ring keeps them
        for sub in subs.values():
            router.unsubscribe(sub)
        self._out.clear()
        self._out_bytes = 0
        self.server.unregister(self, subs)
        if self._admitted is not None:
            self.authenticator.release(self._admitted)
            self._admitted = None
        self.transport = None

    def close(self, reason: str) -> None:
        """Flush what is buffered, then close."""
        if self.closed:
            return
        self.close_reason = reason
        self.parser.paused = True  # no operation after this one is applied
        self._flush()
        self.closed = True
        transport = self.transport
        self._teardown()
        if transport is not None:
            transport.close()

    @property
    def issuer_key(self) -> str:
        """nats-server's `issuerForClient`: the key that issued a user JWT (the account's
        or one of its signing keys), an nkey user's account; "" for other users."""
        login = self.login
        if login is None:
            return ""
        if login.jwt is not None:
            return login.jwt.signing_key or login.jwt.account
        return login.account if isinstance(login.entry, NkeyUser) else ""

    def request_info(self, shared: bool) -> dict[str, Any]:
        """nats-server's `ClientInfo` of this client as a service import's
        `Nats-Request-Info` carries it (`getClientInfo`): its account and round-trip time;
        with the import's `share`, also when it connected, from where, its id, user,
        name, library, the server, a JWT user's JWT, name and tags, the key that issued
        it (an nkey user's account) and the kind of client."""
        rtt = round(self.rtt_s * 1e9) if self.rtt_s else 0
        if not shared:
            return {"acc": self.account.name, **({"rtt": rtt} if rtt else {})}
        # Imported here: a server without JetStream never loads `brook.jetstream`.
        from brook.jetstream.models.info import format_ts_ns

        info: dict[str, Any] = {
            "start": format_ts_ns(round(self.started_at * 1e9)),
            "host": self.host,
            "id": self.cid,
            "acc": self.account.name,
        }
        for key, value in (("user", self.user), ("name", self.name), ("lang", self.lang)):
            if value:
                info[key] = value
        if self.version:
            info["ver"] = self.version
        if rtt:
            info["rtt"] = rtt
        info["server"] = self.server.server_name
        user = self.jwt_user
        if user is not None and user.token:
            info["jwt"] = user.token
        if self.issuer_key:
            info["issuer_key"] = self.issuer_key
        if user is not None:  # nats-server's `nameTag` and `tags` of a client: its JWT's
            if user.name:
                info["name_tag"] = user.name
            if user.tags:
                info["tags"] = list(user.tags)
        info["kind"] = "Client"
        info["client_type"] = "websocket" if self.websocket is not None else "nats"
        return info

    def close_with_error(self, err_text: str, reason: str) -> None:
        self._send(encoder.err(err_text))
        self.close(reason)

    def abort(self, reason: str) -> None:
        """Drop the connection now, discarding unsent output (slow consumers)."""
        if self.closed:
            return
        self.close_reason = reason
        self.parser.paused = True
        self.closed = True
        transport = self.transport
        self._teardown()
        if transport is not None:
            transport.abort()

    def reconfigure(self, settings: Settings) -> None:
        """A config reload's limits for this live connection (server/reload.py), as
        nats-server applies them to its clients: the largest payload (still lowered to a
        user JWT's), the longest protocol line, the PING interval (a WebSocket
        listener's own stays) and protocol tracing."""
        self._trace = settings.trace
        max_payload = settings.max_payload_bytes
        user = self.jwt_user
        if user is not None and user.max_payload >= 0:
            max_payload = min(max_payload, user.max_payload)
        self.parser.max_payload = max_payload
        self.parser.max_control_line = settings.max_control_line_bytes
        websocket = self.websocket
        if websocket is None or websocket.ping_interval_s is None:
            self.ping_interval_s = settings.ping_interval_s

    # ------------------------------------------------------------------ input

    def data_received(self, data: bytes) -> None:
        if self.closed:
            return
        self.last_in = time.monotonic()
        if self._trace:
            log.debug("cid=%d <<- %r", self.cid, data[:_TRACE_BYTES_MAX])
        if not self.connected and self._tls_pending:
            # Bytes before the TLS decision: the client spoke before reading the INFO.
            # With allow_non_tls that is plain text; a TLS port cannot take them.
            if not self.server.tls_optional:
                self._tls_failed("TLS handshake error: client data before the TLS handshake")
                return
            self._tls_pending = False
            self._start_session()
        if (
            not self.connected
            and self.parser.buffered_bytes == 0
            and data[:1] not in (b"C", b"c")
            and self.authenticator.required
            and not self._login_without_connect()
        ):
            # nats-server decides on an operation's first byte: before CONNECT, anything
            # that cannot start a CONNECT (even garbage or a blank) is an authorization
            # violation, not a protocol error, unless it logs in the no_auth_user.
            self.close_with_error(perr.AUTH_VIOLATION, "operation before CONNECT")
            return
        backlog = self.server.commit_backlog
        if backlog is not None:
            backlog.contributed = False
        try:
            self.parser.feed(data)
        except ProtocolError as exc:
            log.debug("cid=%d protocol error: %s", self.cid, exc.reason)
            if exc.err_text is None:
                self.close(f"protocol violation: {exc.reason}")
            else:
                self.close_with_error(exc.err_text, f"protocol violation: {exc.reason}")
        except Exception:
            log.exception("cid=%d internal error; closing this connection", self.cid)
            self.close("internal error")
        if backlog is not None and backlog.contributed and backlog.over:
            self._wait_for_commits(backlog)

    def _wait_for_commits(self, backlog: CommitBacklog) -> None:
        """This input published to file streams while too many of their PubAcks wait for
        an fsync: stop reading until they are sent (jetstream/backlog.py), so a publisher
        that does not wait for its acks is slowed down by TCP instead of filling memory."""
        if self._commit_wait is not None or self.closed or self.transport is None:
            return
        self._commit_wait = backlog
        self.transport.pause_reading()
        backlog.wait(self._commits_drained)

    def _commits_drained(self) -> None:
        self._commit_wait = None
        if self.transport is not None and not self.closed:
            self.transport.resume_reading()

    def on_ping(self) -> None:
        if not self._require_connect():
            return
        self._send(encoder.PONG)
        if self.connected and not self._info_sent_after_pong:
            # nats-server follows the first PONG after CONNECT with an async INFO, only for
            # protocol-1 clients, and only then (a later switch to protocol 1 gets none).
            self._info_sent_after_pong = True
            if self.protocol >= 1:
                self._send(encoder.info(self.server.client_info(self, connect_info=True)))

    def send_lame_duck_info(self) -> bool:
        """Lame-duck mode's INFO (`"ldm":true`, server/lameduck.py), sent as nats-server
        sends async INFOs: to protocol-1 clients that have had their first PONG. False
        when this client is not one of them."""
        if self.protocol >= 1 and self._info_sent_after_pong and not self.closed:
            self._send(encoder.info(self.server.client_info(self, lame_duck=True)))
            return True
        return False

    def on_pong(self) -> None:
        if self.pings_out > 0:
            now = time.monotonic()
            self.rtt_s = now - self.ping_sent_at
            self.rtt_measured_at = now
        self.pings_out = 0

    def on_sub(self, subject: bytes, queue: bytes | None, sid: bytes) -> None:
        if not self._require_connect():
            return
        # nats-server's order: permissions, the subscription limit (even for a re-used
        # sid), then the subject, then the duplicate sid.
        if not may_subscribe(self.perms, subject, queue):
            self._send(encoder.err(perr.subscribe_violation(subject, queue)))
            self._log_violation(
                f"Subscription Violation - Subject {_go_quote(subject)}, SID {sid.decode()}"
                if queue is None
                else f"Subscription Violation - Subject {_go_quote(subject)}, "
                f"Queue: {_go_quote(queue)}, SID {sid.decode()}"
            )
            return
        limit = self.max_subs
        if limit >= 0 and len(self.subs) >= limit:
            self._send(encoder.err(perr.MAX_SUBSCRIPTIONS))
            return
        if not is_valid_subject(subject) or (queue is not None and not queue):
            self._send(encoder.err(perr.INVALID_SUBJECT))
            return
        if sid in self.subs:
            if self.verbose:
                self._send(encoder.OK)
            return
        sub = Subscription(self, subject, sid, queue)
        self.subs[sid] = sub
        self.router.subscribe(sub)
        if self.verbose:
            self._send(encoder.OK)

    def on_unsub(self, sid: bytes, max_msgs: int | None) -> None:
        if not self._require_connect():
            return
        sub = self.subs.get(sid)
        if sub is not None:
            if max_msgs is None or sub.delivered >= max_msgs:
                self.remove_subscription(sub)
            else:
                sub.max_msgs = max_msgs
        if self.verbose:
            self._send(encoder.OK)

    def remove_subscription(self, sub: Subscription) -> None:
        if self.subs.get(sub.sid) is sub:
            del self.subs[sub.sid]
        self.router.unsubscribe(sub)

    def _log_violation(self, text: str) -> None:
        """A refused publish or subscription, logged as nats-server logs it: at error
        level, with its words, after whom the client logged in as."""
        log.error('cid=%d - "%s" - %s', self.cid, self.auth_user, text)

    def _refuse_publish(self, subject: bytes | None, reply: bytes | None) -> None:
        if subject is not None:
            self._send(encoder.err(perr.publish_violation(subject)))
            self._log_violation(f"Publish Violation - Subject {_go_quote(subject)}")
        elif reply is not None:
            self._send(encoder.err(perr.reply_violation(reply)))
            self._log_violation(f"Publish Violation - Reply {_go_quote(reply)}")

    # ------------------------------------------------------------------ output

    def _send(self, data: bytes) -> None:
        if not self.closed:
            QueuedOutput._send(self, data)

    def _write(self, transport: asyncio.Transport, data: bytes) -> None:
        if self._trace:
            log.debug("cid=%d ->> %r", self.cid, data[:_TRACE_BYTES_MAX])
        transport.write(data)
        self._written += len(data)

    def _output_limit(self) -> int:
        return self.server.settings.max_pending_bytes

    def _output_over_limit(self) -> None:
        self._slow_consumer("socket buffer over max_pending")

    @property
    def last_activity(self) -> float:
        """Wall-clock time of the last bytes received (derived, so reads stay cheap)."""
        return self.started_at + (self.last_in - self.started_mono)

    def _sent(self) -> int:
        buffered = self.transport.get_write_buffer_size() if self.transport is not None else 0
        return self._written - buffered

    def pause_writing(self) -> None:
        # The kernel is not taking our bytes fast enough. As nats-server's write deadline,
        # a client is slow only if it takes nothing at all for `write_deadline_s`; one that
        # keeps reading, however far behind, is bounded by max_pending instead.
        if self._write_paused_handle is None:
            self._sent_at_check = self._sent()
            self._write_paused_handle = self.loop.call_later(
                self.server.settings.write_deadline_s, self._write_deadline
            )

    def _write_deadline(self) -> None:
        self._write_paused_handle = None
        sent = self._sent()
        if sent == self._sent_at_check:
            self._slow_consumer("write deadline exceeded")
        elif not self.closed:
            self.pause_writing()  # it made progress: check again after another deadline

    def resume_writing(self) -> None:
        if self._write_paused_handle is not None:
            self._write_paused_handle.cancel()
            self._write_paused_handle = None

    def _slow_consumer(self, reason: str) -> None:
        if self.closed:
            return
        self.server.slow_consumers += 1
        log.warning("cid=%d slow consumer (%s): disconnecting", self.cid, reason)
        self.abort(f"slow consumer: {reason}")

    # ------------------------------------------------------------------ timers

    def _ping_tick(self) -> None:
        self._ping_handle = None
        if self.closed:
            return
        now = time.monotonic()
        settings = self.server.settings
        action = ping_decision(
            now=now,
            last_in=self.last_in,
            ping_interval_s=self.ping_interval_s,
            pings_out=self.pings_out,
            max_pings_out=settings.max_pings_out,
            rtt_measured_at=self.rtt_measured_at,
        )
        if action is PingAction.STALE:
            self.close_with_error(perr.STALE_CONNECTION, "stale connection")
            return
        if action is PingAction.PING:
            self.pings_out += 1
            self.ping_sent_at = now
            self._send(encoder.PING)
        self._ping_handle = self.loop.call_later(self.ping_interval_s, self._ping_tick)


def _go_quote(text: bytes) -> str:
    """`text` as Go's `%q` writes it in nats-server's log lines."""
    return json.dumps(text.decode("utf-8", "replace"), ensure_ascii=False)
