"""Client authentication's settings (nats-server's `authorization` block and the
users of `accounts`): users, nkey users, their permissions, `no_auth_user`, and the
accounts nats-server names itself, each user's default."""

from __future__ import annotations

from dataclasses import dataclass, field

from brook import limits
from brook.config.errors import ConfigError

GLOBAL_ACCOUNT = "$G"  # nats-server's global account: users of no configured account
SYSTEM_ACCOUNT = "$SYS"  # nats-server's default system account


@dataclass(slots=True)
class SubjectPermission:
    """nats-server's `allow`/`deny` lists of one direction (publish or subscribe).

    `allow` None: no allow list, everything not denied is allowed. For publish an empty
    `allow` list allows nothing (what `allow_responses` leaves when no list is given); for
    subscribe nats-server treats an empty list as none. Subscribe entries may name a
    queue group after the subject (`"foo.> q"`)."""

    allow: list[str] | None = None
    deny: list[str] = field(default_factory=list)


@dataclass(slots=True)
class ResponsePermission:
    """`allow_responses`: a client may publish to the reply subject of each request it
    received, at most `max_msgs` times and within `expires_s` (<= 0: no bound)."""

    max_msgs: int = limits.ALLOW_RESPONSES_MAX_MSGS
    expires_s: float = limits.ALLOW_RESPONSES_EXPIRES_S


@dataclass(slots=True)
class Permissions:
    """A user's authorization (nats-server's `permissions` block); None parts allow all."""

    publish: SubjectPermission | None = None
    subscribe: SubjectPermission | None = None
    responses: ResponsePermission | None = None


def _users_key(account: str) -> str:
    """Where a user of `account` is configured, for error messages."""
    return "authorization.users" if account == GLOBAL_ACCOUNT else f"accounts.{account}.users"


def _duplicate(kind: str, name: str, account: str, earlier: str) -> ConfigError:
    """A user or nkey defined twice; across accounts in nats-server's words (opts.go
    `parseAccounts`: a user belongs to one account)."""
    if account == earlier == GLOBAL_ACCOUNT:
        return ConfigError(f"authorization.users: {kind} {name!r} is defined twice")
    where = _users_key(account if account != GLOBAL_ACCOUNT else earlier)
    return ConfigError(f'{where}: Duplicate {kind} "{name}" detected')


@dataclass(slots=True)
class User:
    """One user/password entry; `password` may be plain text or a bcrypt hash ($2a$/$2b$/$2y$).
    `permissions` None: the user may publish and subscribe anywhere."""

    user: str
    password: str
    permissions: Permissions | None = None  # what the user may publish and subscribe to
    account: str = GLOBAL_ACCOUNT  # the account whose subjects (and JetStream) it uses
    # nats-server's `allowed_connection_types` (STANDARD, WEBSOCKET, ...): the kinds of
    # connection the user may log in through; empty: any.
    connection_types: frozenset[str] = frozenset()


@dataclass(slots=True)
class NkeyUser:
    """One nkey user: a public user nkey (`U...`); the client proves it holds the key by
    signing the nonce of the server's INFO."""

    nkey: str
    permissions: Permissions | None = None
    account: str = GLOBAL_ACCOUNT
    connection_types: frozenset[str] = frozenset()  # as a `User`'s


@dataclass(slots=True)
class AuthSettings:
    """Client authentication: none, a token, or users (name/password and nkey users), and
    the user a client without credentials logs in as (`no_auth_user`)."""

    token: str | None = None
    users: list[User] = field(default_factory=list)
    nkeys: list[NkeyUser] = field(default_factory=list)
    no_auth_user: str | None = None
    single_user: bool = False  # `users` is the authorization block's one user/password

    @property
    def required(self) -> bool:
        return self.token is not None or bool(self.users) or bool(self.nkeys)

    @property
    def accounts(self) -> set[str]:
        """The accounts the users log in to."""
        return {u.account for u in self.users} | {n.account for n in self.nkeys}

    def validate(self) -> None:
        """nats-server's rules, in its words where it has them (opts.go, auth.go)."""
        from brook.nkey import InvalidNkey, Prefix, decode_public_key

        if self.single_user and self.accounts - {GLOBAL_ACCOUNT}:
            raise ConfigError("accounts: Can not have a single user/pass and accounts")
        if self.token is not None and self.accounts - {GLOBAL_ACCOUNT}:
            raise ConfigError("accounts: Can not have a token and accounts")
        if self.token is not None and (self.users or self.nkeys):
            raise ConfigError("authorization: token and users cannot both be set")
        seen: dict[str, str] = {}  # user name or nkey -> its account
        for u in self.users:
            if not u.user:
                raise ConfigError(f"{_users_key(u.account)}: a user has an empty name")
            if u.user in seen:
                raise _duplicate("user", u.user, u.account, seen[u.user])
            seen[u.user] = u.account
        for n in self.nkeys:
            try:
                decode_public_key(n.nkey, Prefix.USER)
            except InvalidNkey:
                raise ConfigError(
                    f"{_users_key(n.account)}: Not a valid public nkey for a user: {n.nkey!r}"
                ) from None
            if n.nkey in seen:
                raise _duplicate("nkey", n.nkey, n.account, seen[n.nkey])
            seen[n.nkey] = n.account
        if self.no_auth_user is not None:
            self.check_no_auth_user(self.no_auth_user)

    def check_no_auth_user(self, name: str) -> None:
        """`name` (the server's or a WebSocket listener's `no_auth_user`) is one of these
        users or nkeys: nats-server's `validateNoAuthUser`, in its words."""
        if not self.users and not self.nkeys:
            raise ConfigError(f'no_auth_user: "{name}" present, but users/nkeys are not defined')
        if name not in {u.user for u in self.users} | {n.nkey for n in self.nkeys}:
            raise ConfigError(
                f'no_auth_user: "{name}" not present as user or nkey in authorization '
                "block or account configuration"
            )
