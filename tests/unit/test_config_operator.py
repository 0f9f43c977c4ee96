"""Operator mode in the config (ADR 0028): nats-server's spellings and value shapes of
`operator`, `resolver` and `resolver_preload`, read into `OperatorSettings`."""

from __future__ import annotations

from pathlib import Path

import pytest

from brook.config.conf import parse_conf, settings_from_conf
from brook.config.settings import ConfigError
from tests.support.jwts import account_jwt, account_key, operator_jwt, operator_key

OPERATOR, OTHER = operator_key(), operator_key()
ACCOUNT = account_key()
TOKEN = operator_jwt(OPERATOR)
ACCOUNT_TOKEN = account_jwt(ACCOUNT, OPERATOR)


def _load(text: str) -> object:
    return settings_from_conf(parse_conf(text))


def test_operator_spellings_files_and_inline(tmp_path: Path) -> None:
    decorated = tmp_path / "op.jwt"
    decorated.write_text(
        f"-----BEGIN NATS OPERATOR JWT-----\n{TOKEN}\n------END NATS OPERATOR JWT------\n"
    )
    other = operator_jwt(OTHER)
    for key in ("operator", "operators", "root", "roots", "root_operator", "root_operators"):
        settings = settings_from_conf(
            parse_conf(f'{key}: ["{decorated}", "{other}"]\nresolver: MEMORY\n')
        )
        assert settings.operator.jwts == [TOKEN, other], key


@pytest.mark.parametrize("resolver", ["MEMORY", "mem", "MEM", "{ type: memory }", "{ type: MEM }"])
def test_memory_resolver_spellings(resolver: str) -> None:
    settings = settings_from_conf(
        parse_conf(
            f"operator: {TOKEN}\nresolver: {resolver}\n"
            f'resolver_preload: {{ {ACCOUNT.public}: "{ACCOUNT_TOKEN}" }}\n'
        )
    )
    assert settings.operator.resolver == "MEMORY"
    assert settings.operator.preload == {ACCOUNT.public: ACCOUNT_TOKEN}


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("resolver: { type: nonsense, dir: /tmp }", "error parsing account resolver, should be"),
        ("resolver: { type: full }", "dir has no value and needs to point to a directory"),
        ("resolver: { type: full, dir: /tmp, colour: red }", "unknown configuration key"),
        ('resolver: URL("localhost:9090")', "error parsing account resolver url"),
        ("resolver: 42", "error parsing operator resolver, wrong type"),
        ("resolver: something", "error parsing account resolver, should be MEM"),
        ("resolver_preload: []", "preload should be a map of account_public_key:account_jwt"),
        ("resolver_preload: { A: 1 }", "preload map value should be a string JWT"),
        (f'resolver_preload: {{ A: "{TOKEN}" }}', "invalid account JWT"),
        ("operator: [1]", "error parsing operators: unsupported type"),
    ],
)
def test_operator_config_errors(text: str, words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        _load(f"operator: {TOKEN}\nresolver: MEMORY\n{text}\n")


def test_resolver_without_operator_and_token_beside_operator_are_refused() -> None:
    with pytest.raises(ConfigError, match="an account resolver needs an operator"):
        _load("resolver: MEMORY\n")
    with pytest.raises(ConfigError, match="a token is never checked in operator mode"):
        _load(f"operator: {TOKEN}\nresolver: MEMORY\nauthorization {{ token: s3cret }}\n")


@pytest.mark.parametrize(
    "text",
    ['URL("http://localhost:9090/jwt/v1/accounts")', "URL(http://localhost:9090/jwt/v1/accounts/)"],
)
def test_the_url_resolver(text: str) -> None:
    """`URL(...)`, quoted or not, as opts.go's resolverRe reads it; the base ends in a
    slash (nats-server's NewURLAccResolver adds it)."""
    settings = settings_from_conf(parse_conf(f"operator: {TOKEN}\nresolver: {text}\n"))
    assert settings.operator.resolver == "URL"
    assert settings.operator.url == "http://localhost:9090/jwt/v1/accounts/"
