"""Decoding NATS JWTs as nats-io/jwt's `Decode` does: size bound, header, claims JSON (read
as Go's encoding/json fills a struct), signature by the issuer's key and that key's role;
version 1 tokens migrated; decorated (creds, operator) files."""

from __future__ import annotations

import base64
import binascii
import dataclasses
import functools
import json
import re
from dataclasses import dataclass
from typing import Any, TypeVar

from brook.jwt.claims import (
    MAX_TOKEN_BYTES,
    NO_LIMIT,
    AccountClaims,
    AccountLimits,
    ActivationClaims,
    Claims,
    Export,
    Import,
    InvalidJwt,
    JetStreamLimits,
    OperatorClaims,
    Permission,
    ResponsePermission,
    TimeRange,
    UserClaims,
    UserLimits,
    UserScope,
)
from brook.nkey import InvalidNkey, Prefix, decode_public_key, verify

_C = TypeVar("_C", bound=Claims)

_ISSUER_KEYS_CACHED = 1024


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


def _decode_as(token: str, kind: type[_C], name: str) -> _C:
    """A token that must hold one kind of claims: jwt's Decode<Kind>Claims, whose
    refusal says which kind was wanted."""
    claims = decode(token)
    if not isinstance(claims, kind):
        raise InvalidJwt(f"not {name} claim")
    return claims


def decode_user(token: str) -> UserClaims:
    return _decode_as(token, UserClaims, "user")


def decode_account(token: str) -> AccountClaims:
    return _decode_as(token, AccountClaims, "account")


def decode_activation(token: str) -> ActivationClaims:
    return _decode_as(token, ActivationClaims, "activation")


def decode_operator(token: str) -> OperatorClaims:
    return _decode_as(token, OperatorClaims, "operator")


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
# of a creds or operator file, as jwt's userConfigRE and nats-server's credsRe find it.
_DECORATED = re.compile(r"\s*(?:(?:-{3,}.*-{3,}\r?\n)([\w\-.=]+)(?:\r?\n-{3,}.*-{3,}(?:\r?\n|\Z)))")


def decorated_blocks(contents: str) -> list[str]:
    """The decorated blocks of a creds or operator file, in order: a creds file's user
    JWT first, its seed second."""
    blocks: list[str] = _DECORATED.findall(contents)
    return blocks


def parse_decorated(contents: str) -> str:
    """The first JWT of a decorated file (creds, operator), or the contents themselves
    when they have no decoration (jwt's ParseDecoratedJWT)."""
    blocks = decorated_blocks(contents)
    return blocks[0] if blocks else contents
