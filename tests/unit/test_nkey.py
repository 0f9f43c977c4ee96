"""brook.nkey against the `nkeys` package (the encoder nats-py and the nats CLI use)."""

from __future__ import annotations

import base64
import os

import nkeys
import pytest
from hypothesis import given
from hypothesis import strategies as st

from brook import nkey
from brook.nkey import InvalidNkey, Prefix, decode_public_key, decode_signature, verify

ROLES = [
    (Prefix.USER, nkeys.PREFIX_BYTE_USER, "U"),
    (Prefix.ACCOUNT, nkeys.PREFIX_BYTE_ACCOUNT, "A"),
    (Prefix.OPERATOR, nkeys.PREFIX_BYTE_OPERATOR, "O"),
    (Prefix.SERVER, nkeys.PREFIX_BYTE_SERVER, "N"),
    (Prefix.CLUSTER, nkeys.PREFIX_BYTE_CLUSTER, "C"),
]


def key_pair(prefix_byte: int) -> nkeys.KeyPair:
    return nkeys.from_seed(bytearray(nkeys.encode_seed(os.urandom(32), prefix_byte)))


def encode(prefix: int, body: bytes) -> str:
    """A public nkey's text for arbitrary bytes, with a correct checksum."""
    raw = bytes([prefix]) + body
    return base64.b32encode(raw + nkeys.crc16(raw).to_bytes(2, "little")).decode().rstrip("=")


@pytest.mark.parametrize(("prefix", "prefix_byte", "letter"), ROLES, ids=[r[2] for r in ROLES])
def test_decodes_each_role_as_nkeys_encodes_it(
    prefix: Prefix, prefix_byte: int, letter: str
) -> None:
    kp = key_pair(prefix_byte)
    public = kp.public_key.decode()
    assert public[0] == letter
    key = decode_public_key(public, prefix)
    assert encode(prefix, key) == public
    signature = kp.sign(b"nonce")
    assert verify(key, b"nonce", signature)
    assert not verify(key, b"nonce!", signature)


def test_the_wrong_role_is_refused() -> None:
    public = key_pair(nkeys.PREFIX_BYTE_ACCOUNT).public_key.decode()
    with pytest.raises(InvalidNkey, match="not a public user key"):
        decode_public_key(public, Prefix.USER)


def test_a_seed_is_not_a_public_key() -> None:
    seed = nkeys.encode_seed(os.urandom(32), nkeys.PREFIX_BYTE_USER).decode()
    with pytest.raises(InvalidNkey):
        decode_public_key(seed, Prefix.USER)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "not base32"),
        ("UABC", "too short"),
        ("uaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "not base32"),
        ("U" + "A" * 55 + "=", "not base32"),
        ("U0" + "A" * 54, "not base32"),
        (encode(Prefix.USER, bytes(31)), "not a 32-byte key"),
        (encode(Prefix.USER, bytes(33)), "not a 32-byte key"),
    ],
)
def test_malformed_keys_are_refused(text: str, reason: str) -> None:
    with pytest.raises(InvalidNkey, match=reason):
        decode_public_key(text, Prefix.USER)


def test_one_changed_letter_fails_the_checksum() -> None:
    public = key_pair(nkeys.PREFIX_BYTE_USER).public_key.decode()
    changed = public[:20] + ("B" if public[20] != "B" else "C") + public[21:]
    with pytest.raises(InvalidNkey, match="checksum"):
        decode_public_key(changed, Prefix.USER)


@given(st.text(max_size=80))
def test_any_text_decodes_or_raises_invalid_nkey(text: str) -> None:
    try:
        key = decode_public_key(text, Prefix.USER)
    except InvalidNkey:
        return
    assert len(key) == 32


def test_signatures_in_either_base64() -> None:
    raw = os.urandom(64)
    assert decode_signature(base64.urlsafe_b64encode(raw).decode().rstrip("=")) == raw
    assert decode_signature(base64.b64encode(raw).decode()) == raw
    assert decode_signature("!!") is None
    assert decode_signature("A") is None
    assert decode_signature("") == b""


@given(st.text(max_size=100))
def test_any_signature_text_decodes_or_is_none(text: str) -> None:
    """A client's `sig` is any JSON string: never an exception."""
    decoded = decode_signature(text)
    assert decoded is None or isinstance(decoded, bytes)


def test_verify_refuses_wrong_lengths() -> None:
    kp = key_pair(nkeys.PREFIX_BYTE_USER)
    key = decode_public_key(kp.public_key.decode(), Prefix.USER)
    signature = kp.sign(b"m")
    assert not verify(key, b"m", signature[:63])
    assert not verify(key[:31], b"m", signature)


def test_seed_signs_as_nkeys_does() -> None:
    """`sign` (a leaf spoke's creds login) makes the signature nats-io/nkeys makes."""
    seed = nkeys.encode_seed(bytes(range(32)), nkeys.PREFIX_BYTE_USER)
    expected = bytes(nkeys.from_seed(bytearray(seed)).sign(b"nonce"))
    assert nkey.sign(seed.decode(), b"nonce") == expected
    public = nkeys.from_seed(bytearray(seed)).public_key.decode()
    with pytest.raises(nkey.InvalidNkey):
        nkey.sign(public, b"nonce")  # a public key is no seed


# Seeds from nats-io/nkeys' strkey_test.go and nats.py's nats-core tests.
KNOWN_SEEDS = [
    "SUAMAR5BIQ2AZCPYRTLLK7UGWMGSG2GWD2VPIXBNO7ZIB6TZAU4QAEJS2Q",
    "SUAEIV5COV7ADQZE52WTYHVJQRV7WKJE5J7IBBJGATJTUUT2LVFGVXDPRQ",
]


@pytest.mark.parametrize("seed", KNOWN_SEEDS)
def test_known_seeds_and_their_public_keys_decode(seed: str) -> None:
    """The checksums of published seeds and of the public keys nkeys derives from them
    are accepted, and their signatures are the same as nkeys' (CRC-16/XMODEM)."""
    kp = nkeys.from_seed(bytearray(seed.encode()))
    key = decode_public_key(kp.public_key.decode(), Prefix.USER)
    assert nkey.sign(seed, b"nonce") == kp.sign(b"nonce")
    assert verify(key, b"nonce", nkey.sign(seed, b"nonce"))


@given(st.binary(min_size=1, max_size=80), st.integers(0, 0xFFFF))
def test_the_checksum_is_nkeys_crc16(body: bytes, crc: int) -> None:
    """Any body with nkeys' CRC-16 decodes (as far as the checksum goes); with any other
    checksum it is refused as a mismatch."""
    raw = bytes([Prefix.USER]) + body
    good = nkeys.crc16(bytearray(raw))
    text = base64.b32encode(raw + crc.to_bytes(2, "little")).decode().rstrip("=")
    try:
        decode_public_key(text, Prefix.USER)
        outcome = "ok"
    except InvalidNkey as exc:
        outcome = str(exc)
    assert (outcome == "checksum mismatch") == (crc != good)


def test_the_crc_of_the_standard_check_string() -> None:
    """CRC-16/XMODEM's catalogue check value: 0x31C3 for b"123456789"."""
    text = base64.b32encode(b"123456789" + (0x31C3).to_bytes(2, "little")).decode().rstrip("=")
    with pytest.raises(InvalidNkey) as refused:
        decode_public_key(text, Prefix.USER)
    assert str(refused.value) != "checksum mismatch"
