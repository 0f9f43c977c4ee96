"""Account JWT updates over `$SYS` (ADR 0033): nats-server's resolver requests.

What nats-server's resolvers subscribe in the system account (accounts.go
`DirAccResolver.Start`, `CacheDirAccResolver.Start`, events.go `accountClaimUpdate` for
MEMORY), answered as they answer:

* `$SYS.REQ.ACCOUNT.<key>.CLAIMS.UPDATE` (and the old `$SYS.ACCOUNT.<key>.CLAIMS.UPDATE`)
  and, with a directory, `$SYS.REQ.CLAIMS.UPDATE`: an account JWT to store (a directory)
  and apply to the account if it is loaded. The reply is nats-server's
  `ServerAPIClaimUpdateResponse`: `{"server", "data": {"account", "code": 200,
  "message"}}` or `{"server", "error": {"account", "code": 500, "description"}}`.
* With a directory: `$SYS.REQ.CLAIMS.LIST` (the stored accounts), `$SYS.REQ.CLAIMS.DELETE`
  (a JWT signed by the operator naming `accounts`; `allow_delete`), and with `full`,
  `$SYS.REQ.ACCOUNT.<key>.CLAIMS.LOOKUP` (the JWT itself, or an empty message) and
  `$SYS.REQ.CLAIMS.PACK` (`<key>|<jwt>` messages unless the requester's store hash, the
  body, is this store's; an empty message ends them).

An update applied to a loaded account starts or stops its JetStream as its JWT now
says, and reaches its clients as nats-server's `updateAccountClaimsWithRefresh` does:
the oldest keep their places under a lowered `conn` (the newest are closed with
`maximum account active connections exceeded`), each other client's limits, expiry and
default permissions are computed anew, and revoked users (or bearer tokens the account
now disallows) are closed. A deleted account's clients are closed with
`Account Authentication Expired`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from brook import jwt
from brook.nkey import Prefix
from brook.routing.internal import InternalClient
from brook.server.jwtauth import JwtUser, OperatorMode
from brook.server.resolver import DirectoryResolver, ResolverError

log = logging.getLogger("brook.auth")

MAX_CONNECTIONS = "maximum account active connections exceeded"
ACCOUNT_EXPIRED = "Account Authentication Expired"


class ClaimsClient(Protocol):
    """A logged-in client, as an account JWT update reaches it."""

    closed: bool

    @property
    def jwt_user(self) -> JwtUser | None: ...

    def account_updated(self, update: JwtUser | str) -> None: ...

    def close_with_error(self, text: str, reason: str) -> None: ...


class ClaimsServer(Protocol):
    """What the claim requests need of the server."""

    def account_clients(self, account: str) -> Iterable[ClaimsClient]:
        """The account's logged-in clients, oldest first."""
        ...

    def server_info(self) -> dict[str, Any]:
        """nats-server's `ServerInfo` of a reply."""
        ...

    def account_jetstream(self, account: str, limits: jwt.AccountLimits) -> None:
        """The account's JWT now has these limits (JetStream enabled or not, its
        JetStream limits)."""
        ...

    def account_imports(self, claims: jwt.AccountClaims) -> None:
        """The account's JWT now declares these exports and imports (ADR 0034)."""
        ...

    def account_deleted(self, account: str) -> None:
        """The account's JWT was deleted: its JetStream stops."""
        ...


class ClaimsService:
    """The resolver's `$SYS` requests on one server, and the sweep of expired files."""

    def __init__(
        self,
        server: ClaimsServer,
        operator: OperatorMode,
        client: InternalClient,
        *,
        system_account: str,
        schedule: Callable[[float, Callable[[], None]], Any] | None = None,
    ) -> None:
        self.server = server
        self.operator = operator
        self.client = client
        self.system_account = system_account
        self._schedule = schedule
        self._timer: Any = None

    def start(self) -> None:
        resolver = self.operator.resolver
        sub = self.client.subscribe
        if not isinstance(resolver, DirectoryResolver):
            for subject in ("$SYS.ACCOUNT.*.CLAIMS.UPDATE", "$SYS.REQ.ACCOUNT.*.CLAIMS.UPDATE"):
                sub(subject, self._on_memory_update)
            return
        for subject in ("$SYS.ACCOUNT.*.CLAIMS.UPDATE", "$SYS.REQ.ACCOUNT.*.CLAIMS.UPDATE"):
            sub(subject, self._on_account_update)
        sub("$SYS.REQ.CLAIMS.UPDATE", self._on_claims_update)
        sub("$SYS.REQ.CLAIMS.LIST", self._on_list)
        sub("$SYS.REQ.CLAIMS.DELETE", self._on_delete)
        if resolver.full:
            sub("$SYS.REQ.ACCOUNT.*.CLAIMS.LOOKUP", self._on_lookup)
            sub("$SYS.REQ.CLAIMS.PACK", self._on_pack, b"responder")
        self._arm(resolver)

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self.client.close()

    def _arm(self, resolver: DirectoryResolver) -> None:
        if self._schedule is None:
            import asyncio

            self._schedule = asyncio.get_running_loop().call_later
        self._timer = self._schedule(resolver.sweep_interval_s, lambda: self._sweep(resolver))

    def _sweep(self, resolver: DirectoryResolver) -> None:
        gone = resolver.sweep()
        if gone:
            log.debug("resolver: removed the files of %d expired account JWTs", len(gone))
        self._arm(resolver)

    # ------------------------------------------------------------------ replies

    def _respond(
        self, reply: bytes | None, account: str, message: str, error: object = None
    ) -> None:
        """nats-server's `respondToUpdate`."""
        if error is None:
            log.debug("%s - %s", message, account) if account else log.debug("%s", message)
        else:
            log.error("%s - %s - %s", message, account, error)
        if not reply:
            return
        body: dict[str, Any] = {"server": self.server.server_info()}
        if error is None:
            data: dict[str, Any] = {"account": account} if account else {}
            body["data"] = {**data, "code": 200, "message": message}
        else:
            failed: dict[str, Any] = {"account": account} if account else {}
            body["error"] = {**failed, "code": 500, "description": f"{message} - {error}"}
        self.client.publish(reply, _json(body))

    # ------------------------------------------------------------------ updates

    def _on_memory_update(
        self, subject: bytes, reply: bytes | None, header: bytes | None, payload: bytes
    ) -> None:
        """events.go `accountClaimUpdate` (no directory)."""
        key = _subject_account(subject)
        if key is None:
            return
        if not payload:
            self._respond(reply, key, "jwt update error", "request body is empty")
            return
        try:
            claims = jwt.decode_account(payload.decode("utf-8", "replace"))
        except jwt.InvalidJwt as exc:
            self._respond(reply, key, "jwt update resulted in error", exc)
            return
        if claims.subject != key:
            error = "subject does not match jwt content"
            self._respond(reply, key, "jwt update resulted in error", error)
        elif not self._loaded(key):
            self._respond(reply, key, "jwt update skipped")
        elif (failure := self._apply(claims)) is not None:
            self._respond(reply, key, "jwt update resulted in error", failure)
        else:
            self._respond(reply, key, "jwt updated")

    def _on_account_update(
        self, subject: bytes, reply: bytes | None, header: bytes | None, payload: bytes
    ) -> None:
        key = _subject_account(subject)
        if key is None:
            return
        self._update(reply, payload, key)

    def _on_claims_update(
        self, subject: bytes, reply: bytes | None, header: bytes | None, payload: bytes
    ) -> None:
        self._update(reply, payload, None)

    def _update(self, reply: bytes | None, payload: bytes, key: str | None) -> None:
        """`DirAccResolver`'s and `CacheDirAccResolver`'s update handlers (`key`: the
        account the subject names; None for `$SYS.REQ.CLAIMS.UPDATE`)."""
        resolver = self.operator.resolver
        assert isinstance(resolver, DirectoryResolver)
        cache = "" if resolver.full else " cache"
        failed = f"jwt update{cache} resulted in error"
        token = payload.decode("utf-8", "replace")
        try:
            claims = jwt.decode_account(token)
        except jwt.InvalidJwt as exc:
            self._respond(reply, "n/a" if key is None or not cache else key, failed, exc)
            return
        name = key or claims.subject
        steps: tuple[str, ...]
        if resolver.full and key is None:
            steps = ("strict", "valid")
        elif resolver.full:
            steps = ("valid", "subject", "strict")
        elif key is None:
            steps = ("strict", "loaded", "valid")
        else:
            steps = ("subject", "strict", "loaded", "valid")
        for step in steps:
            if step == "valid" and (issues := _claim_issues(claims)):
                words = (
                    "jwt validation failed" if not cache else "jwt update cache validation failed"
                )
                self._respond(
                    reply, claims.subject, words, f"validation errors: [{' '.join(issues)}]"
                )
                return
            if step == "subject" and claims.subject != name:
                self._respond(reply, name, failed, "subject does not match jwt content")
                return
            if (
                step == "strict"
                and self.operator.strict
                and claims.issuer == self.operator.operator_key
            ):
                self._respond(reply, name, failed, "operator requires issuer to be a signing key")
                return
            if step == "loaded" and not self._loaded(name):
                self._respond(reply, name, "jwt update cache skipped")
                return
        try:
            changed = resolver.save(name, token)
        except ResolverError as exc:
            self._respond(reply, name, failed, exc)
            return
        self._respond(reply, name, "jwt updated" if not cache else "jwt updated cache")
        if changed and self._loaded(name) and (failure := self._apply(claims)) is not None:
            log.error("DirResolver - Update for account %r resulted in error %s", name, failure)

    def _loaded(self, key: str) -> bool:
        """nats-server's `s.accounts.Load`: an account a login (or the start, for the
        system account) has loaded."""
        return self.operator.claims(key) is not None or key == self.system_account

    def _apply(self, claims: jwt.AccountClaims) -> str | None:
        """nats-server's `updateAccountWithClaimJWT`: the new JWT, if trusted and valid,
        for the account's logins and clients; else why not."""
        if not self.operator.trusted(claims.issuer) or jwt.issues(claims):
            return "account validation failed"
        current = self.operator.claims(claims.subject)
        if current is not None and current.token == claims.token:
            return None
        self.operator.replace(claims)
        self.server.account_jetstream(claims.subject, claims.limits)
        self.server.account_imports(claims)
        conn = claims.limits.conn
        count = 0
        for client in list(self.server.account_clients(claims.subject)):
            user = client.jwt_user
            if client.closed or user is None:
                continue
            if 0 <= conn <= count:
                client.close_with_error(MAX_CONNECTIONS, "maximum account connections")
                continue
            count += 1
            client.account_updated(self.operator.recheck(user, claims))
        return None

    # ------------------------------------------------------------------ directory

    def _on_lookup(
        self, subject: bytes, reply: bytes | None, header: bytes | None, payload: bytes
    ) -> None:
        tokens = subject.split(b".")
        if not reply or len(tokens) != 6:
            return
        token = self.operator.resolver.load(tokens[3].decode("utf-8", "replace"))
        self.client.publish(reply, (token or "").encode())

    def _on_pack(
        self, subject: bytes, reply: bytes | None, header: bytes | None, payload: bytes
    ) -> None:
        resolver = self.operator.resolver
        if not reply or not isinstance(resolver, DirectoryResolver):
            return
        if payload != resolver.hash:
            for key, token in resolver.pack():
                self.client.publish(reply, f"{key}|{token}".encode())
        self.client.publish(reply, b"")

    def _on_list(
        self, subject: bytes, reply: bytes | None, header: bytes | None, payload: bytes
    ) -> None:
        resolver = self.operator.resolver
        if not reply or not isinstance(resolver, DirectoryResolver):
            return
        keys = resolver.keys()
        log.debug("list request responded with %d account ids", len(keys))
        self.client.publish(reply, _json({"data": keys, "server": self.server.server_info()}))

    def _on_delete(
        self, subject: bytes, reply: bytes | None, header: bytes | None, payload: bytes
    ) -> None:
        """nats-server's `handleDeleteRequest`: a generic JWT, self-signed by an operator
        key, whose `nats.accounts` lists the accounts to delete."""
        resolver = self.operator.resolver
        assert isinstance(resolver, DirectoryResolver)
        subject_key, accounts, error = "", [], None
        try:
            request = jwt.decode_generic(payload.decode("utf-8", "replace"))
        except jwt.InvalidJwt as exc:
            error = str(exc)
        else:
            subject_key = request.subject
            listed = request.data.get("accounts")
            if resolver.directory.delete == "none" and resolver.full:
                error = "delete must be enabled in server config"
            elif request.subject != request.issuer:
                error = "not self signed"
            elif request.issuer not in self.operator.operator_keys:
                error = "not trusted"
            elif not isinstance(listed, list):
                error = "malformed request"
            else:
                for entry in listed:
                    if not isinstance(entry, str) or not jwt.is_public_key(entry, Prefix.ACCOUNT):
                        error = "malformed request"
                        break
                    if entry == self.system_account:
                        error = "not allowed to delete system account"
                        break
                    accounts.append(entry)
        if error is not None:
            message = f"delete accounts request by {subject_key} failed"
            self._respond(reply, "", message, error)
            return
        errors, passed = [], 0
        for key in accounts:
            try:
                deleted = resolver.delete(key)
            except ResolverError as exc:
                errors.append(str(exc))
                continue
            passed += 1
            if deleted:
                self._removed(key)
        if errors:
            message = f"deleted {passed} accounts, failed for {len(errors)}"
            self._respond(reply, "", message, "\n".join(errors))
        else:
            self._respond(reply, "", f"deleted {passed} accounts")

    def _removed(self, key: str) -> None:
        """nats-server's `removeCb`: the account's clients closed as when it expires, its
        JetStream stopped; its next login finds no JWT."""
        self.operator.forget(key)
        self.server.account_deleted(key)
        for client in list(self.server.account_clients(key)):
            if not client.closed:
                client.close_with_error(ACCOUNT_EXPIRED, "account deleted")


def _claim_issues(claims: jwt.AccountClaims) -> list[str]:
    """nats-server's `claimValidate`: what jwt's `Validate` finds blocking, the time
    checks aside (an expired JWT is stored; its account's logins refuse it)."""
    return [issue for issue in jwt.issues(claims) if issue not in _TIME_ISSUES]


_TIME_ISSUES = ("claim is expired", "claim is not yet valid")


def _subject_account(subject: bytes) -> str | None:
    """The account of `$SYS.REQ.ACCOUNT.<key>.CLAIMS.UPDATE` or `$SYS.ACCOUNT.<key>...`."""
    tokens = subject.split(b".")
    if len(tokens) == 6:
        return tokens[3].decode("utf-8", "replace")
    if len(tokens) == 5:
        return tokens[2].decode("utf-8", "replace")
    return None


def _json(body: dict[str, Any]) -> bytes:
    return json.dumps(body, separators=(",", ":")).encode()
