"""nats-server's `accounts` block: each account's users, default permissions, JetStream
limits (`conf_jetstream.py`), mappings (`conf_mappings.py`), exports and imports
(`conf_exports.py`), with nats-server's texts for duplicate and reserved names."""

from __future__ import annotations

from collections.abc import Collection, Mapping

from brook.config.conf_auth import read_permissions, read_user
from brook.config.conf_exports import read_export, read_imports
from brook.config.conf_jetstream import read_account_jetstream
from brook.config.conf_mappings import mapping_entries, mappings_twice
from brook.config.conf_values import bad, block_entries, on_line, read_array, read_block, read_str
from brook.config.settings import (
    GLOBAL_ACCOUNT,
    AccountSettings,
    ConfigError,
    NkeyUser,
    Permissions,
    Settings,
    User,
)

# The keys of an account's block Brook honours; nats-server's others (exports, imports,
# limits, nkey, msg_trace...) are refused by name until they are built.
_ACCOUNT_KEYS = (
    *("users", "jetstream", "default_permissions", "mappings", "maps", "exports", "imports"),
)


def apply_accounts(s: Settings, where: str, v: object) -> None:
    """nats-server's `accounts` (opts.go `parseAccounts`): a list of names, or a block of
    accounts, each with its `users` (who log in to it) and `jetstream`."""
    if isinstance(v, list):
        names = [read_str(f"{where}[{i}]", name) for i, name in enumerate(v)]
        blocks: dict[str, object] = {name: None for name in names}
        if len(blocks) != len(names):
            twice = next(n for n in names if names.count(n) > 1)
            raise ConfigError(f"{where}: Duplicate Account Entry: {twice}")
    else:
        spelled: Mapping[str, str] = getattr(v, "spelled", {})  # names are case-sensitive
        blocks = {spelled.get(key, key): block for key, block in read_block(where, v).items()}
    used: Collection[str] = getattr(v, "used_vars", ())
    for name, block in blocks.items():
        if name.lower() in used:
            continue
        at = f"{where}.{name}"
        line = on_line(v, name.lower()) if isinstance(v, dict) else ""
        if name == GLOBAL_ACCOUNT:
            raise ConfigError(f'{at}: "{name}" is a Reserved Account{line}')
        if any(a.name == name for a in s.accounts):
            raise ConfigError(f"{where}: Duplicate Account Entry: {name}{line}")
        account = AccountSettings(name)
        s.accounts.append(account)
        if block is None:
            continue
        if not isinstance(block, dict):
            raise ConfigError(f"{at}: Expected map entries for accounts{line}")
        entries: list[User | NkeyUser] = []
        defaults: Permissions | None = None
        for key, key_at, value in block_entries(block, at, _ACCOUNT_KEYS):
            if key == "users":
                if not isinstance(value, list):
                    raise bad(key_at, "an array of {user, password} or {nkey} blocks", value)
                entries = [read_user(f"{key_at}[{i}]", entry) for i, entry in enumerate(value)]
            elif key == "jetstream":
                account.jetstream, account.jetstream_limits = read_account_jetstream(key_at, value)
            elif key in ("mappings", "maps"):
                if account.mappings:
                    raise mappings_twice(key_at)
                account.mappings = mapping_entries(key_at, value)
            elif key == "exports":
                account.exports = [
                    read_export(f"{key_at}[{i}]", e)
                    for i, e in enumerate(read_array(key_at, "Exports", value))
                ]
            elif key == "imports":
                account.imports = read_imports(key_at, read_array(key_at, "Imports", value))
            else:
                defaults = read_permissions(key_at, value)
        for entry in entries:
            entry.account = name
            entry.permissions = entry.permissions or defaults
            if isinstance(entry, User):
                s.auth.users.append(entry)
            else:
                s.auth.nkeys.append(entry)
