"""Nkey users for tests: a fresh key pair, and the nonce signature a client sends.

Keys are made by the `nkeys` package, the one nats-py signs with, so a test checks Brook
against the client's own encoding rather than against Brook's decoder (brook.nkey).
"""

from __future__ import annotations

import base64
import os
from dataclasses import dataclass

import nkeys


@dataclass(frozen=True)
class NkeyUser:
    public: str  # "U...", as written in a config's `users` list
    seed: bytes  # "SU...", as nats-py's `nkeys_seed_str` takes it

    def sign(self, nonce: str) -> str:
        """The CONNECT `sig` for `nonce`: unpadded URL-safe base64, as nats-py sends it."""
        signature = nkeys.from_seed(bytearray(self.seed)).sign(nonce.encode())
        return base64.urlsafe_b64encode(signature).decode().rstrip("=")


def new_user() -> NkeyUser:
    seed = nkeys.encode_seed(os.urandom(32), nkeys.PREFIX_BYTE_USER)
    public = nkeys.from_seed(bytearray(seed)).public_key.decode()
    return NkeyUser(public, bytes(seed))
