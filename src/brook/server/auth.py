"""Client authentication from CONNECT: none, a token, users with passwords (plain or
bcrypt) or nkeys, and `no_auth_user`, decided as nats-server decides (auth.go
`processClientOrLeafAuthentication`).

Secrets are compared in constant time. bcrypt verification costs tens of milliseconds by
design, so a login that needs one carries it (`Login.bcrypt`) for the connection to run off
the event loop (`verify_bcrypt`); every other check, an nkey's ed25519 signature included
(about 0.1 ms), is immediate. nats-server answers every failure with
`-ERR 'Authorization Violation'` and so does Brook; the reason is only logged.
"""

from __future__ import annotations

import base64
import hmac
import secrets
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from brook.config.settings import GLOBAL_ACCOUNT, AuthSettings, NkeyUser, OperatorSettings, User
from brook.nkey import InvalidNkey, Prefix, decode_public_key, decode_signature, verify
from brook.protocol import errors as perr
from brook.protocol.parser import ProtocolError
from brook.server.permissions import CompiledPermissions

if TYPE_CHECKING:
    from brook.server.jwtauth import JwtUser, OperatorMode
    from brook.server.tls import CertificateNames

_BCRYPT_PREFIXES = ("$2a$", "$2b$", "$2y$")
_NONCE_RAW_BYTES = 11  # nats-server's nonceRawLen: 15 characters of unpadded base64
_BOOL_OPTIONS = ("verbose", "pedantic", "echo", "headers", "no_responders", "tls_required")
_STR_OPTIONS = ("name", "lang", "version", "user", "pass", "auth_token", "nkey", "sig", "jwt")


def is_bcrypt_hash(secret: str) -> bool:
    return secret.startswith(_BCRYPT_PREFIXES)


def _same(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode(), b.encode())


def merge_connect_options(earlier: dict[str, Any], options: dict[str, Any]) -> dict[str, Any]:
    """A CONNECT's options over the connection's `earlier` ones, type-checked: nats-server
    unmarshals each CONNECT into the options it already has, so keys left out (or null)
    keep their earlier value and a second CONNECT only changes what it names (credentials
    included). A wrongly typed option is a `ProtocolError` (nats-server fails to parse)."""
    merged = {**earlier, **{k: v for k, v in options.items() if v is not None}}
    for key in _BOOL_OPTIONS:
        if key in merged and not isinstance(merged[key], bool):
            raise ProtocolError(f"CONNECT option {key} is not a boolean", None)
    for key in _STR_OPTIONS:
        if key in merged and not isinstance(merged[key], str):
            raise ProtocolError(f"CONNECT option {key} is not a string", None)
    proto = merged.get("protocol", 0)
    if not isinstance(proto, int) or isinstance(proto, bool):
        raise ProtocolError("CONNECT option protocol is not an integer", None)
    return merged


def connect_refusal(options: dict[str, Any]) -> tuple[str, str] | None:
    """The `-ERR` text and close reason of a logged-in CONNECT that is refused anyway; as
    nats-server checks, after the credentials: the protocol version, then no_responders."""
    if options.get("protocol", 0) not in (0, 1):
        return perr.INVALID_PROTOCOL, "invalid client protocol"
    if options.get("no_responders", False) and not options.get("headers", False):
        return perr.NO_RESPONDERS_NEEDS_HEADERS, "no_responders without headers"
    return None


def _option(options: dict[str, Any], key: str) -> str:
    """A CONNECT credential; absent, null or empty are alike, as Go's empty string."""
    value = options.get(key)
    return value if isinstance(value, str) else ""


@dataclass(frozen=True, slots=True)
class Login:
    """Whom a CONNECT logs in as, once a pending bcrypt check (if any) passes."""

    name: str  # the authorized user: a user name, an nkey, or "" (token or no auth)
    entry: User | NkeyUser | None = None  # its config entry (permissions); None: token, no auth
    bcrypt: tuple[str, str] | None = None  # (secret, hash) still to verify off the event loop
    account: str = GLOBAL_ACCOUNT  # the name of the account it logs in to
    jwt: JwtUser | None = None  # a user JWT's login (operator mode): account, limits, expiry
    compiled: CompiledPermissions | None = None  # a user JWT's permissions, compiled

    @classmethod
    def of(cls, name: str, entry: User | NkeyUser) -> Login:
        """The login of a configured user or nkey, to its entry's account."""
        return cls(name, entry, account=entry.account)


ANONYMOUS = Login("")


def verify_bcrypt(secret: str, hashed: str) -> bool:
    """Blocking (tens of milliseconds): meant for an executor thread."""
    import bcrypt

    try:
        return bool(bcrypt.checkpw(secret.encode(), hashed.encode()))
    except ValueError:
        return False  # a malformed hash in the config never authenticates anyone


class Authenticator:
    def __init__(
        self,
        settings: AuthSettings,
        operator: OperatorSettings | None = None,
        *,
        anonymous_global: bool = False,
        maps_certificates: bool = False,
    ) -> None:
        """`anonymous_global`: a client without credentials logs in to `$G` (nats-server's
        generated no_auth_user when only the system account has users).
        `maps_certificates`: a listener maps client certificates to users, so a user
        without a password logs in by certificate only; else by its name and an empty
        password, as on nats-server."""
        self._maps_certificates = maps_certificates
        # Operator mode (ADR 0028): user JWTs are the only way in. Imported here: only
        # operator mode reads JWTs, and the other servers start sooner without them.
        self._operator: OperatorMode | None = None
        if operator is not None and operator.jwts:
            from brook.server.jwtauth import OperatorMode

            self._operator = OperatorMode(operator)
        self._anonymous_global = anonymous_global
        self._token = settings.token
        self._users = {u.user: u for u in settings.users}
        self._nkeys = {n.nkey: n for n in settings.nkeys}
        self._no_auth_user = settings.no_auth_user or ""
        # Each user's permissions, compiled once for all of its connections, by login name
        # (a user's name or an nkey).
        entries: list[tuple[str, User | NkeyUser]] = [
            *((u.user, u) for u in settings.users),
            *((n.nkey, n) for n in settings.nkeys),
        ]
        self._permissions = {
            name: CompiledPermissions(entry.permissions)
            for name, entry in entries
            if entry.permissions is not None
        }
        # Operations before CONNECT are refused and CONNECT must come in time.
        self.required = settings.required or self._operator is not None
        # INFO's auth_required: false when a client without credentials gets in anyway.
        self.advertised = self.required and not self._no_auth_user
        # Each connection's INFO carries a fresh nonce for nkey and JWT users to sign.
        self.nonce_required = bool(self._nkeys) or self._operator is not None
        self.has_users = bool(self._users)

    @property
    def operator(self) -> OperatorMode | None:
        """Operator mode's trust and resolver (ADR 0028, 0031); None without operators."""
        return self._operator

    def admit(self, user: JwtUser) -> bool:
        """A user JWT's client counted against its account's connection limit, if it may."""
        return self._operator is None or self._operator.admit(user)

    def release(self, user: JwtUser) -> None:
        if self._operator is not None:
            self._operator.release(user)

    @staticmethod
    def new_nonce() -> str:
        return base64.urlsafe_b64encode(secrets.token_bytes(_NONCE_RAW_BYTES)).decode().rstrip("=")

    def permissions(self, login: Login) -> CompiledPermissions | None:
        """The permissions of whom `login` logged in as; None: no restriction."""
        if login.jwt is not None:
            return login.compiled
        return self._permissions.get(login.name) if self._permissions else None

    def connect_login(
        self,
        options: dict[str, Any],
        nonce: str,
        tls_map: bool = False,
        certificate: CertificateNames | None = None,
        *,
        host: str = "",
        websocket: bool = False,
    ) -> Login | None:
        """Whom a CONNECT logs in as. On a `verify_and_map` port with users configured
        the client certificate (None: none was offered) names the user and CONNECT's
        credentials do not count (nats-server only warns about a user name there), but
        an nkey login is checked first, as nats-server does."""
        if tls_map and self.has_users and not self.claims_nkey(options):
            if certificate is None:
                return None
            return self.certificate_user(certificate, websocket=websocket)
        return self.login(options, nonce, host=host, websocket=websocket)

    def login(
        self,
        options: dict[str, Any],
        nonce: str,
        *,
        host: str = "",
        websocket: bool = False,
        leaf: bool = False,
    ) -> Login | None:
        """Whom these CONNECT options log in as, or None when they are refused; `nonce` is
        the one this connection's INFO sent; `host` the client's address, `websocket`
        whether it came through the WebSocket listener (both for user JWTs), `leaf`
        whether a leafnode spoke logs in as a client (a hub without its own authorization)."""
        kind = "LEAFNODE" if leaf else "WEBSOCKET" if websocket else "STANDARD"
        if self._operator is not None:
            return _jwt_login(self._operator.login(options, nonce, host=host, connection_type=kind))
        if not self.required:
            return ANONYMOUS
        user, password = _option(options, "user"), _option(options, "pass")
        token, nkey = _option(options, "auth_token"), _option(options, "nkey")
        anonymous = not user and not password and not token
        if anonymous and not nkey and self._anonymous_global:
            return ANONYMOUS
        if self._nkeys:
            if anonymous and not nkey and self._no_auth_user in self._nkeys:
                nkey = self._no_auth_user
            if nkey:
                nkey_user = self._nkeys.get(nkey)
                if nkey_user is None or not _type_allowed(nkey_user, kind):
                    return None
                # The no_auth_user has nothing to prove; everyone else signs the nonce.
                if nkey != self._no_auth_user and not _signed(nkey, options, nonce):
                    return None
                return Login.of(nkey, nkey_user)
        if self._users:
            if anonymous and self._no_auth_user in self._users:
                # As nats-server: the user's own password stands in for the client's, so
                # a no_auth_user with a bcrypt hash lets nobody in (the hash is no password).
                user, password = self._no_auth_user, self._users[self._no_auth_user].password
            if user:
                entry = self._users.get(user)
                # A user without a password is a certificate's when a listener maps
                # them (verify_and_map) unless it is the no_auth_user, as nats-server.
                if entry is None or (
                    not entry.password and user != self._no_auth_user and self._maps_certificates
                ):
                    return None
                if not _type_allowed(entry, kind):
                    return None
                return _compare(entry.password, password, Login.of(user, entry))
        if self._token is not None:
            return _compare(self._token, token, ANONYMOUS)
        return None

    def claims_nkey(self, options: dict[str, Any]) -> bool:
        """CONNECT logs in as an nkey user (its own nkey, or an nkey no_auth_user): then
        nats-server checks the nkey, not `verify_and_map`'s certificate."""
        if not self._nkeys:
            return False
        if _option(options, "nkey"):
            return True
        anonymous = not any(_option(options, k) for k in ("user", "pass", "auth_token"))
        return anonymous and self._no_auth_user in self._nkeys

    def configured(self, options: dict[str, Any]) -> User | NkeyUser | None:
        """The configured user or nkey CONNECT `options` name (None: none, or not one of
        these): a config reload closes a client whose user is gone or in another account
        (nats-server's `clientHasMovedToDifferentAccount`)."""
        nkey = _option(options, "nkey")
        return self._nkeys.get(nkey) if nkey else self._users.get(_option(options, "user"))

    def login_without_connect(self, nonce: str, *, websocket: bool = False) -> Login | None:
        """The login of a client whose first operation is not CONNECT: nats-server lets it
        in as the no_auth_user if that is a password user (parser.go), authenticated as
        after an empty CONNECT. A bcrypt hash never matches itself, so that is refused
        here without spending a bcrypt check on it."""
        if self._anonymous_global:
            return ANONYMOUS
        if self._no_auth_user not in self._users:
            return None
        login = self.login({}, nonce, websocket=websocket)
        return login if login is not None and login.bcrypt is None else None

    def certificate_user(self, names: CertificateNames, *, websocket: bool = False) -> Login | None:
        """The user a verified client certificate maps to (`verify_and_map`), as nats-server's
        `checkClientTLSCertSubject`: an e-mail, DNS or URI name or the subject's DN that
        is a user name, else a user name that is the subject's DN in another RDN order;
        users not allowed this kind of connection are passed over."""
        users = {
            name: entry
            for name, entry in self._users.items()
            if _type_allowed(entry, "WEBSOCKET" if websocket else "STANDARD")
        }
        for candidate in names.candidates():
            if candidate in users:
                return Login.of(candidate, users[candidate])
        name = next((user for user in users if names.matches_dn(user)), None)
        return None if name is None else Login.of(name, users[name])


def _type_allowed(entry: User | NkeyUser, kind: str) -> bool:
    """nats-server's `connectionTypeAllowed`: a user with `allowed_connection_types` logs
    in only through a connection of one of those types (`kind`: STANDARD, WEBSOCKET,
    LEAFNODE)."""
    kinds = entry.connection_types
    return not kinds or kind in kinds


def _jwt_login(user: JwtUser | None) -> Login | None:
    if user is None:
        return None
    compiled = CompiledPermissions(user.permissions) if user.permissions else None
    return Login(user.public_key, account=user.account, jwt=user, compiled=compiled)


def _compare(expected: str, given: str, login: Login) -> Login | None:
    if is_bcrypt_hash(expected):
        return replace(login, bcrypt=(given, expected))
    return login if _same(given, expected) else None


def _signed(nkey: str, options: dict[str, Any], nonce: str) -> bool:
    """The client's `sig` is the nkey's signature of the nonce."""
    sig = decode_signature(_option(options, "sig"))
    if not sig:
        return False
    try:
        key = decode_public_key(nkey, Prefix.USER)
    except InvalidNkey:
        return False
    return verify(key, nonce.encode(), sig)
