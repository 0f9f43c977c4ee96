"""Decentralized (JWT) authentication: nats-server's operator mode (ADR 0028).

The config trusts operators (their JWTs; their keys, or only their signing keys with
`strict_signing_key_usage`); the account resolver (MEMORY: the `resolver_preload`
account JWTs) holds the accounts. A client logs in with a user JWT in CONNECT's `jwt`
and, unless the JWT is a bearer token, `sig`: its user key's signature of the INFO's
nonce. `OperatorMode.login` checks what nats-server's `processClientOrLeafAuthentication`
checks, in its order, and logs each refusal with nats-server's words (at debug level, as
there; a wrong source address or connect time at error level, as there): the user JWT
decodes and is valid now; its account (`issuer_account`, or the issuer) is known to the
resolver, issued by a trusted operator key and valid now; the user's issuer is the
account or one of its signing keys (a scoped key then gives the user its template); bearer
tokens are allowed by the account; the connection type is allowed; the nonce signature;
revocations; source address; connect-time windows. What it grants is a `JwtUser`: the
account, the permissions (the user's, else the account's defaults) and limits, and when
the login expires.
"""

from __future__ import annotations

import dataclasses
import datetime
import ipaddress
import itertools
import logging
import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from brook import jwt, limits
from brook.config.settings import OperatorSettings, Permissions, ResponsePermission
from brook.config.settings import SubjectPermission as SubjectLists
from brook.nkey import InvalidNkey, Prefix, decode_public_key, decode_signature, verify
from brook.server.resolver import Resolver, UrlResolver, open_resolver
from brook.subjects import is_valid_subject

log = logging.getLogger("brook.auth")
_NO_ACCOUNT_LIMITS = jwt.AccountLimits()

Clock = Callable[[], float]


@dataclass(frozen=True, slots=True)
class JwtUser:
    """What a user JWT logs a connection in as."""

    public_key: str  # the user's nkey (the JWT's subject)
    account: str  # the account's public key: nats-server names JWT accounts so
    permissions: Permissions | None  # None: no restriction
    max_subs: int  # jwt.NO_LIMIT (-1): none
    max_payload: int
    expires_in_s: float | None  # the JWT's `exp` or its connect-time window ends; None: never
    max_connections: int  # the account's `conn`: its clients at once; -1 none
    # The account JWT's `exp`: its clients are closed then; None: never.
    account_expires_in_s: float | None = None
    # The account JWT's limits (an account added at this login gets JetStream by them).
    account_limits: jwt.AccountLimits = _NO_ACCOUNT_LIMITS
    # What an account JWT update is checked against (`OperatorMode.recheck`): the user
    # JWT's `iat`, whether it is a bearer token, its (or its scoped template's) own
    # `payload` and `subs`, when it ends (unix seconds; None never) and whether its
    # permissions are its own (else the account's `default_permissions`).
    issued_at: int = 0
    bearer: bool = False
    user_payload: int = jwt.NO_LIMIT
    user_subs: int = jwt.NO_LIMIT
    user_ends_at: float | None = None
    own_permissions: bool = False
    # The account signing key that issued the user ("" the account itself) and its scope
    # then (None: unscoped): an update removing or re-scoping the key ends the login.
    signing_key: str = ""
    scope: jwt.UserScope | None = None
    name: str = ""  # the user JWT's name (nats-server's `nameTag` of the client)
    token: str = ""  # the user JWT itself, and its tags (a connect event carries both)
    tags: tuple[str, ...] = ()


class _Refused(Exception):
    """A login refused; the message is what nats-server logs."""

    def __init__(self, reason: str, *, level: int = logging.DEBUG) -> None:
        super().__init__(reason)
        self.level = level


def _key(text: str, prefix: Prefix) -> bytes | None:
    try:
        return decode_public_key(text, prefix)
    except InvalidNkey:
        return None


class OperatorMode:
    """The trusted operators and the MEMORY resolver's accounts; `login` per CONNECT."""

    def __init__(self, settings: OperatorSettings, clock: Clock = time.time) -> None:
        trusted: set[str] = set()
        for token in settings.jwts:
            operator = jwt.decode_operator(token)  # checked when the config was read
            if not operator.strict_signing_key_usage:
                trusted.add(operator.subject)
            trusted.update(operator.signing_keys)
        self._trusted = frozenset(trusted)
        # The first operator's key and whether it may sign accounts itself, as
        # nats-server's `getOperatorKeys` (claim updates and deletes check them).
        first = jwt.decode_operator(settings.jwts[0])
        self.operator_key = first.subject
        self.strict = first.strict_signing_key_usage
        self.operator_keys = frozenset(
            ({first.subject} if not first.strict_signing_key_usage else set())
            | set(first.signing_keys)
        )
        self.resolver: Resolver = open_resolver(settings)
        self._pinned = settings.pinned_accounts
        self.pinned_fails = 0  # logins refused as their account is not pinned
        self._accounts: dict[str, jwt.AccountClaims] = {}  # decoded once per account
        self._connections: dict[str, int] = {}  # admitted clients by account
        self._clock = clock

    def claims(self, name: str) -> jwt.AccountClaims | None:
        """The account JWT logins to `name` were last checked against (None: none yet)."""
        return self._accounts.get(name)

    def replace(self, claims: jwt.AccountClaims) -> None:
        """An account's JWT was updated (over `$SYS`): logins are checked against it."""
        self._accounts[claims.subject] = claims

    def forget(self, name: str) -> None:
        """An account's JWT was deleted: its next login looks it up again."""
        self._accounts.pop(name, None)

    def account_to_fetch(self, options: dict[str, Any]) -> str | None:
        """With the URL resolver, the account of CONNECT's user JWT when its JWT is not
        held yet: the login waits for `fetch` (ADR 0034). None otherwise."""
        if not isinstance(self.resolver, UrlResolver):
            return None
        token = options.get("jwt")
        if not isinstance(token, str):
            return None
        try:
            user = jwt.decode_user(token)
        except jwt.InvalidJwt:
            return None  # refused by the login, as ever
        name = user.issuer_account or user.issuer
        return name if self.needs_fetch(name) else None

    def needs_fetch(self, name: str) -> bool:
        """An account whose JWT the URL resolver has not fetched yet."""
        resolver = self.resolver
        return (
            isinstance(resolver, UrlResolver)
            and name not in self._accounts
            and resolver.load(name) is None
            and _key(name, Prefix.ACCOUNT) is not None
        )

    async def check_resolver(self) -> None:
        """At start: the URL resolver's account server must answer (ConfigError if not)."""
        if isinstance(self.resolver, UrlResolver):
            await self.resolver.check()

    async def fetch(self, name: str) -> None:
        """Fetch the account's JWT (the URL resolver) so that a login or lookup finds it."""
        if isinstance(self.resolver, UrlResolver):
            await self.resolver.fetch(name)

    def lookup(self, name: str) -> jwt.AccountClaims | None:
        """The resolver's account `name` if trusted and valid now (nats-server's
        `lookupAccount` of an import's exporter); None, the reason logged, if not."""
        try:
            return self._account(name, self._clock())
        except _Refused as exc:
            log.debug("account %s not found for an import: %s", name, exc)
            return None

    def trusted(self, issuer: str) -> bool:
        return issuer in self._trusted

    def login(
        self, options: dict[str, Any], nonce: str, *, host: str, connection_type: str
    ) -> JwtUser | None:
        """Whom CONNECT's `jwt` and `sig` log in as; None (the reason logged) if refused.
        `connection_type`: STANDARD or WEBSOCKET, as user JWTs name them."""
        try:
            return self._login(options, nonce, host, connection_type)
        except _Refused as refused:
            log.log(refused.level, "%s", refused)
            return None

    def _login(
        self, options: dict[str, Any], nonce: str, host: str, connection_type: str
    ) -> JwtUser:
        token = options.get("jwt")
        if not isinstance(token, str) or not token:
            raise _Refused("Authentication requires a user JWT")
        try:
            user = jwt.decode_user(token)
        except jwt.InvalidJwt as exc:
            raise _Refused(f"User JWT not valid: {exc}") from None
        now = self._clock()
        if found := jwt.issues(user, now):
            raise _Refused(f"User JWT no longer valid: {found}")
        name = user.issuer_account or user.issuer
        if self._pinned and name not in self._pinned:
            self.pinned_fails += 1
            raise _Refused(f"Account {name} not listed as operator pinned account")
        account = self._account(name, now)
        granted = user.limits
        if user.issuer != account.subject:
            if user.issuer not in account.signing_keys:
                raise _Refused("User JWT issuer is not known")
            scope = account.signing_keys[user.issuer]
            if scope is not None:
                if not user.limits.empty:
                    raise _Refused(
                        "User JWT is not valid: scoped users require no permissions or limits set"
                    )
                granted = _expand_templates(scope.template, user, account)
        if granted.bearer_token and account.limits.disallow_bearer:
            raise _Refused("Account does not allow bearer tokens")
        _check_connection_type(granted.allowed_connection_types, connection_type)
        if not granted.bearer_token:
            _check_signature(user.subject, options.get("sig"), nonce)
        if account.revoked(user.subject, user.issued_at):
            raise _Refused("User authentication revoked")
        if not _source_allowed(granted.src, host):
            raise _Refused(f"Bad src Ip {host}", level=logging.ERROR)
        window_s = _connect_window(granted, now)
        own = _permissions(granted)
        permissions = own or _permissions(account.default_permissions)
        expires_in_s = None
        if user.expires:
            expires_in_s = float(max(user.expires - int(now), 0))
        if window_s is not None and (expires_in_s is None or window_s < expires_in_s):
            expires_in_s = window_s
        return JwtUser(
            public_key=user.subject,
            account=account.subject,
            permissions=permissions,
            max_subs=_min_limit(granted.subs, account.limits.subs),
            max_payload=_min_limit(granted.payload, account.limits.payload),
            expires_in_s=expires_in_s,
            max_connections=account.limits.conn,
            account_expires_in_s=(
                float(max(account.expires - int(now), 0)) if account.expires else None
            ),
            account_limits=account.limits,
            issued_at=user.issued_at,
            bearer=granted.bearer_token,
            user_payload=granted.payload,
            user_subs=granted.subs,
            user_ends_at=None if expires_in_s is None else now + expires_in_s,
            own_permissions=own is not None,
            signing_key=user.issuer if user.issuer != account.subject else "",
            scope=account.signing_keys.get(user.issuer),
            name=user.name,
            token=user.token,
            tags=user.tags,
        )

    def recheck(self, user: JwtUser, account: jwt.AccountClaims) -> JwtUser | str:
        """A logged-in user after its account JWT was updated (nats-server's
        `updateAccountClaimsWithRefresh` for each client): the login with the account's
        new limits, expiry and default permissions, or why it ends now (the `-ERR` text:
        a bearer token the account disallows now, or a revoked user; "" for a user whose
        signing key the account removed or re-scoped, closed without one as there)."""
        if user.bearer and account.limits.disallow_bearer:
            log.debug("Bearer User JWT not allowed")
            return "Authorization Violation"
        if account.revoked(user.public_key, user.issued_at):
            log.debug("User Authentication Revoked")
            return "User Authentication Revoked"
        key = user.signing_key
        if key and (key not in account.signing_keys or account.signing_keys[key] != user.scope):
            log.debug("User JWT issuer signing key %s removed or re-scoped", key)
            return ""
        now = self._clock()
        return dataclasses.replace(
            user,
            permissions=(
                user.permissions
                if user.own_permissions
                else _permissions(account.default_permissions)
            ),
            max_subs=_min_limit(user.user_subs, account.limits.subs),
            max_payload=_min_limit(user.user_payload, account.limits.payload),
            expires_in_s=(None if user.user_ends_at is None else max(user.user_ends_at - now, 0.0)),
            max_connections=account.limits.conn,
            account_expires_in_s=(
                float(max(account.expires - int(now), 0)) if account.expires else None
            ),
            account_limits=account.limits,
        )

    def admit(self, user: JwtUser) -> bool:
        """Count a logged-in client against its account's `conn` limit; False (nothing
        counted) when the account has as many as it may (nats-server's
        `MaxTotalConnectionsReached`, checked as the client registers with it)."""
        count = self._connections.get(user.account, 0)
        account = self._accounts.get(user.account)  # its latest JWT (claim updates)
        limit = account.limits.conn if account is not None else user.max_connections
        if 0 <= limit <= count:
            return False
        self._connections[user.account] = count + 1
        return True

    def release(self, user: JwtUser) -> None:
        """An admitted client is gone."""
        count = self._connections.pop(user.account, 0) - 1
        if count > 0:
            self._connections[user.account] = count

    def _account(self, name: str, now: float) -> jwt.AccountClaims:
        """The resolver's account `name`, checked as nats-server's `verifyAccountClaims`."""
        account = self._accounts.get(name)
        if account is None or (self.resolver.full and jwt.issues(account, now)):
            # nats-server looks an expired account up again: a newer JWT may be stored.
            if _key(name, Prefix.ACCOUNT) is None:
                raise _Refused("Account JWT lookup error: will only fetch valid account keys")
            token = self.resolver.load(name)
            if token is None:
                raise _Refused("Account JWT lookup error: account missing")
            try:
                account = jwt.decode_account(token)
            except jwt.InvalidJwt as exc:
                raise _Refused(f"Account JWT lookup error: {exc}") from None
            if account.subject != name or account.issuer not in self._trusted:
                raise _Refused("Account JWT lookup error: account validation failed")
            self._accounts[name] = account
        if jwt.issues(account, now):
            raise _Refused("Account JWT lookup error: account validation failed")
        return account


_MUSTACHE = re.compile(r"{{2}([^}]+)}{2}")
_TEMPLATE_EXPANSIONS_MAX = 4096  # nats-server's maxPermTemplateSubjectExpansions


def _expand_templates(
    template: jwt.UserLimits, user: jwt.UserClaims, account: jwt.AccountClaims
) -> jwt.UserLimits:
    """A scoped signing key's template for this user (nats-server's
    `processUserPermissionsTemplate`): `{{name()}}`, `{{subject()}}`,
    `{{account-name()}}`, `{{account-subject()}}`, `{{tag(x)}}` and `{{account-tag(x)}}`
    replaced (a tag function by each of the values of its `x:` tags); an allow entry that
    does not come out a valid subject is dropped, a deny entry refuses the login, and an
    allow list emptied that way becomes a deny of everything."""

    def values(op: str, entry: str, strict: bool) -> list[str]:
        low = op.lower()
        if low == "name()":
            return [user.name]
        if low == "subject()":
            return [user.subject]
        if low == "account-name()":
            return [account.name]
        if low == "account-subject()":
            return [user.issuer_account]
        for prefix, tags in (("tag(", user.tags), ("account-tag(", account.tags)):
            if low.startswith(prefix) and op.endswith(")"):
                name = op[len(prefix) : -1].lower()
                found = [t.removeprefix(f"{name}:") for t in tags if t.startswith(f"{name}:")]
                if found:
                    return found
                if strict:
                    raise _Refused("User JWT generated invalid permissions")
                return [" "]  # an invalid subject, dropped below
        raise _Refused(f"User JWT generated invalid permissions: {op!r} in {entry!r}")

    def apply(entries: tuple[str, ...], strict: bool) -> tuple[str, ...]:
        if not any(_MUSTACHE.search(entry) for entry in entries):
            return entries
        out: list[str] = []
        for entry in entries:
            tokens = _MUSTACHE.findall(entry)
            choices = [values(token.strip(), entry, strict) for token in tokens]
            if len(out) + math.prod(len(c) for c in choices) > _TEMPLATE_EXPANSIONS_MAX:
                raise _Refused("User JWT generated invalid permissions")
            for combination in itertools.product(*choices):
                subject = entry
                for token, value in zip(tokens, combination, strict=True):
                    subject = subject.replace("{{" + token + "}}", value)
                if is_valid_subject(subject.encode()):
                    out.append(subject)
                elif strict:
                    raise _Refused("User JWT generated invalid permissions")
        return tuple(out)

    pub, sub = template.pub, template.sub
    pub_allow, sub_allow = apply(pub.allow, False), apply(sub.allow, False)
    pub_deny, sub_deny = apply(pub.deny, True), apply(sub.deny, True)
    if pub.allow and not pub_allow and ">" not in pub_deny:
        pub_deny += (">",)
    if sub.allow and not sub_allow and ">" not in sub_deny:
        sub_deny += (">",)
    return dataclasses.replace(
        template,
        pub=jwt.Permission(pub_allow, pub_deny),
        sub=jwt.Permission(sub_allow, sub_deny),
    )


def _min_limit(value: int, limit: int) -> int:
    """nats-server's `minLimit`: `value` lowered to `limit`, -1 meaning none. A user
    JWT's absent limit is 0, and a limit of 0 (as in nats-server; nsc writes -1)."""
    if limit == jwt.NO_LIMIT:
        return value
    return limit if value == jwt.NO_LIMIT else min(value, limit)


def _check_connection_type(allowed: tuple[str, ...], connection_type: str) -> None:
    if not allowed:
        return
    known = {kind.upper() for kind in allowed} & jwt.CONNECTION_TYPES
    if len(known) != len({kind.upper() for kind in allowed}):
        unknown = [k.upper() for k in allowed if k.upper() not in jwt.CONNECTION_TYPES]
        log.debug("invalid connection types %s", unknown)
        if not known:
            raise _Refused(f"invalid connection types {unknown}")
    if connection_type not in known:
        raise _Refused("Connection type not allowed")


def _check_signature(user: str, sig: object, nonce: str) -> None:
    if not isinstance(sig, str) or not sig:
        raise _Refused("Signature missing")
    signature = decode_signature(sig)
    if signature is None:
        raise _Refused("Signature not valid base64")
    key = _key(user, Prefix.USER)
    if key is None:
        raise _Refused("User nkey not valid")
    if not verify(key, nonce.encode(), signature):
        raise _Refused("Signature not verified")


def _source_allowed(cidrs: tuple[str, ...], host: str) -> bool:
    """nats-server's `validateSrc`: no list allows any address."""
    if not cidrs:
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    for cidr in cidrs:
        try:
            network = ipaddress.ip_network(cidr, strict=False)
        except ValueError:
            return False
        if address.version == network.version and address in network:
            return True
    return False


def _connect_window(limits_: jwt.UserLimits, now: float) -> float | None:
    """nats-server's `validateTimes`: None without windows; else the seconds left in the
    window `now` is in (the longest, if several), or a refusal outside them all."""
    if not limits_.times:
        return None
    from zoneinfo import ZoneInfo

    zone = ZoneInfo(limits_.locale) if limits_.locale else None  # checked by jwt.issues
    moment = datetime.datetime.fromtimestamp(now, zone).astimezone(zone)
    best: float | None = None
    for window in limits_.times:
        start = _at(moment, window.start)
        end = _at(moment, window.end)
        left = None
        if start < moment < end:
            left = (end - moment).total_seconds()
        elif start > end:  # across midnight
            if end > moment:
                left = (end - moment).total_seconds()
            elif start < moment < end + datetime.timedelta(days=1):
                left = (end + datetime.timedelta(days=1) - moment).total_seconds()
        if left is not None and (best is None or left > best):
            best = left
    if best is None:
        raise _Refused("Outside connect times", level=logging.ERROR)
    return best


def _at(moment: datetime.datetime, clock: str) -> datetime.datetime:
    hour, minute, second = (int(part) for part in clock.split(":"))
    return moment.replace(hour=hour, minute=minute, second=second, microsecond=0)


def _permissions(granted: jwt.UserLimits) -> Permissions | None:
    """nats-server's `buildPermissionsFromJwt`: None when the claim sets none."""
    pub, sub, resp = granted.pub, granted.sub, granted.resp
    if not (pub.allow or pub.deny or sub.allow or sub.deny or resp is not None):
        return None
    perms = Permissions()
    if pub.allow or pub.deny:
        perms.publish = SubjectLists(list(pub.allow) or None, list(pub.deny))
    if sub.allow or sub.deny:
        perms.subscribe = SubjectLists(list(sub.allow) or None, list(sub.deny))
    if resp is not None:
        # validateResponsePermissions: defaults for zeros, and no blanket publish allow
        perms.responses = ResponsePermission(
            resp.max_msgs or limits.ALLOW_RESPONSES_MAX_MSGS,
            resp.ttl_ns / 1e9 or limits.ALLOW_RESPONSES_EXPIRES_S,
        )
        perms.publish = perms.publish or SubjectLists()
        if perms.publish.allow is None:
            perms.publish.allow = []
    return perms
