"""The directory account resolver's store (server/resolver.py) on real files: nats-server's
layout, limits, LRU eviction, deletes, expiry sweeps and the store hash."""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

import pytest

from brook.config.settings import DirectoryResolver as Settings
from brook.server.resolver import DirectoryResolver, ResolverError
from tests.support.jwts import account_jwt, account_key, operator_key

OPERATOR = operator_key()


class Clock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


def _token(**top: int) -> tuple[str, str]:
    account = account_key()
    return account.public, account_jwt(account, OPERATOR, top=top or None)


def test_files_are_named_by_key_with_the_bare_jwt(tmp_path: Path) -> None:
    store = DirectoryResolver(Settings("FULL", str(tmp_path / "jwt")))
    key, token = _token()
    assert store.save(key, token)
    assert (tmp_path / "jwt" / f"{key}.jwt").read_text() == token
    assert not store.save(key, token)  # the same JWT again changes nothing
    assert store.load(key) == token
    assert store.keys() == [key]
    with pytest.raises(ResolverError, match="invalid public key"):
        store.save("nonsense", token)


def test_a_reopened_directory_indexes_its_files(tmp_path: Path) -> None:
    first = DirectoryResolver(Settings("FULL", str(tmp_path)))
    saved = dict(_token() for _ in range(3))
    for key, token in saved.items():
        first.save(key, token)
    again = DirectoryResolver(Settings("FULL", str(tmp_path)))
    assert sorted(again.keys()) == sorted(saved)
    assert again.hash == first.hash
    expected = bytes(32)
    for token in saved.values():
        digest = hashlib.sha256(token.encode()).digest()
        expected = bytes(a ^ b for a, b in zip(expected, digest, strict=True))
    assert again.hash == expected


def test_a_full_store_at_its_limit_refuses_a_new_account(tmp_path: Path) -> None:
    store = DirectoryResolver(Settings("FULL", str(tmp_path), limit=2))
    tokens = [_token() for _ in range(3)]
    for key, token in tokens[:2]:
        store.save(key, token)
    with pytest.raises(ResolverError, match="jwt store is full"):
        store.save(*tokens[2])
    store.save(tokens[0][0], account_jwt(account_key(), OPERATOR))  # an update is no add


def test_a_cache_evicts_the_least_recently_used(tmp_path: Path) -> None:
    store = DirectoryResolver(Settings("CACHE", str(tmp_path), limit=2))
    (a, ta), (b, tb), (c, tc) = (_token() for _ in range(3))
    store.save(a, ta)
    store.save(b, tb)
    assert store.load(a) == ta  # a used: b is the least recently used
    store.save(c, tc)
    assert sorted(store.keys()) == sorted([a, c])
    assert not (tmp_path / f"{b}.jwt").exists()


def test_deletes(tmp_path: Path) -> None:
    key, token = _token()
    none = DirectoryResolver(Settings("FULL", str(tmp_path / "none")))
    none.save(key, token)
    with pytest.raises(ResolverError, match="not set up to for delete"):
        none.delete(key)
    rename = DirectoryResolver(Settings("FULL", str(tmp_path / "rename"), delete="rename"))
    rename.save(key, token)
    assert rename.delete(key)
    assert (tmp_path / "rename" / f"{key}.jwt.deleted").read_text() == token
    assert rename.load(key) is None
    assert rename.keys() == []
    hard = DirectoryResolver(Settings("FULL", str(tmp_path / "hard"), delete="hard"))
    hard.save(key, token)
    assert hard.delete(key)
    assert list((tmp_path / "hard").iterdir()) == []
    assert not hard.delete(key)


def test_the_sweep_removes_expired_jwts_and_a_cache_ttl_counts_from_the_last_use(
    tmp_path: Path,
) -> None:
    clock = Clock()
    store = DirectoryResolver(Settings("FULL", str(tmp_path / "full")), clock=clock)
    key, token = _token(exp=int(clock.now) + 10)
    other, forever = _token()
    store.save(key, token)
    store.save(other, forever)
    assert store.sweep() == []
    clock.now += 11
    assert store.keys() == [other]  # an expired JWT is listed no more
    assert store.sweep() == [key]
    assert not (tmp_path / "full" / f"{key}.jwt").exists()
    cache = DirectoryResolver(Settings("CACHE", str(tmp_path / "cache"), ttl_s=60), clock=clock)
    assert cache.sweep_interval_s == 30
    cache.save(other, forever)
    clock.now += 50
    assert cache.load(other) == forever
    clock.now += 50
    assert cache.sweep() == []
    clock.now += 11
    assert cache.sweep() == [other]


def test_store_keeps_a_newer_jwt(tmp_path: Path) -> None:
    """Preloads (nats-server's `saveIfNewer`): an older JWT does not replace a newer."""
    account = account_key()
    store = DirectoryResolver(Settings("FULL", str(tmp_path)))
    newer = account_jwt(account, OPERATOR, top={"iat": int(time.time())})
    older = account_jwt(account, OPERATOR, top={"iat": int(time.time()) - 100})
    store.store(account.public, newer)
    store.store(account.public, older)
    assert store.load(account.public) == newer
