"""The claims of NATS JWTs typed as nats-io/jwt v2 has them (ADR 0028): operator, account,
user and activation claims, their limits, permissions, exports and imports."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

MAX_TOKEN_BYTES = 1024 * 1024  # nats-io/jwt's MaxTokenSize
NO_LIMIT = -1  # jwt.NoLimit: a limit of -1 is no limit
ALL = "*"  # a revocation of every user issued until then (jwt.All)
CONNECTION_TYPES = frozenset(
    ("STANDARD", "WEBSOCKET", "LEAFNODE", "LEAFNODE_WS", "MQTT", "MQTT_WS", "IN_PROCESS")
)


class InvalidJwt(ValueError):
    """A token that does not decode, or whose signature does not verify."""


@dataclass(frozen=True, slots=True)
class Permission:
    """`pub` or `sub` of a user: subjects allowed and denied (a `sub` entry may name a
    queue group after a space)."""

    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ResponsePermission:
    """`resp`: replies the user may send to requests it received (allow_responses)."""

    max_msgs: int
    ttl_ns: int  # a Go time.Duration


@dataclass(frozen=True, slots=True)
class TimeRange:
    start: str  # "15:04:05"
    end: str


@dataclass(frozen=True, slots=True)
class UserLimits:
    """A user claim's permissions and limits (jwt's UserPermissionLimits), also the
    template of a scoped signing key."""

    pub: Permission = Permission()
    sub: Permission = Permission()
    resp: ResponsePermission | None = None
    subs: int = 0  # NatsLimits: -1 no limit; 0 absent (nats-server then applies none)
    data: int = 0
    payload: int = 0
    src: tuple[str, ...] = ()  # CIDRs the user may connect from; empty: anywhere
    times: tuple[TimeRange, ...] = ()  # daily windows the user may connect in
    locale: str = ""  # the IANA zone of `times`; "": the server's local time
    bearer_token: bool = False  # no nonce signature required
    proxy_required: bool = False
    allowed_connection_types: tuple[str, ...] = ()  # empty: every type

    @property
    def empty(self) -> bool:
        """No permission or limit set at all (what a scoped signing key's user must be)."""
        return self == UserLimits()


@dataclass(frozen=True, slots=True)
class UserScope:
    """A scoped signing key of an account: users it issues get `template`."""

    key: str
    role: str
    template: UserLimits


@dataclass(frozen=True, slots=True)
class JetStreamLimits:
    """An account's JetStream limits (jwt's JetStreamLimits): absent is 0, which for
    the storage means none allowed and for the others no limit; -1 is no limit."""

    mem_storage: int = 0
    disk_storage: int = 0
    streams: int = 0
    consumer: int = 0
    max_ack_pending: int = 0
    mem_max_stream_bytes: int = 0
    disk_max_stream_bytes: int = 0
    max_bytes_required: bool = False


@dataclass(frozen=True, slots=True)
class AccountLimits:
    """An account claim's `limits` (jwt's OperatorLimits)."""

    subs: int = NO_LIMIT
    data: int = NO_LIMIT
    payload: int = NO_LIMIT
    imports: int = NO_LIMIT
    exports: int = NO_LIMIT
    wildcards: bool = True
    disallow_bearer: bool = False
    conn: int = NO_LIMIT
    leaf: int = NO_LIMIT
    # Zero when there are tiers, as jwt's loadAccount leaves it.
    jetstream: JetStreamLimits = JetStreamLimits()
    tiered_limits: dict[str, JetStreamLimits] = field(default_factory=dict)

    @property
    def jetstream_enabled(self) -> bool:
        """jwt's IsJSEnabled: some memory or disk storage allowed (in any tier)."""
        if self.tiered_limits:
            tiers = self.tiered_limits.values()
            return any(t.mem_storage or t.disk_storage for t in tiers)
        return bool(self.jetstream.mem_storage or self.jetstream.disk_storage)


@dataclass(frozen=True, slots=True)
class Claims:
    """What every claim has (jwt's ClaimsData and GenericFields)."""

    token: str  # the encoded JWT itself
    kind: str  # "operator", "account", "user", or another kind Brook does not read
    subject: str  # sub: the public key the claim is about
    issuer: str  # iss: the public key that signed it
    issued_at: int = 0  # iat, unix seconds
    expires: int = 0  # exp, unix seconds; 0: never
    not_before: int = 0  # nbf, unix seconds; 0: at once
    name: str = ""
    id: str = ""  # jti
    tags: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class UserClaims(Claims):
    issuer_account: str = ""  # set when a signing key of this account issued the user
    limits: UserLimits = UserLimits()


@dataclass(frozen=True, slots=True)
class Export:
    """An account's export (jwt's Export): `kind` "stream" or "service"; with
    `token_req`, only importers holding an activation token of the exporter's may import,
    unless `revocations` (importer key or `*`: unix seconds) revoked it since."""

    subject: str
    kind: str
    name: str = ""
    token_req: bool = False
    revocations: dict[str, int] = field(default_factory=dict)
    response_type: str = ""  # a service's: "Singleton" (also ""), "Stream", "Chunked"
    response_threshold_ns: int = 0  # a service's; 0: nats-server's default
    account_token_position: int = 0
    latency: bool = False  # `service_latency` present (not served by Brook)
    allow_trace: bool = False


@dataclass(frozen=True, slots=True)
class Import:
    """An account's import (jwt's Import) of `account`'s export `subject` (a service's
    remote subject is `to` when set, its local one `subject` then, as nats-server reads
    the deprecated field; `local_subject` renames it in its own way)."""

    subject: str
    account: str
    kind: str
    name: str = ""
    token: str = ""
    to: str = ""
    local_subject: str = ""
    share: bool = False
    allow_trace: bool = False


@dataclass(frozen=True, slots=True)
class AccountClaims(Claims):
    limits: AccountLimits = AccountLimits()
    signing_keys: dict[str, UserScope | None] = field(default_factory=dict)
    revocations: dict[str, int] = field(default_factory=dict)  # user key (or *): unix s
    default_permissions: UserLimits = UserLimits()
    imports: tuple[Import, ...] = ()
    exports: tuple[Export, ...] = ()
    mappings: dict[str, Any] = field(default_factory=dict)

    def revoked(self, user: str, issued_at: int) -> bool:
        """jwt's IsRevoked: the user's claims issued no later than its revocation (or a
        revocation of all users) are revoked."""
        revocations = self.revocations
        if revocations.get(ALL, -1) >= issued_at:
            return True
        return user in revocations and revocations[user] >= issued_at


@dataclass(frozen=True, slots=True)
class ActivationClaims(Claims):
    """An activation token (jwt's ActivationClaims): the exporter (or, with
    `issuer_account`, one of its signing keys) lets the account `subject` import
    `import_subject` of kind `import_kind`."""

    import_subject: str = ""
    import_kind: str = ""
    issuer_account: str = ""


@dataclass(frozen=True, slots=True)
class OperatorClaims(Claims):
    signing_keys: tuple[str, ...] = ()
    system_account: str = ""
    strict_signing_key_usage: bool = False
    account_server_url: str = ""
    assert_server_version: str = ""
