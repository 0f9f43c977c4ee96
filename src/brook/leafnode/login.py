"""What a solicited leaf connection logs in with: the fields of its CONNECT, as
nats-server's `sendLeafConnect` fills them, and the credentials they carry."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import TYPE_CHECKING, Any

from brook import jwt, limits, nkey

if TYPE_CHECKING:
    from brook.leafnode.connection import LeafLimits


def read_creds(text: str) -> tuple[str, str]:
    """(user JWT, seed) of a creds file's text; ValueError when it has not both."""
    items = jwt.decorated_blocks(text)
    if len(items) < 2:
        raise ValueError("Credentials file malformed")
    return items[0], items[1]


def _signature(seed: str, nonce: str) -> str:
    return base64.urlsafe_b64encode(nkey.sign(seed, nonce.encode())).decode().rstrip("=")


def connect_fields(
    config: LeafLimits,
    account: str,
    nonce: str,
    *,
    deny_imports: tuple[bytes, ...],
    credentials: str | None,
    nkey_seed: str | None,
    url_user: tuple[str, str | None] | None,
) -> dict[str, Any]:
    """The CONNECT of a leaf bound to `account`: a creds file's JWT (or a remote's
    `nkey`'s public key) and the seed's signature of the hub's `nonce`, and a user and
    password (or a token) from the URL. OSError or ValueError for unreadable creds."""
    fields: dict[str, Any] = {
        "version": limits.NATS_COMPAT_VERSION,
        "server_id": config.server_id,
        "name": config.server_name,
        "cluster": config.server_name,
        "headers": True,
        "jetstream": config.jetstream,
        "compress_mode": "off",
        "remote_account": account,
        "protocol": limits.PROTOCOL_VERSION,
    }
    if config.domain:
        fields["domain"] = config.domain
    if deny_imports:
        fields["deny_pub"] = [p.decode() for p in deny_imports]
    if credentials is not None:
        token, seed = read_creds(Path(credentials).read_text())
        fields["jwt"] = token
        fields["sig"] = _signature(seed, nonce)
    elif nkey_seed is not None:
        fields["nkey"] = nkey.seed_public_key(nkey_seed)[1]
        fields["sig"] = _signature(nkey_seed, nonce)
    if url_user is not None:
        user, password = url_user
        fields["user"] = user
        if password is None:
            fields["auth_token"] = user  # nats-server: a lone user is also the token
        else:
            fields["pass"] = password
    return fields
