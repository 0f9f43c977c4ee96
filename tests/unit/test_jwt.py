"""brook.jwt: NATS JWTs decoded and verified as nats-io/jwt v2 decodes them.

Tokens are made by tests/support/jwts.py (keys from the `nkeys` package); every way a
token can be wrong is refused with InvalidJwt, never another exception.
"""

from __future__ import annotations

import base64
import json
import time
from typing import Any

import pytest

from brook import jwt
from tests.support.jwts import (
    HEADER,
    account_jwt,
    account_key,
    activation_jwt,
    b64,
    encode,
    encode_v1,
    operator_jwt,
    operator_key,
    user_jwt,
    user_key,
)

OPERATOR = operator_key()
ACCOUNT = account_key()
USER = user_key()


def _parts(token: str) -> list[str]:
    return token.split(".")


def _body(token: str) -> dict[str, object]:
    part = _parts(token)[1]
    decoded: dict[str, object] = json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))
    return decoded


def test_user_claims_decode_with_permissions_and_limits() -> None:
    token = user_jwt(
        USER,
        ACCOUNT,
        pub={"allow": ["a.>"], "deny": ["a.b"]},
        sub={"allow": ["q.* grp"]},
        resp={"max": 3, "ttl": 5_000_000_000},
        subs=10,
        payload=1024,
        src=["127.0.0.1/32"],
        times=[{"start": "08:00:00", "end": "17:00:00"}],
        times_location="Europe/Berlin",
        bearer_token=True,
        allowed_connection_types=["STANDARD"],
        tags=["t1"],
    )
    claims = jwt.decode_user(token)
    assert claims.kind == "user"
    assert claims.subject == USER.public
    assert claims.issuer == ACCOUNT.public
    assert claims.token == token
    limits = claims.limits
    assert limits.pub == jwt.Permission(("a.>",), ("a.b",))
    assert limits.sub == jwt.Permission(("q.* grp",), ())
    assert limits.resp == jwt.ResponsePermission(3, 5_000_000_000)
    assert (limits.subs, limits.data, limits.payload) == (10, -1, 1024)
    assert limits.src == ("127.0.0.1/32",)
    assert limits.times == (jwt.TimeRange("08:00:00", "17:00:00"),)
    assert limits.locale == "Europe/Berlin"
    assert limits.bearer_token
    assert limits.allowed_connection_types == ("STANDARD",)
    assert claims.tags == ("t1",)
    assert jwt.issues(claims) == []


def test_account_claims_decode_signing_keys_revocations_and_limits() -> None:
    scoped, plain = account_key(), account_key()
    token = account_jwt(
        ACCOUNT,
        OPERATOR,
        signing_keys=[
            plain.public,
            {
                "kind": "user_scope",
                "key": scoped.public,
                "role": "r",
                "template": {"pub": {"allow": ["x"]}},
            },
        ],
        revocations={USER.public: 100, "*": 50},
        limits={"conn": 2, "subs": 5, "payload": 64, "data": -1, "mem_storage": 1024, "streams": 3},
    )
    claims = jwt.decode_account(token)
    assert claims.signing_keys[plain.public] is None
    scope = claims.signing_keys[scoped.public]
    assert scope is not None
    assert scope.role == "r"
    assert scope.template.pub.allow == ("x",)
    assert claims.limits.conn == 2
    assert claims.limits.subs == 5
    assert claims.limits.payload == 64
    assert claims.limits.jetstream == jwt.JetStreamLimits(mem_storage=1024, streams=3)
    assert claims.limits.jetstream_enabled
    # a user issued at or before its revocation is revoked, later ones are not;
    # the `*` entry revokes every user issued until then
    assert claims.revoked(USER.public, 100)
    assert not claims.revoked(USER.public, 101)
    assert claims.revoked(user_key().public, 50)
    assert not claims.revoked(user_key().public, 51)
    assert jwt.issues(claims) == []


def test_operator_claims_decode() -> None:
    signer = operator_key()
    token = operator_jwt(OPERATOR, signing_keys=[signer.public], system_account=ACCOUNT.public)
    claims = jwt.decode_operator(token)
    assert claims.signing_keys == (signer.public,)
    assert claims.system_account == ACCOUNT.public
    assert jwt.issues(claims) == []
    # an operator claim cannot be a user claim
    with pytest.raises(jwt.InvalidJwt, match="not user claim"):
        jwt.decode_user(token)


def test_tampered_claims_fail_the_signature() -> None:
    header, body, sig = _parts(user_jwt(USER, ACCOUNT))
    claims = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    claims["nats"]["pub"] = {"allow": [">"]}
    tampered = f"{header}.{b64(json.dumps(claims).encode())}.{sig}"
    with pytest.raises(jwt.InvalidJwt, match="signature verification"):
        jwt.decode(tampered)


def test_a_signature_by_another_key_fails() -> None:
    token = user_jwt(USER, ACCOUNT)
    other = _parts(user_jwt(USER, account_key()))[2]
    header, body, _ = _parts(token)
    with pytest.raises(jwt.InvalidJwt, match="signature verification"):
        jwt.decode(f"{header}.{body}.{other}")


def test_a_user_issued_by_a_user_key_is_refused() -> None:
    """A user claim's issuer must be an account key (jwt's ExpectedPrefixes)."""
    with pytest.raises(jwt.InvalidJwt, match="signature verification"):
        jwt.decode(user_jwt(USER, user_key()))


@pytest.mark.parametrize(
    "token",
    [
        "",
        "a.b",
        "a.b.c.d",
        "!!!.e30.AA",  # not base64url
        f"{b64(b'not json')}.e30.AA",
        f"{b64(b'[1]')}.e30.AA",
        f"{b64(json.dumps(HEADER).encode())}.e30=.AA",  # padding is not raw base64url
        f"{b64(json.dumps(HEADER).encode())}.{b64(b'{')}.AA",
        f"{b64(json.dumps(HEADER).encode())}.{b64(bytes([0xFF, 0xFE]))}.AA",
        f"{b64(json.dumps({'typ': 'JWS', 'alg': 'ed25519-nkey'}).encode())}.e30.AA",
        f"{b64(json.dumps({'typ': 'JWT', 'alg': 'HS256'}).encode())}.e30.AA",
        f"{b64(json.dumps(HEADER).encode())}.e30.AA",  # no version 2: refused
    ],
)
def test_malformed_tokens_are_refused(token: str) -> None:
    with pytest.raises(jwt.InvalidJwt):
        jwt.decode(token)


def test_wrongly_typed_fields_are_refused() -> None:
    wrong: list[dict[str, Any]] = [
        {"subs": "ten"},
        {"pub": {"allow": "a"}},
        {"pub": []},
        {"bearer_token": 1},
    ]
    for nats in wrong:
        with pytest.raises(jwt.InvalidJwt, match=r"wrong type|not"):
            jwt.decode(user_jwt(USER, ACCOUNT, **nats))
    with pytest.raises(jwt.InvalidJwt):
        jwt.decode(user_jwt(USER, ACCOUNT, top={"exp": "soon"}))
    with pytest.raises(jwt.InvalidJwt):
        jwt.decode(user_jwt(USER, ACCOUNT, top={"exp": 2**70}))


def test_deeply_nested_json_is_refused() -> None:
    body = b64(("[" * 100_000 + "]" * 100_000).encode())
    with pytest.raises(jwt.InvalidJwt):
        jwt.decode(f"{b64(json.dumps(HEADER).encode())}.{body}.AA")


def test_an_oversized_token_is_refused_before_decoding() -> None:
    token = user_jwt(USER, ACCOUNT, tags=["x" * jwt.MAX_TOKEN_BYTES])
    with pytest.raises(jwt.InvalidJwt, match="exceeds maximum"):
        jwt.decode(token)


def test_a_newer_version_is_refused() -> None:
    claims = {"sub": USER.public, "nats": {"type": "user", "version": 3}}
    with pytest.raises(jwt.InvalidJwt, match="newer version"):
        jwt.decode(encode(claims, ACCOUNT))


def test_tiered_jetstream_limits_replace_the_plain_ones() -> None:
    """As jwt's loadAccount: with tiers, the untiered limits read as zero."""
    tier = {"disk_storage": 100, "streams": 2, "max_bytes_required": True}
    claims = jwt.decode_account(
        account_jwt(ACCOUNT, OPERATOR, limits={"mem_storage": 5, "tiered_limits": {"R1": tier}})
    )
    assert claims.limits.jetstream == jwt.JetStreamLimits()
    assert claims.limits.tiered_limits == {
        "R1": jwt.JetStreamLimits(disk_storage=100, streams=2, max_bytes_required=True)
    }
    assert claims.limits.jetstream_enabled
    assert jwt.issues(claims) == []
    with pytest.raises(jwt.InvalidJwt, match="wrong type"):
        jwt.decode_account(account_jwt(ACCOUNT, OPERATOR, limits={"streams": "3"}))


def test_a_version_2_token_without_its_version_is_refused() -> None:
    claims = {"sub": USER.public, "nats": {"type": "user"}}
    with pytest.raises(jwt.InvalidJwt, match="received 0"):
        jwt.decode(encode(claims, ACCOUNT))


def test_version_1_user_claims_migrate_as_jwt_v2_migrates_them() -> None:
    """`type`, `tags` and `issuer_account` beside `nats`; absent `subs`, `data` and
    `payload` mean no limit; v2-only fields inside `nats` are not read."""
    token = encode_v1(
        "user",
        USER,
        ACCOUNT,
        top={"tags": ["a:1"], "issuer_account": ACCOUNT.public},
        pub={"allow": ["p.>"]},
        payload=64,
        src="10.0.0.0/8",
        allowed_connection_types=["WEBSOCKET"],
        issuer_account="ignored",
    )
    claims = jwt.decode_user(token)
    assert (claims.kind, claims.subject, claims.issuer) == ("user", USER.public, ACCOUNT.public)
    assert claims.tags == ("a:1",)
    assert claims.issuer_account == ACCOUNT.public
    limits = claims.limits
    assert (limits.subs, limits.data, limits.payload) == (-1, -1, 64)
    assert limits.pub.allow == ("p.>",)
    assert limits.src == ("10.0.0.0/8",)
    assert limits.allowed_connection_types == ()
    assert jwt.issues(claims) == []


def test_version_1_account_and_operator_claims() -> None:
    account = jwt.decode_account(
        encode_v1(
            "account",
            ACCOUNT,
            OPERATOR,
            limits={"conn": 3, "payload": -1, "mem_storage": 1024, "disk_storage": 1024},
            signing_keys=[USER.public],
            revocations={USER.public: 5},
            default_permissions={"pub": {"deny": [">"]}},
            mappings={"a": [{"subject": "b"}]},
        )
    )
    assert account.limits.conn == 3
    assert account.limits.jetstream == jwt.JetStreamLimits()
    assert not account.limits.jetstream_enabled
    assert account.signing_keys == {USER.public: None}
    assert account.revoked(USER.public, 5)
    assert account.default_permissions == jwt.UserLimits()
    assert account.mappings == {}
    operator = jwt.decode_operator(
        encode_v1(
            "operator",
            OPERATOR,
            OPERATOR,
            system_account=ACCOUNT.public,
            strict_signing_key_usage=True,
            signing_keys=[OPERATOR.public],
        )
    )
    assert operator.system_account == ACCOUNT.public
    assert operator.signing_keys == (OPERATOR.public,)
    assert not operator.strict_signing_key_usage


def test_version_1_tokens_are_signed_over_their_claims_only() -> None:
    header, claims, signature = _parts(encode_v1("user", USER, ACCOUNT))
    v2_signature = b64(ACCOUNT.sign(f"{header}.{claims}".encode()))
    with pytest.raises(jwt.InvalidJwt, match="claim failed V1 signature verification"):
        jwt.decode(f"{header}.{claims}.{v2_signature}")
    other = user_key()
    with pytest.raises(jwt.InvalidJwt, match="V1 signature"):
        jwt.decode(f"{header}.{claims}.{b64(other.sign(claims.encode()))}")
    assert jwt.decode(f"{header}.{claims}.{signature}").kind == "user"


def test_expiry_and_not_before() -> None:
    now = time.time()
    expired = jwt.decode(user_jwt(USER, ACCOUNT, top={"exp": int(now) - 1}))
    assert jwt.issues(expired, now) == ["claim is expired"]
    # expiry is at the second: valid through its last second
    assert jwt.issues(expired, now - 1) == []
    early = jwt.decode(user_jwt(USER, ACCOUNT, top={"nbf": int(now) + 60}))
    assert jwt.issues(early, now) == ["claim is not yet valid"]
    assert jwt.issues(early, now + 60) == []


def test_validation_of_user_fields() -> None:
    claims = jwt.decode(
        user_jwt(
            USER,
            ACCOUNT,
            pub={"allow": ["a b"]},
            sub={"deny": ["", "x..y", "a b c"]},
            src=["10.0.0.1", "nonsense/8"],
            times=[{"start": "25:00:00"}],
            times_location="Mars/Olympus",
            issuer_account=USER.public,
        )
    )
    assert jwt.issues(claims) == [
        "subject cannot be empty",
        "subject 'x..y' cannot contain consecutive `.`",
        'Permission Subject "a b c" contains too many spaces',
        'Permission Subject "a b" is not allowed to contain queue',
        "invalid cidr '10.0.0.1' in user src limits",
        "invalid cidr 'nonsense/8' in user src limits",
        "start in time range is invalid '25:00:00'",
        "time ranges end must contain an end",
        "could not parse iana time zone by name: Mars/Olympus",
        "account_id is not an account public key",
    ]


def test_validation_of_account_and_operator_keys() -> None:
    account = jwt.decode(account_jwt(ACCOUNT, OPERATOR, signing_keys=[USER.public]))
    assert jwt.issues(account) == [f"{USER.public} is not a valid account signing key"]
    operator = jwt.decode(operator_jwt(OPERATOR, signing_keys=[ACCOUNT.public], system_account="x"))
    assert jwt.issues(operator) == [
        f"{ACCOUNT.public} is not an operator public key",
        "x is not an account public key",
    ]


def test_parse_decorated() -> None:
    token = user_jwt(USER, ACCOUNT)
    decorated = f"-----BEGIN NATS OPERATOR JWT-----\n{token}\n------END NATS OPERATOR JWT------\n"
    assert jwt.parse_decorated(decorated) == token
    assert jwt.parse_decorated(token) == token


def test_exports_imports_and_activations_decode() -> None:
    """An account's exports and imports typed as jwt's Export and Import; an activation
    token as jwt's ActivationClaims (issued by the exporter for the importer)."""
    importer = account_key()
    token = activation_jwt(importer, ACCOUNT, subject="svc.>", kind="service")
    claims = jwt.decode_account(
        account_jwt(
            ACCOUNT,
            OPERATOR,
            exports=[
                {
                    "subject": "svc.>",
                    "type": "service",
                    "token_req": True,
                    "revocations": {importer.public: 5},
                    "response_type": "Stream",
                    "response_threshold": 2_000_000_000,
                    "service_latency": {"sampling": 100, "results": "lat"},
                }
            ],
            imports=[
                {"subject": "x", "account": importer.public, "type": "stream", "to": "p"},
                {
                    "subject": "svc.a",
                    "account": importer.public,
                    "type": "service",
                    "local_subject": "a",
                    "share": True,
                    "token": token,
                },
            ],
        )
    )
    (export,) = claims.exports
    assert export == jwt.Export(
        "svc.>",
        "service",
        token_req=True,
        revocations={importer.public: 5},
        response_type="Stream",
        response_threshold_ns=2_000_000_000,
        latency=True,
    )
    assert claims.imports == (
        jwt.Import("x", importer.public, "stream", to="p"),
        jwt.Import("svc.a", importer.public, "service", local_subject="a", share=True, token=token),
    )
    activation = jwt.decode_activation(token)
    assert (activation.subject, activation.issuer) == (importer.public, ACCOUNT.public)
    assert (activation.import_subject, activation.import_kind) == ("svc.>", "service")
    with pytest.raises(jwt.InvalidJwt, match="not activation claim"):
        jwt.decode_activation(account_jwt(ACCOUNT, OPERATOR))


def test_validation_of_exports_and_imports() -> None:
    """What jwt's Exports.Validate and Imports.Validate find blocking, which makes the
    account JWT invalid (its logins refused) as in nats-server."""
    other = account_key()
    stranger = account_key()
    token = activation_jwt(stranger, other, subject="s.>", kind="stream")
    claims = jwt.decode_account(
        account_jwt(
            ACCOUNT,
            OPERATOR,
            exports=[
                {"subject": "a.>", "type": "stream"},
                {"subject": "a.b", "type": "stream", "response_type": "Stream"},
                {"subject": "p.x", "type": "service", "account_token_position": 2},
                {"subject": "q", "type": "thing"},
            ],
            imports=[
                {
                    "subject": "s.1",
                    "account": other.public,
                    "type": "stream",
                    "token": token,
                },
                {"subject": "t", "account": other.public, "type": "stream", "share": True},
                {"subject": "u.>", "account": other.public, "type": "service"},
                {"subject": "u.v", "account": other.public, "type": "service"},
                {"subject": "w", "account": "", "type": "service", "to": "x", "local_subject": "y"},
            ],
        )
    )
    assert jwt.issues(claims) == [
        "invalid response type for stream: 'Stream'",
        "Account Token Position can only be used with wildcard subjects: p.x",
        "invalid export type: 'thing'",
        "stream export subject 'a.>' already exports 'a.b'",
        "activation token doesn't match account it is being included in, 's.1'",
        "sharing information (for latency tracking) is only valid for services: 't'",
        f"overlapping subject namespace for 'u.v' and 'u.>' in same account {other.public!r}",
        "account to import from is not specified",
        "Local Subject replaces To",
    ]
    assert jwt.contained("a.b.c", "a.>")
    assert jwt.contained("a.b", "a.*")
    assert not jwt.contained("a", "a.>")
    assert not jwt.contained("a.>", "a.b")
