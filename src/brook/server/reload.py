"""A config reload (SIGHUP, `$SYS.REQ.SERVER.<id>.RELOAD`) as nats-server's reload.go
does it (ADR 0042).

The settings are read again from where the running ones came from (the config file, with
the `brook serve` flags over it again, as nats-server's `FlagSnapshot`), then compared
with them option by option, in the order of nats-server's `Options` (`diffOptions`). The
first option that cannot change while the server runs refuses the whole reload, in
nats-server's words ("config reload not supported for Port: old=4222, new=4223"), and the
running settings stay. Otherwise every change is applied, each logged as nats-server logs
it ("Reloaded: max_payload = 2000"), then "Reloaded server configuration":

* limits: `max_payload` (INFO and every connection), `max_control_line`,
  `ping_interval`, `ping_max`, `write_deadline`, `auth_timeout`; `max_connections` closes
  the newest clients over it (`-ERR 'maximum connections exceeded'`);
* logging: `debug`, `trace`, `logtime`, `logtime_utc`, `log_file`, and `pid_file` (the pid
  written to the new file), through the process owner's `Server.process_reload` (cli/main.py);
* users, nkeys, tokens, permissions and `no_auth_user` (within nats-server's rules): a new
  `Authenticator`, then every client checked again (`ClientLogin.reauthorize`, nats-server's
  `reloadAuthorization`): gone or moved to another account, closed; no longer logged in by
  its credentials, `-ERR 'Authorization Violation'`; else its user's new permissions,
  which drop the subscriptions they no longer allow;
* `tls {}`: the certificate, key and CA read again (a certificate renewed in place
  too), for the handshakes that follow; new `pinned_certs` close the clients they do not
  pin;
* JetStream's `max_memory_store` and `max_file_store`, raised;
* accounts of users alone, added (a router, the system imports) or taken out of the file
  (their users' clients closed; the account stays, empty).

Refused as by nats-server: `server_name`, `host`, `port`, the monitoring ports,
`max_subscriptions`, `max_pending`, `system_account`, operators, the JetStream store
directory or a decrease of its limits, `verify_and_map`, `allow_non_tls`. Refused by Brook
although nats-server reloads them (each with a reason naming the option): the accounts'
exports, imports, mappings and JetStream, JetStream turned on or off, leafnodes,
`websocket {}`, `ports_file_dir`, TLS turned on or off or `handshake_first`. An option
Brook does not know how to reload is refused too, with nats-server's generic words.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import math
import ssl
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from brook.config.conf import load_conf_file
from brook.config.settings import AccountSettings, ConfigError, Settings, TLSSettings
from brook.durations import go_string
from brook.protocol import errors as perr
from brook.routing.internal import InternalClient
from brook.server.auth import Authenticator
from brook.server.tls import public_key_pin, server_context, tls_material

if TYPE_CHECKING:
    from brook.server.server import Server

log = logging.getLogger("brook.server")

Action = Callable[[], None]


class ReloadError(ConfigError):
    """A reload refused, in nats-server's words; the running settings are kept."""


def reread(settings: Settings) -> Settings:
    """The settings read again from the file (and the `brook serve` flags) that gave
    `settings`."""
    if not settings.config_file:
        raise ReloadError("can only reload config when a file is provided using -c or --config")
    if settings.serve_args is not None:
        from brook.config.flags import parse_serve_args

        return parse_serve_args(list(settings.serve_args))
    return load_conf_file(settings.config_file)


def _go(value: object) -> str:
    """`value` as Go's `%v` writes an option's value."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


def _refused(name: str, old: object, new: object) -> ReloadError:
    return ReloadError(f"config reload not supported for {name}: old={_go(old)}, new={_go(new)}")


def _brook_refused(name: str, reason: str) -> ReloadError:
    """An option nats-server reloads and Brook does not (yet): named, with why."""
    return ReloadError(f"config reload not supported for {name}: {reason} (Brook)")


def _duration(seconds: float) -> str:
    return go_string(round(seconds * 1e9))


class _Plan:
    """What a reload changes: the notices, in nats-server's order, and what applies them."""

    def __init__(self) -> None:
        self.notices: list[str] = []
        self.actions: list[Action] = []
        self.after: list[Action] = []  # once the reload is logged, as nats-server's order

    def notice(self, text: str, action: Action | None = None) -> None:
        self.notices.append(f"Reloaded: {text}")
        if action is not None:
            self.actions.append(action)


# Settings compared by this module's own steps (or not options at all).
_HANDLED = frozenset(
    [
        "server_name",
        "host",
        "port",
        "trace",
        "debug",
        "max_connections",
        "max_subscriptions",
        "auth",
        "accounts",
        "mappings",
        "system_account",
        "ping_interval_s",
        "max_pings_out",
        "http_host",
        "http_port",
        "https_port",
        "auth_timeout_s",
        "max_control_line_bytes",
        "max_payload_bytes",
        "max_pending_bytes",
        "leafnodes",
        "jetstream",
        "websocket",
        "ports_file_dir",
        "tls",
        "allow_non_tls",
        "write_deadline_s",
        "operator",
        "config_file",
        "serve_args",
        "process",
    ]
)


def plan(server: Server, new: Settings) -> _Plan:
    """Compare the running settings with `new`: a `ReloadError` for the first change that
    cannot be made, else the changes to make."""
    old = server.settings
    steps = _Plan()
    for name, go_name in (("server_name", "ServerName"), ("host", "Host")):
        if getattr(old, name) != getattr(new, name):
            raise _refused(go_name, getattr(old, name), getattr(new, name))
    bound = old.port if old.port > 0 else server.port
    if new.port > 0 and new.port != bound:  # 0 and -1: any port, the one bound stays
        raise _refused("Port", bound, new.port)
    if old.trace != new.trace:
        steps.notice(f"trace = {_go(new.trace)}", lambda: _logging(server, new))
    if old.debug != new.debug:
        steps.notice(f"debug = {_go(new.debug)}", lambda: _logging(server, new))
    before, after = old.process, new.process
    for name in ("logtime", "logtime_utc"):
        if getattr(before, name) != getattr(after, name):
            steps.notice(f"{name} = {_go(getattr(after, name))}")
    for field in dataclasses.fields(before):  # what nats-server does not reload either
        if field.name not in ("logtime", "logtime_utc", "pid_file", "log_file"):
            _not_reloaded(field.name, getattr(before, field.name), getattr(after, field.name))
    if old.max_connections != new.max_connections:
        steps.notice(f"max_connections = {new.max_connections}")
        steps.actions.append(lambda: _max_connections(server, new.max_connections))
    if old.max_subscriptions != new.max_subscriptions:
        raise _refused("MaxSubs", old.max_subscriptions, new.max_subscriptions)
    _auth(server, old, new, steps)
    if old.system_account != new.system_account:
        raise _refused("SystemAccount", old.system_account, new.system_account)
    for name, text, show in (
        ("ping_interval_s", "ping_interval", _duration),
        ("max_pings_out", "ping_max", str),
    ):
        if getattr(old, name) != getattr(new, name):
            steps.notice(f"{text} = {show(getattr(new, name))}")
    for name, go_name in (("http_host", "HTTPHost"), ("http_port", "HTTPPort")):
        if getattr(old, name) != getattr(new, name):
            raise _refused(go_name, getattr(old, name), getattr(new, name))
    if old.https_port != new.https_port:
        raise _refused("HTTPSPort", old.https_port, new.https_port)
    if old.auth_timeout_s != new.auth_timeout_s:
        steps.notice(f"authorization timeout = {new.auth_timeout_s:g}")
    for name, text in (
        ("max_control_line_bytes", "max_control_line"),
        ("max_payload_bytes", "max_payload"),
    ):
        if getattr(old, name) != getattr(new, name):
            steps.notice(f"{text} = {getattr(new, name)}")
    if old.max_pending_bytes != new.max_pending_bytes:
        raise _refused("MaxPending", old.max_pending_bytes, new.max_pending_bytes)
    if old.leafnodes != new.leafnodes:
        raise _brook_refused("LeafNode", "the leafnodes block changed")
    _jetstream(server, old, new, steps)
    if old.websocket != new.websocket:
        raise _brook_refused("Websocket", "the websocket block changed")
    if before.pid_file != after.pid_file and after.pid_file:  # nats-server: "" changes nothing
        steps.notice(f"pid_file = {after.pid_file}")
    if old.ports_file_dir != new.ports_file_dir:
        raise _brook_refused(
            "PortsFileDir", f"old={_go(old.ports_file_dir)}, new={_go(new.ports_file_dir)}"
        )
    if before.log_file != after.log_file:
        steps.notice(f"log_file = {after.log_file}")
    if before != after and server.process_reload is not None:
        # The log's format and file and the pid file belong to the process that owns
        # the server (`brook serve`, cli/main.py), which applies them.
        steps.actions.append(functools.partial(server.process_reload, after))
    _tls(server, old.tls, new.tls, steps)
    if old.allow_non_tls != new.allow_non_tls:
        raise _refused("AllowNonTLS", old.allow_non_tls, new.allow_non_tls)
    if old.write_deadline_s != new.write_deadline_s:
        steps.notice(f"write_deadline = {_duration(new.write_deadline_s)}")
    if old.operator != new.operator:
        raise ReloadError("config reload not supported for TrustedOperators")
    for field in dataclasses.fields(Settings):
        if field.name not in _HANDLED:
            _not_reloaded(field.name, getattr(old, field.name), getattr(new, field.name))
    return steps


# nats-server's names of options Brook keeps under other names, for its refusals.
_GO_NAMES = {
    "pid_file": "PidFile",
    "log_file": "LogFile",
    "logtime": "Logtime",
    "logtime_utc": "LogtimeUTC",
    "log_size_limit": "LogSizeLimit",
    "log_max_num": "LogMaxFiles",
    "lame_duck_duration_s": "LameDuckDuration",
    "lame_duck_grace_period_s": "LameDuckGracePeriod",
}


def _not_reloaded(name: str, before: object, after: object) -> None:
    """A setting no step above reloads: refused if changed, as nats-server refuses an
    option it has no reload for; a block of settings field by field, so the refusal names
    the one that changed (a duration, `..._s`, written as Go writes it)."""
    if before == after:
        return
    if dataclasses.is_dataclass(before) and type(before) is type(after):
        for field in dataclasses.fields(before):
            _not_reloaded(field.name, getattr(before, field.name), getattr(after, field.name))
        return
    if name.endswith("_s") and isinstance(before, float) and isinstance(after, float):
        before, after = _duration(before), _duration(after)
    raise _refused(_GO_NAMES.get(name, name), before, after)


def _auth(server: Server, old: Settings, new: Settings, steps: _Plan) -> None:
    """Users, nkeys, tokens, accounts and `no_auth_user` (nats-server's `Nkeys`, `Users`,
    `Accounts`, `NoAuthUser`, `Username`, `Password`, `Authorization`)."""
    before, after = old.auth, new.auth
    if before.nkeys != after.nkeys:
        steps.notice("authorization nkey users")
    # As nats-server, which compares neither (accounts hold state): both always reload.
    steps.notice("authorization users")
    if old.accounts != new.accounts or old.mappings != new.mappings:
        _accounts(server, old, new, steps)
    steps.notice("accounts")
    if before.no_auth_user != after.no_auth_user:
        # nats-server's one allowed change: dropping a no_auth_user whose user is gone.
        users = {u.user for u in after.users} | {n.nkey for n in after.nkeys}
        if not before.no_auth_user or after.no_auth_user or before.no_auth_user in users:
            raise _refused("NoAuthUser", before.no_auth_user, after.no_auth_user)
    single = [
        (a.users[0].user, a.users[0].password) if a.single_user and a.users else ("", "")
        for a in (before, after)
    ]
    if single[0][0] != single[1][0]:
        steps.notice("authorization username")
    if single[0][1] != single[1][1]:
        steps.notice("authorization password")
    if before.token != after.token:
        steps.notice("authorization token")


def _accounts(server: Server, old: Settings, new: Settings, steps: _Plan) -> None:
    """Accounts of users alone may be added and taken out (their users' clients are then
    closed as any removed user's); any other change to accounts is refused."""
    before = {a.name: a for a in old.accounts}
    after = {a.name: a for a in new.accounts}
    changed = [after[n] for n in after.keys() - before.keys()]
    changed += [before[n] for n in before.keys() - after.keys()]
    system = new.system_account_name
    only_system = [all(n == system for n in names) for names in (before, after)]
    if (
        old.mappings != new.mappings
        or any(before[n] != after[n] for n in before.keys() & after.keys())
        or any(a != AccountSettings(a.name) for a in changed)
        or (only_system[0] != only_system[1] and new.jetstream.enabled)  # `$G`'s JetStream
    ):
        raise _brook_refused(
            "Accounts",
            "Brook reloads the accounts' users, and accounts of users alone added or "
            "removed, not their exports, imports, mappings or JetStream",
        )
    added = sorted(after.keys() - before.keys())
    if added:
        steps.actions.append(lambda: _add_accounts(server, added))


def _add_accounts(server: Server, names: list[str]) -> None:
    system = server.accounts.system_account
    for name in names:
        account = server.accounts.add_configured(name)
        if account is not None and server.system is not None:
            client = InternalClient(account.router, f"{system.name} imports")
            server.system.add_account(name, client)


def _jetstream(server: Server, old: Settings, new: Settings, steps: _Plan) -> None:
    """nats-server's `JetStream`, `StoreDir`, `JetStreamMaxMemory`, `JetStreamMaxStore`:
    the server's limits may only grow (and not from or to none)."""
    before, after = old.jetstream, new.jetstream
    if before == after:
        return
    if before.enabled != after.enabled:
        raise _brook_refused("JetStream", f"old={_go(before.enabled)}, new={_go(after.enabled)}")
    if before.store_path != after.store_path:
        raise ReloadError("config reload not supported for jetstream storage directory")
    for was, now in (
        (before.max_memory_store_bytes, after.max_memory_store_bytes),
        (before.max_file_store_bytes, after.max_file_store_bytes),
    ):
        if was != now and (was < 0) != (now < 0):
            raise ReloadError("config reload not supported for jetstream max memory and max store")
        if now < was:
            raise ReloadError(
                "config reload not supported for decreasing jetstream max memory and store"
            )
    raised = dataclasses.replace(
        before,
        max_memory_store_bytes=after.max_memory_store_bytes,
        max_file_store_bytes=after.max_file_store_bytes,
    )
    if raised != after:
        raise _brook_refused("JetStream", "the jetstream block changed")
    for was, now, name in (
        (before.max_memory_store_bytes, after.max_memory_store_bytes, "max_mem_store"),
        (before.max_file_store_bytes, after.max_file_store_bytes, "max_file_store"),
    ):
        if now != was:
            steps.notice(f"JetStream {name} = {_friendly_bytes(now)}")
    limits = server.accounts.server_limits
    if limits is not None:
        steps.actions.append(
            lambda: limits.raise_to(after.max_memory_store_bytes, after.max_file_store_bytes)
        )


def _friendly_bytes(n: int) -> str:
    """nats-server's `friendlyBytes`: "1.50 GB"."""
    if n < 1024:
        return f"{n} B"
    exponent = min(int(math.log(n) / math.log(1024)), 6)
    return f"{n / 1024**exponent:.2f} {'KMGTPE'[exponent - 1]}B"


def _tls(
    server: Server, before: TLSSettings | None, after: TLSSettings | None, steps: _Plan
) -> None:
    """The client port's `tls {}`: a new context, when what it is made of changed (the
    files too: a certificate renewed in place), for the handshakes that follow; sessions
    already up keep theirs."""
    if before is None and after is None:
        return
    if before is None or after is None:
        raise _brook_refused("TLSConfig", "TLS on the client port is turned on or off at start")
    if before.timeout_s != after.timeout_s:
        steps.notice(f"tls timeout = {after.timeout_s:g}")
    if before.verify_and_map != after.verify_and_map:
        raise _refused("TLSMap", before.verify_and_map, after.verify_and_map)
    material = tls_material(after)
    if material != server.tls_material:
        context = server_context(after)  # a bad file refuses the reload
        if server.tls_first or server.tls_first_fallback_s:
            # The listener holds its context: the new certificate goes into it; the
            # rest of it (CA, verification, version) is the listener's.
            held = ("ca_file", "verify", "min_version")
            if any(getattr(before, name) != getattr(after, name) for name in held):
                raise _brook_refused(
                    "TLSConfig", "with handshake_first only the certificate reloads"
                )
            steps.notice("tls = enabled", lambda: _swap_certificate(server, after))
        else:
            steps.notice("tls = enabled", lambda: setattr(server, "tls_context", context))
        steps.actions.append(lambda: setattr(server, "tls_material", material))
    if before.pinned_certs != after.pinned_certs:
        steps.notice(f"{len(after.pinned_certs)} pinned_certs")
        if after.pinned_certs:
            steps.after.append(lambda: _recheck_pins(server, after.pinned_certs))
    shape = ("handshake_first", "handshake_first_fallback_s")
    if any(getattr(before, name) != getattr(after, name) for name in shape):
        raise _brook_refused("TLSHandshakeFirst", "the client port's listener is set at start")


def _swap_certificate(server: Server, tls: TLSSettings) -> None:
    context = server.tls_context
    assert isinstance(context, ssl.SSLContext)
    context.load_cert_chain(tls.cert_file, tls.key_file)


def _recheck_pins(server: Server, pins: frozenset[str]) -> None:
    """New `pinned_certs`: the client port's connections whose certificate's key is not
    pinned (or that have none) are closed, as nats-server's `recheckPinnedCerts`."""
    refused = []
    for client in server.clients.values():
        if client.websocket is not None:  # the websocket block's own pins, unchanged
            continue
        transport = client.transport
        ssl_object = transport.get_extra_info("ssl_object") if transport is not None else None
        der = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
        if der is None or public_key_pin(der) not in pins:
            refused.append(client)
    if refused:
        log.info("Disconnect %d clients due to pinned certs reload", len(refused))
        for client in refused:
            client.close("TLS handshake error")


def _logging(server: Server, settings: Settings) -> None:
    """`debug` and `trace`: Brook's loggers' level and each connection's tracing."""
    level = logging.DEBUG if settings.debug or settings.trace else logging.INFO
    logging.getLogger("brook").setLevel(level)


def _max_connections(server: Server, most: int) -> None:
    """nats-server closes clients until it is within the new `max_connections`; Brook
    closes the newest."""
    clients = sorted(server.clients.values(), key=lambda c: c.cid)
    over = clients[most:] if len(clients) > most else []
    for client in over:
        client.close_with_error(perr.MAX_CONNECTIONS, "maximum connections exceeded")
    if over:
        log.info("Closed %d connections to fall within max_connections", len(over))


def reload(server: Server, new: Settings) -> None:
    """Apply `new` to the running `server`, or refuse it whole (`ReloadError`)."""
    steps = plan(server, new.validate())
    for text in steps.notices:
        log.info("%s", text)
    server.settings = new
    if server.authenticator.operator is None:  # operator mode's users are JWTs
        server.authenticator = Authenticator(
            new.auth,
            new.operator,
            anonymous_global=new.anonymous_global,
            maps_certificates=new.maps_certificates,
        )
    if server.websocket is not None:
        server.websocket.reload_authenticator()
    for action in steps.actions:
        action()
    for client in list(server.clients.values()):
        client.reconfigure(new)
    for client in list(server.clients.values()):
        client.reauthorize()
    if server.leafnodes is not None:  # spokes logged in as clients, checked again
        server.leafnodes.reauthorize()
    server.config_loaded_at = time.time()
    log.info("Reloaded server configuration")
    for action in steps.after:
        action()
