"""NATS nkeys: public keys as text, and checking a signature made by one (ADR 0023).

An nkey's text is the base32 (no padding) of one prefix byte naming the key's role
(`U` user, `A` account, `O` operator, ...), the 32-byte ed25519 public key and a CRC-16
(XMODEM, little-endian) of the two. Decoding is a few lines and done here, so the server
depends on a library only for the ed25519 verification itself (PyNaCl, libsodium). The
rules are those of nats-io/nkeys, which nats-server uses: a key must decode, its CRC must
match and its prefix byte must be the expected role; the key itself must be 32 bytes.
Account and operator keys (JWTs, issue 18) decode with the same function. A seed (`S...`:
two prefix bytes, the 32-byte ed25519 seed, the CRC) signs for a leafnode connection that
logs in to its hub with a creds file (`sign`, ADR 0032).
"""

from __future__ import annotations

import base64
import binascii
import enum
import re

__all__ = [
    "InvalidNkey",
    "Prefix",
    "decode_public_key",
    "decode_signature",
    "seed_public_key",
    "sign",
    "verify",
]

_KEY_BYTES = 32
_SIGNATURE_BYTES = 64


class Prefix(enum.IntEnum):
    """The role byte of a public nkey (nkeys' PrefixByte*): its first base32 letter."""

    OPERATOR = 14 << 3  # O
    SERVER = 13 << 3  # N
    CLUSTER = 2 << 3  # C
    ACCOUNT = 0  # A
    USER = 20 << 3  # U


class InvalidNkey(ValueError):
    """Text that is not a public nkey of the expected role."""


def _crc16(data: bytes) -> int:
    """CRC-16/XMODEM (polynomial 0x1021, initial value 0), as nkeys computes it."""
    crc = 0
    for byte in data:
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
            crc &= 0xFFFF
    return crc


_BASE32 = re.compile(r"[A-Z2-7]+", re.ASCII)


def _decode(text: str) -> bytes:
    """The prefix bytes and key of an nkey's text, its CRC checked."""
    if not _BASE32.fullmatch(text):
        raise InvalidNkey("not base32")
    try:
        raw = base64.b32decode(text + "=" * (-len(text) % 8))
    except binascii.Error as exc:
        raise InvalidNkey("not base32") from exc
    if len(raw) < 4:
        raise InvalidNkey("too short")
    body, crc = raw[:-2], int.from_bytes(raw[-2:], "little")
    if _crc16(body) != crc:
        raise InvalidNkey("checksum mismatch")
    return body


_SEED_PREFIX = 18 << 3  # S


def sign(seed: str, message: bytes) -> bytes:
    """The ed25519 signature of `message` by the key of `seed` (an `S...` nkey seed of
    any role); InvalidNkey if `seed` is not one."""
    from nacl.signing import SigningKey

    body = _decode(seed)
    if body[0] & 0xF8 != _SEED_PREFIX or len(body) != 2 + _KEY_BYTES:
        raise InvalidNkey("not a seed")
    return bytes(SigningKey(body[2:]).sign(message).signature)


def seed_public_key(seed: str) -> tuple[int, str]:
    """(the role byte, the public nkey text) of the key of `seed`, as nkeys'
    `FromSeed(seed).PublicKey()`; InvalidNkey if `seed` is not a seed. A leafnode remote's
    `nkey` sends the public key with its signature of the hub's nonce."""
    from nacl.signing import SigningKey

    body = _decode(seed)
    if body[0] & 0xF8 != _SEED_PREFIX or len(body) != 2 + _KEY_BYTES:
        raise InvalidNkey("not a seed")
    role = ((body[0] & 0x07) << 5) | (body[1] >> 3)  # nkeys' two-byte seed prefix
    raw = bytes([role]) + bytes(SigningKey(body[2:]).verify_key)
    text = base64.b32encode(raw + _crc16(raw).to_bytes(2, "little")).decode().rstrip("=")
    return role, text


def decode_public_key(text: str, prefix: Prefix) -> bytes:
    """The 32-byte ed25519 key of `text`, a public nkey of role `prefix`; InvalidNkey if not."""
    body = _decode(text)
    if body[0] != prefix:
        raise InvalidNkey(f"not a public {prefix.name.lower()} key")
    key = body[1:]
    if len(key) != _KEY_BYTES:
        raise InvalidNkey("not a 32-byte key")
    return key


def decode_signature(text: str) -> bytes | None:
    """A signature as clients send it: base64 URL-safe without padding, or standard
    base64 (nats-server accepts both, in that order); None when it is neither."""
    if re.fullmatch(r"[A-Za-z0-9_-]*", text, re.ASCII) and len(text) % 4 != 1:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    try:
        return base64.b64decode(text, validate=True)
    except ValueError:  # binascii.Error, or text that is not ASCII
        return None


def verify(key: bytes, message: bytes, signature: bytes) -> bool:
    """Whether `signature` is the ed25519 signature of `message` by the public `key`."""
    # Imported here: a server without nkey users never loads libsodium.
    from nacl.exceptions import BadSignatureError
    from nacl.signing import VerifyKey

    if len(key) != _KEY_BYTES or len(signature) != _SIGNATURE_BYTES:
        return False
    try:
        VerifyKey(key).verify(message, signature)
    except BadSignatureError:
        return False
    return True
