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

The claim types are in `claims`, decoding in `decoding`, validation in `checks`, an
account's claims as nats-server re-encodes them (`/accountz` `decoded_jwt`) in
`goclaims`; this package is their one import path.
"""

from __future__ import annotations

from brook.jwt.checks import contained, issues
from brook.jwt.claims import (
    ALL,
    CONNECTION_TYPES,
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
from brook.jwt.decoding import (
    GenericClaims,
    decode,
    decode_account,
    decode_activation,
    decode_generic,
    decode_operator,
    decode_user,
    decorated_blocks,
    is_public_key,
    parse_decorated,
)
from brook.jwt.goclaims import account_claims_json, validation_issues

__all__ = [
    "ALL",
    "CONNECTION_TYPES",
    "MAX_TOKEN_BYTES",
    "NO_LIMIT",
    "AccountClaims",
    "AccountLimits",
    "ActivationClaims",
    "Claims",
    "Export",
    "GenericClaims",
    "Import",
    "InvalidJwt",
    "JetStreamLimits",
    "OperatorClaims",
    "Permission",
    "ResponsePermission",
    "TimeRange",
    "UserClaims",
    "UserLimits",
    "UserScope",
    "account_claims_json",
    "contained",
    "decode",
    "decode_account",
    "decode_activation",
    "decode_generic",
    "decode_operator",
    "decode_user",
    "decorated_blocks",
    "is_public_key",
    "issues",
    "parse_decorated",
    "validation_issues",
]
