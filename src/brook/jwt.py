"""NATS JWTs (nats-io/jwt v2): decoded, their signature verified, their claims typed
(ADR 0028).

A NATS JWT is three base64url (unpadded) parts joined by dots: the header
`{"typ":"JWT","alg":"ed25519-nkey"}`, the claims JSON, and the ed25519 signature of the
first two parts (with their dot) by the issuer's nkey, whose public key is the claims'
`iss`. The kinds Brook reads are operator, account and user claims, in nats-server's
jwt/v2 shapes (the `nats` object), and the version 1 tokens older nsc wrote, migrated to
them as jwt/v2 migrates them (signed over the claims part only); an account's exports and
imports typed (`Export`, `Import`), and the activation tokens of imports of exports that
require one (`ActivationClaims`); what Brook does not act on (mappings) is kept as read.

`decode` does what nats-io/jwt's `Decode` does: size bound, header, claims, signature,
the issuer's key role; `issues` does what its `Validate` reports as blocking (expiry, not
before, malformed subjects, CIDRs, time ranges, keys), so that a caller refuses a token
exactly when nats-server would. Nothing here decides trust (which operator or account may
issue what): that is the server's (server/jwtauth.py). A leaf module: signature checks
through `brook.nkey`; no JWT framework.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import functools
import ipaddress
import json
import re
import time
from dataclasses import dataclass, field
from typing import Any

from brook.nkey import InvalidNkey, Prefix, decode_public_key, verify

__all__ = [
    "MAX_TOKEN_BYTES",
    "AccountClaims",
    "AccountLimits",
    "ActivationClaims",
    "Claims",
    "Export",
    "Import",
    "InvalidJwt",
    "JetStreamLimits",
    "OperatorClaims",
    "Permission",
    "ResponsePermission",
    "UserClaims",
    "UserLimits",
    "UserScope",
    "decode",
    "decode_account",
    "decode_activation",
    "decode_operator",
    "decode_user",
    "is_public_key",
    "issues",
    "parse_decorated",
]

MAX_TOKEN_BYTES = 1024 * 1024  # nats-io/jwt's MaxTokenSize
_ISSUER_KEYS_CACHED = 1024
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


# ---------------------------------------------------------------------------- decoding


def _b64(part: str) -> bytes:
    """Go's base64.RawURLEncoding: URL-safe, no padding, nothing else."""
    if not re.fullmatch(r"[A-Za-z0-9_-]*", part, re.ASCII) or len(part) % 4 == 1:
        raise InvalidJwt("illegal base64 data")
    try:
        return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
    except binascii.Error as exc:
        raise InvalidJwt("illegal base64 data") from exc


def _json_object(data: bytes) -> dict[str, Any]:
    try:
        value = json.loads(data)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        raise InvalidJwt(f"invalid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise InvalidJwt("claims are not a JSON object")
    return value


class _Fields:
    """Typed reads of a JSON object as Go's encoding/json fills a struct: absent or null
    is the zero value, a value of another type is an error."""

    def __init__(self, data: object, where: str) -> None:
        if data is None:
            data = {}
        if not isinstance(data, dict):
            raise InvalidJwt(f"{where}: not an object")
        self.data, self.where = data, where

    def _get(self, key: str, kind: type | tuple[type, ...], zero: Any) -> Any:
        value = self.data.get(key)
        if value is None:
            return zero
        if (isinstance(value, bool) and kind is not bool) or not isinstance(value, kind):
            raise InvalidJwt(f"{self.where}.{key}: wrong type")
        return value

    def text(self, key: str) -> str:
        return str(self._get(key, str, ""))

    def integer(self, key: str, zero: int = 0) -> int:
        value = self._get(key, (int, float), zero)
        if isinstance(value, float):
            if not value.is_integer():
                raise InvalidJwt(f"{self.where}.{key}: not an integer")
            value = int(value)
        if not -(2**63) <= value < 2**63:
            raise InvalidJwt(f"{self.where}.{key}: out of range")
        return int(value)

    def flag(self, key: str) -> bool:
        return bool(self._get(key, bool, False))

    def texts(self, key: str) -> tuple[str, ...]:
        items: list[object] = self._get(key, list, [])
        if not all(isinstance(item, str) for item in items):
            raise InvalidJwt(f"{self.where}.{key}: not a list of strings")
        return tuple(str(item) for item in items)

    def obj(self, key: str) -> _Fields:
        return _Fields(self.data.get(key), f"{self.where}.{key}")

    def mapping(self, key: str) -> dict[str, Any]:
        return dict(self._get(key, dict, {}))


def _permission(f: _Fields) -> Permission:
    return Permission(f.texts("allow"), f.texts("deny"))


def _user_limits(f: _Fields) -> UserLimits:
    resp = None
    if f.data.get("resp") is not None:
        r = f.obj("resp")
        resp = ResponsePermission(r.integer("max"), r.integer("ttl"))
    times = []
    for i, item in enumerate(f._get("times", list, [])):
        t = _Fields(item, f"{f.where}.times[{i}]")
        times.append(TimeRange(t.text("start"), t.text("end")))
    return UserLimits(
        pub=_permission(f.obj("pub")),
        sub=_permission(f.obj("sub")),
        resp=resp,
        subs=f.integer("subs"),
        data=f.integer("data"),
        payload=f.integer("payload"),
        src=_cidrs(f),
        times=tuple(times),
        locale=f.text("times_location"),
        bearer_token=f.flag("bearer_token"),
        proxy_required=f.flag("proxy_required"),
        allowed_connection_types=f.texts("allowed_connection_types"),
    )


def _cidrs(f: _Fields) -> tuple[str, ...]:
    """`src`: a list (jwt v2), or the comma-separated string older encoders wrote; kept
    lower case and without blanks or repeats, as jwt's CIDRList reads it."""
    value = f.data.get("src")
    items = f.texts("src") if not isinstance(value, str) else tuple(value.split(","))
    seen: list[str] = []
    for item in items:
        cidr = item.strip().lower()
        if cidr and cidr not in seen:
            seen.append(cidr)
    return tuple(seen)


def _signing_keys(f: _Fields) -> dict[str, UserScope | None]:
    """An array of keys and scopes (`{"kind":"user_scope","key":...,"template":...}`)."""
    keys: dict[str, UserScope | None] = {}
    for i, item in enumerate(f._get("signing_keys", list, [])):
        if isinstance(item, str):
            keys[item] = None
            continue
        scope = _Fields(item, f"{f.where}.signing_keys[{i}]")
        if scope.text("kind") != "user_scope":
            raise InvalidJwt(f"{scope.where}: unknown scope type {scope.text('kind')!r}")
        key = scope.text("key")
        keys[key] = UserScope(key, scope.text("role"), _user_limits(scope.obj("template")))
    return keys


def _account_limits(f: _Fields) -> AccountLimits:
    tiers = {
        str(name): _jetstream_limits(_Fields(tier, f"{f.where}.tiered_limits.{name}"))
        for name, tier in f.mapping("tiered_limits").items()
    }
    return AccountLimits(
        subs=f.integer("subs"),
        data=f.integer("data"),
        payload=f.integer("payload"),
        imports=f.integer("imports"),
        exports=f.integer("exports"),
        wildcards=f.flag("wildcards"),
        disallow_bearer=f.flag("disallow_bearer"),
        conn=f.integer("conn"),
        leaf=f.integer("leaf"),
        jetstream=JetStreamLimits() if tiers else _jetstream_limits(f),
        tiered_limits=tiers,
    )


def _jetstream_limits(f: _Fields) -> JetStreamLimits:
    names = [n for n in JetStreamLimits.__dataclass_fields__ if n != "max_bytes_required"]
    values = {name: f.integer(name) for name in names}
    return JetStreamLimits(**values, max_bytes_required=f.flag("max_bytes_required"))


def _exports(nats: _Fields) -> tuple[Export, ...]:
    exports = []
    for i, item in enumerate(nats._get("exports", list, [])):
        f = _Fields(item, f"{nats.where}.exports[{i}]")
        revoked = f.obj("revocations")
        exports.append(
            Export(
                subject=f.text("subject"),
                kind=f.text("type"),
                name=f.text("name"),
                token_req=f.flag("token_req"),
                revocations={str(k): revoked.integer(k) for k in revoked.data},
                response_type=f.text("response_type"),
                response_threshold_ns=f.integer("response_threshold"),
                account_token_position=f.integer("account_token_position"),
                latency=f.data.get("service_latency") is not None,
                allow_trace=f.flag("allow_trace"),
            )
        )
    return tuple(exports)


def _imports(nats: _Fields) -> tuple[Import, ...]:
    imports = []
    for i, item in enumerate(nats._get("imports", list, [])):
        f = _Fields(item, f"{nats.where}.imports[{i}]")
        imports.append(
            Import(
                subject=f.text("subject"),
                account=f.text("account"),
                kind=f.text("type"),
                name=f.text("name"),
                token=f.text("token"),
                to=f.text("to"),
                local_subject=f.text("local_subject"),
                share=f.flag("share"),
                allow_trace=f.flag("allow_trace"),
            )
        )
    return tuple(imports)


def _common(token: str, body: _Fields, nats: _Fields, v1: bool) -> dict[str, Any]:
    """What every claim has; version 1 kept `type` and `tags` outside `nats`."""
    return {
        "token": token,
        "kind": body.text("type") or nats.text("type"),
        "subject": body.text("sub"),
        "issuer": body.text("iss"),
        "issued_at": body.integer("iat"),
        "expires": body.integer("exp"),
        "not_before": body.integer("nbf"),
        "name": body.text("name"),
        "id": body.text("jti"),
        "tags": (body if v1 else nats).texts("tags"),
    }


def _claims(token: str, body: _Fields, version: int) -> Claims:
    """The claims of a kind Brook reads, in their version's shape. Version 1 tokens
    (nats-io/jwt's `v1...Claims` and their `Migrate`) keep `type`, `tags` and a user's
    `issuer_account` outside `nats`; their users' absent `subs`, `data` and `payload`
    are -1 (no limit); they have no JetStream limits, scoped signing keys, default
    permissions, mappings, connection types or strict signing key usage."""
    nats = body.obj("nats")
    common = _common(token, body, nats, version == 1)
    kind = common["kind"]
    if kind in _ISSUERS and version not in (1, 2):
        raise InvalidJwt(f"library supports version 2 or less - received {version}")
    v1 = version == 1
    if kind == "user":
        limits = _user_limits(nats)
        if v1:
            limits = dataclasses.replace(
                limits,
                subs=nats.integer("subs", NO_LIMIT),
                data=nats.integer("data", NO_LIMIT),
                payload=nats.integer("payload", NO_LIMIT),
                proxy_required=False,
                allowed_connection_types=(),
            )
        issuer_account = (body if v1 else nats).text("issuer_account")
        return UserClaims(**common, issuer_account=issuer_account, limits=limits)
    if kind == "account":
        revoked = nats.obj("revocations")
        account_limits = _account_limits(nats.obj("limits"))
        if v1:
            return AccountClaims(
                **common,
                limits=dataclasses.replace(
                    account_limits, jetstream=JetStreamLimits(), tiered_limits={}
                ),
                signing_keys=dict.fromkeys(nats.texts("signing_keys")),
                revocations={str(k): revoked.integer(k) for k in revoked.data},
                imports=_imports(nats),
                exports=_exports(nats),
            )
        return AccountClaims(
            **common,
            limits=account_limits,
            signing_keys=_signing_keys(nats),
            revocations={str(k): revoked.integer(k) for k in revoked.data},
            default_permissions=_user_limits(nats.obj("default_permissions")),
            imports=_imports(nats),
            exports=_exports(nats),
            mappings=nats.mapping("mappings"),
        )
    if kind == "operator":
        return OperatorClaims(
            **common,
            signing_keys=nats.texts("signing_keys"),
            system_account=nats.text("system_account"),
            strict_signing_key_usage=not v1 and nats.flag("strict_signing_key_usage"),
            account_server_url=nats.text("account_server_url"),
            assert_server_version="" if v1 else nats.text("assert_server_version"),
        )
    if kind == "activation":
        return ActivationClaims(
            **common,
            import_subject=nats.text("subject"),
            import_kind=nats.text("kind"),
            issuer_account=nats.text("issuer_account"),
        )
    return Claims(**common)


# The role of the key that may issue each kind of claim (jwt's ExpectedPrefixes).
_ISSUERS: dict[str, tuple[Prefix, ...]] = {
    "user": (Prefix.ACCOUNT,),
    "account": (Prefix.ACCOUNT, Prefix.OPERATOR),
    "activation": (Prefix.ACCOUNT, Prefix.OPERATOR),
    "operator": (Prefix.OPERATOR,),
}


def is_public_key(text: str, prefix: Prefix) -> bool:
    try:
        decode_public_key(text, prefix)
    except InvalidNkey:
        return False
    return True


def decode(token: str) -> Claims:
    """The claims of `token`, once its size, header, claims JSON and signature (by the
    public key in `iss`) check out, as nats-io/jwt's `Decode`; InvalidJwt if not."""
    if len(token) > MAX_TOKEN_BYTES:
        raise InvalidJwt(f"token size {len(token)} exceeds maximum of {MAX_TOKEN_BYTES} bytes")
    chunks = token.split(".")
    if len(chunks) != 3:
        raise InvalidJwt("expected 3 chunks")
    header = _Fields(_json_object(_b64(chunks[0])), "header")
    if header.text("typ").upper() != "JWT":
        raise InvalidJwt(f"not supported type {header.text('typ')!r}")
    if header.text("alg").lower() not in ("ed25519", "ed25519-nkey"):
        raise InvalidJwt(f"unexpected {header.text('alg')!r} algorithm")
    body = _Fields(_json_object(_b64(chunks[1])), "claims")
    # jwt's identifier.Version: a `type` outside `nats` makes a version 1 token.
    version = 1 if body.text("type") else body.obj("nats").integer("version")
    if version > 2:
        raise InvalidJwt("JWT was generated by a newer version")
    claims = _claims(token, body, version)
    if claims.kind not in _ISSUERS:
        version = -1  # jwt's generic claims: checked as version 1 tokens are
    signature = _b64(chunks[2])
    prefixes = _ISSUERS.get(claims.kind, (Prefix.ACCOUNT, Prefix.OPERATOR, Prefix.USER))
    key = next(
        (k for p in prefixes if (k := _key(claims.issuer, p)) is not None),
        None,
    )
    # Version 1 signed the claims part alone, version 2 the header and the claims.
    v1 = version <= 1
    signed = (chunks[1] if v1 else token[: len(chunks[0]) + len(chunks[1]) + 1]).encode()
    if key is None or not verify(key, signed, signature):
        raise InvalidJwt(f"claim failed V{1 if v1 else 2} signature verification")
    return claims


@functools.lru_cache(maxsize=_ISSUER_KEYS_CACHED)
def _key(text: str, prefix: Prefix) -> bytes | None:
    """An issuer's key: the few account and operator keys that sign every token are
    decoded (base32, CRC) once."""
    try:
        return decode_public_key(text, prefix)
    except InvalidNkey:
        return None


def decode_user(token: str) -> UserClaims:
    claims = decode(token)
    if not isinstance(claims, UserClaims):
        raise InvalidJwt("not user claim")
    return claims


def decode_account(token: str) -> AccountClaims:
    claims = decode(token)
    if not isinstance(claims, AccountClaims):
        raise InvalidJwt("not account claim")
    return claims


def decode_activation(token: str) -> ActivationClaims:
    claims = decode(token)
    if not isinstance(claims, ActivationClaims):
        raise InvalidJwt("not activation claim")
    return claims


def decode_operator(token: str) -> OperatorClaims:
    claims = decode(token)
    if not isinstance(claims, OperatorClaims):
        raise InvalidJwt("not operator claim")
    return claims


@dataclass(frozen=True, slots=True)
class GenericClaims:
    """Any claim as jwt's `DecodeGeneric` reads it: who, by whom, and its `nats` map."""

    subject: str
    issuer: str
    data: dict[str, Any]


def decode_generic(token: str) -> GenericClaims:
    """jwt's `DecodeGeneric` (a `$SYS.REQ.CLAIMS.DELETE` request): the header's algorithm
    says what is signed, the claims part alone (`ed25519`, version 1) or both parts."""
    chunks = token.split(".")
    if len(chunks) != 3:
        raise InvalidJwt("expected 3 chunks")
    header = _Fields(_json_object(_b64(chunks[0])), "header")
    if header.text("typ").upper() != "JWT":
        raise InvalidJwt(f"not supported type {header.text('typ')!r}")
    algorithm = header.text("alg").lower()
    if algorithm not in ("ed25519", "ed25519-nkey"):
        raise InvalidJwt(f"unexpected {header.text('alg')!r} algorithm")
    body = _Fields(_json_object(_b64(chunks[1])), "claims")
    signature = _b64(chunks[2])
    v1 = algorithm == "ed25519"
    signed = (chunks[1] if v1 else token[: len(chunks[0]) + len(chunks[1]) + 1]).encode()
    issuer = body.text("iss")
    keys = (k for p in Prefix if (k := _key(issuer, p)) is not None)
    if not any(verify(key, signed, signature) for key in keys):
        raise InvalidJwt(f"claim failed V{1 if v1 else 2} signature verification")
    return GenericClaims(body.text("sub"), issuer, body.obj("nats").data)


# A decorated block (`-----BEGIN NATS USER JWT-----` ... `------END NATS USER JWT------`)
# of a creds or operator file, as jwt's userConfigRE finds it.
_DECORATED = re.compile(r"\s*(?:(?:-{3,}.*-{3,}\r?\n)([\w\-.=]+)(?:\r?\n-{3,}.*-{3,}(\r?\n|\Z)))")


def parse_decorated(contents: str) -> str:
    """The first JWT of a decorated file (creds, operator), or the contents themselves
    when they have no decoration (jwt's ParseDecoratedJWT)."""
    found = _DECORATED.search(contents)
    return contents if found is None else found.group(1)


# ---------------------------------------------------------------------------- validation


def issues(claims: Claims, now: float | None = None) -> list[str]:
    """What jwt's `Validate` finds blocking in `claims` at `now` (unix seconds; default
    the current time): expiry and not-before, then the checks of each kind. Empty: valid."""
    found: list[str] = []
    second = int(time.time() if now is None else now)
    if claims.expires > 0 and second > claims.expires:
        found.append("claim is expired")
    if claims.not_before > 0 and claims.not_before > second:
        found.append("claim is not yet valid")
    if isinstance(claims, UserClaims):
        _check_user_limits(claims.limits, found)
        if claims.issuer_account and not is_public_key(claims.issuer_account, Prefix.ACCOUNT):
            found.append("account_id is not an account public key")
    elif isinstance(claims, AccountClaims):
        _check_user_limits(claims.default_permissions, found)
        for key, scope in claims.signing_keys.items():
            if not is_public_key(key, Prefix.ACCOUNT):
                what = "a valid account signing key" if scope is None else "an account public key"
                found.append(f"{key} is not {what}")
        _check_exports(claims.exports, found)
        _check_imports(claims.imports, claims.subject, found)
        tiered = claims.limits.tiered_limits
        if "" in tiered:
            found.append('Tiered JetStream Limits can not contain a blank "" tier name')
    elif isinstance(claims, OperatorClaims):
        for key in claims.signing_keys:
            if not is_public_key(key, Prefix.OPERATOR):
                found.append(f"{key} is not an operator public key")
        system = claims.system_account
        if system and not is_public_key(system, Prefix.ACCOUNT):
            found.append(f"{system} is not an account public key")
    return found


def _check_subject(subject: str, found: list[str]) -> None:
    """jwt's Subject.Validate."""
    if not subject:
        found.append("subject cannot be empty")
        return
    if " " in subject:
        found.append(f"subject {subject!r} cannot have spaces")
    if subject[0] == "." or subject[-1] == ".":
        found.append(f"subject {subject!r} cannot start or end with a `.`")
    if ".." in subject:
        found.append(f"subject {subject!r} cannot contain consecutive `.`")


def _check_permission(permission: Permission, found: list[str], *, queues: bool) -> None:
    for entry in (*permission.allow, *permission.deny):
        parts = entry.split(" ")
        if len(parts) > 2:
            found.append(f'Permission Subject "{entry}" contains too many spaces')
            continue
        for part in parts:
            _check_subject(part, found)
        if len(parts) == 2 and not queues:
            found.append(f'Permission Subject "{entry}" is not allowed to contain queue')


def contained(subject: str, other: str) -> bool:
    """jwt's Subject.IsContainedIn: every subject `subject` matches, `other` matches."""
    mine, theirs = subject.split("."), other.split(".")
    if len(mine) < len(theirs) or (len(mine) > len(theirs) and theirs[-1] != ">"):
        return False
    for i, token in enumerate(theirs):
        if i == len(theirs) - 1 and token == ">":
            return True
        if token != mine[i] and token != "*":
            return False
    return True


_KINDS = ("stream", "service")
_RESPONSE_TYPES = ("", "Singleton", "Stream", "Chunked")


def _check_exports(exports: tuple[Export, ...], found: list[str]) -> None:
    """jwt's Exports.Validate (its blocking issues)."""
    for e in exports:
        service = e.kind == "service"
        if e.kind not in _KINDS:
            found.append(f"invalid export type: {e.kind!r}")
        if service and e.response_type not in _RESPONSE_TYPES:
            found.append(f"invalid response type for service: {e.response_type!r}")
        if e.kind == "stream":
            if e.response_type:
                found.append(f"invalid response type for stream: {e.response_type!r}")
            if e.allow_trace:
                found.append("AllowTrace only valid for service export")
        if e.latency and not service:
            found.append("latency tracking only permitted for services")
        if e.response_threshold_ns < 0:
            found.append("negative response threshold is invalid")
        if e.response_threshold_ns > 0 and not service:
            found.append("response threshold only valid for services")
        _check_subject(e.subject, found)
        if (position := e.account_token_position) > 0:
            tokens = e.subject.split(".")
            if "*" not in tokens and ">" not in tokens:
                found.append(
                    f"Account Token Position can only be used with wildcard subjects: {e.subject}"
                )
            elif position > len(tokens):
                found.append(
                    f"Account Token Position {position} exceeds length of subject '{e.subject}'"
                )
            elif (token := tokens[position - 1]) != "*":
                found.append(
                    f"Account Token Position {position} matches '{token}' but must match a * "
                    f"in: {e.subject}"
                )
    for kind in _KINDS:
        subjects = [e.subject for e in exports if (e.kind == "service") == (kind == "service")]
        for i, narrow in enumerate(subjects):
            for j, wide in enumerate(subjects):
                if i != j and contained(narrow, wide):
                    found.append(f"{kind} export subject {wide!r} already exports {narrow!r}")


def _check_imports(imports: tuple[Import, ...], account: str, found: list[str]) -> None:
    """jwt's Imports.Validate (its blocking issues) for the account `account`."""
    local: dict[str, list[str]] = {}
    for i in imports:
        service = i.kind == "service"
        if service:
            subject = i.to or i.local_subject or i.subject
            for other in local.get(i.account, ()):
                if contained(subject, other) or contained(other, subject):
                    found.append(
                        f"overlapping subject namespace for {subject!r} and {other!r} in "
                        f"same account {i.account!r}"
                    )
            local.setdefault(i.account, []).append(subject)
        if i.kind not in _KINDS:
            found.append(f"invalid import type: {i.kind!r}")
        if service and i.allow_trace:
            found.append("AllowTrace only valid for stream import")
        if not i.account:
            found.append("account to import from is not specified")
        _check_subject(i.subject, found)
        if i.local_subject and i.to:
            found.append("Local Subject replaces To")
        if i.share and not service:
            found.append(
                "sharing information (for latency tracking) is only valid for services: "
                f"{i.subject!r}"
            )
        if i.token:
            _check_activation(i, account, found)


def _check_activation(i: Import, account: str, found: list[str]) -> None:
    """jwt's Import.Validate of an import's activation token (time checks aside)."""
    try:
        act = decode_activation(i.token)
    except InvalidJwt:
        found.append(f"import {i.subject!r} contains an invalid activation token")
        return
    if i.account not in (act.issuer, act.issuer_account):
        found.append(f"activation token doesn't match account for import {i.subject!r}")
    if act.subject != account:
        found.append(
            f"activation token doesn't match account it is being included in, {i.subject!r}"
        )
    if act.import_kind != i.kind:
        found.append(
            f"mismatch between token import type {act.import_kind} and type of import {i.kind}"
        )
    if act.import_kind not in _KINDS:
        found.append(f"invalid import type: {act.import_kind!r}")
    _check_subject(act.import_subject, found)
    if act.issuer_account and not is_public_key(act.issuer_account, Prefix.ACCOUNT):
        found.append("account_id is not an account public key")
    subject = i.to if i.kind == "service" and i.to else i.subject
    if not contained(subject, act.import_subject):
        found.append(
            f"activation token import subject {act.import_subject!r} doesn't match import "
            f"{i.subject!r}"
        )


_CLOCK = re.compile(r"([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]", re.ASCII)


def _check_user_limits(limits: UserLimits, found: list[str]) -> None:
    _check_permission(limits.sub, found, queues=True)
    _check_permission(limits.pub, found, queues=False)
    for cidr in limits.src:
        try:
            ipaddress.ip_network(cidr, strict=False)
        except ValueError:
            found.append(f"invalid cidr {cidr!r} in user src limits")
        else:
            if "/" not in cidr:  # Go's ParseCIDR wants the prefix length
                found.append(f"invalid cidr {cidr!r} in user src limits")
    for window in limits.times:
        for name, value in (("start", window.start), ("end", window.end)):
            if not value:
                found.append(
                    f"time ranges {name} must contain a{'n' if name == 'end' else ''} {name}"
                )
            elif not _CLOCK.fullmatch(value):
                found.append(f"{name} in time range is invalid {value!r}")
    if limits.locale and not _zone(limits.locale):
        found.append(f"could not parse iana time zone by name: {limits.locale}")


def _zone(name: str) -> bool:
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return False
    return True
