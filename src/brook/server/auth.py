"""Client authentication from CONNECT: none, token, or user/password (plain or bcrypt).

Secrets are compared in constant time. bcrypt verification costs tens of milliseconds by
design, so it is split out (`slow_check`) for the connection to run off the event loop;
every other check is immediate. nats-server answers every failure with
`-ERR 'Authorization Violation'` and so does Brook; the reason is only logged.
"""

from __future__ import annotations

import hmac
from typing import TYPE_CHECKING, Any

from brook.config.settings import AuthSettings

if TYPE_CHECKING:
    from brook.server.tls import CertificateNames

_BCRYPT_PREFIXES = ("$2a$", "$2b$", "$2y$")


def is_bcrypt_hash(secret: str) -> bool:
    return secret.startswith(_BCRYPT_PREFIXES)


def _same(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode(), b.encode())


class Authenticator:
    def __init__(self, settings: AuthSettings) -> None:
        self._token = settings.token
        self._users = {u.user: u.password for u in settings.users}
        self.required = settings.required
        self.has_users = bool(self._users)

    def fast_check(self, options: dict[str, Any]) -> bool | None:
        """True/False when decided now; None when a bcrypt hash must be verified (`slow_check`)."""
        if not self.required:
            return True
        if self._token is not None:
            token = options.get("auth_token")
            if isinstance(token, str):
                if is_bcrypt_hash(self._token):
                    return None
                return _same(token, self._token)
            return False
        user, password = options.get("user"), options.get("pass")
        if not isinstance(user, str) or not isinstance(password, str):
            return False
        expected = self._users.get(user)
        if not expected:  # unknown, or a certificate-only user (verify_and_map)
            return False
        if is_bcrypt_hash(expected):
            return None
        return _same(password, expected)

    def certificate_user(self, names: CertificateNames) -> str | None:
        """The user a verified client certificate maps to (`verify_and_map`), as nats-server's
        `checkClientTLSCertSubject`: an e-mail, DNS or URI name or the subject's DN that
        is a user name, else a user name that is the subject's DN in another RDN order."""
        for candidate in names.candidates():
            if candidate in self._users:
                return candidate
        return next((user for user in self._users if names.matches_dn(user)), None)

    def slow_check(self, options: dict[str, Any]) -> bool:
        """Verify against a bcrypt hash; blocking, meant for an executor thread."""
        import bcrypt

        if self._token is not None:
            secret, expected = options.get("auth_token"), self._token
        else:
            secret = options.get("pass")
            expected = self._users.get(str(options.get("user")), "")
        if not isinstance(secret, str) or not expected:
            return False
        try:
            return bool(bcrypt.checkpw(secret.encode(), expected.encode()))
        except ValueError:
            return False  # a malformed hash in the config never authenticates anyone
