"""An account's `exports` and `imports` entries, read as nats-server's
`parseExportStreamOrService` and `parseImportStreamOrService` read them, with their texts;
what they mean across accounts (defined, authorized, no cycles) is checked by the server
(`server/imports.py`)."""

from __future__ import annotations

from collections.abc import Collection, Mapping

from brook.config.conf_values import (
    block_entries,
    go_type,
    on_line,
    read_array,
    read_bool,
    read_int,
    read_str,
)
from brook.config.settings import ConfigError, ExportSettings, ImportSettings
from brook.durations import parse_seconds

# nats-server's keys of exports and imports Brook does not serve: refused by name.
_EXPORT_UNSUPPORTED = ("latency", "allow_trace")
_IMPORT_UNSUPPORTED = ("allow_trace",)
_RESPONSE_TYPES = {"single": "singleton", "singleton": "singleton", "stream": "stream"}
_RESPONSE_TYPES |= {"chunk": "chunked", "chunked": "chunked"}
_THRESHOLD = ("threshold", "response_threshold", "response_max_time", "response_time")
_EXPORT_KEYS = (
    *("stream", "service", "response", "response_type", "accounts", "account_token_position"),
    *_THRESHOLD,
)


def _entry(where: str, v: object, kind: str, unsupported: Collection[str]) -> Mapping[str, object]:
    """An `exports` or `imports` entry (`kind`: "Export" or "Import") as a map, none of
    whose keys is one of nats-server's that Brook refuses by name (`unsupported`)."""
    if not isinstance(v, dict):
        raise ConfigError(
            f"{where}: {kind} Items should be a map with type entry, got {go_type(v)}"
        )
    for key in v:
        if str(key).lower() in unsupported:
            key = str(key).lower()
            raise ConfigError(f"{where}.{key}{on_line(v, key)}: not supported by Brook")
    return v


def read_export(where: str, v: object) -> ExportSettings:
    """An `exports` entry, as nats-server's `parseExportStreamOrService` reads it."""
    entry = _entry(where, v, "Export", _EXPORT_UNSUPPORTED)
    export: ExportSettings | None = None
    response: str | None = None
    threshold: float | None = None
    accounts: list[str] | None = None
    position = 0
    for key, at, value in block_entries(entry, where, _EXPORT_KEYS):
        at += on_line(entry, key)
        if key in ("stream", "service"):
            if export is not None:
                seen = "service" if export.service else "stream"
                raise ConfigError(f'{at}: Detected {key} "{value}" but already saw a {seen}')
            if not isinstance(value, str):
                raise ConfigError(f"{at}: Expected {key} name to be string, got {go_type(value)}")
            export = ExportSettings(value, service=key == "service", where=where)
        elif key in ("response", "response_type"):
            if not isinstance(value, str):
                raise ConfigError(
                    f"{at}: Expected response type to be string, got {go_type(value)}"
                )
            response = _RESPONSE_TYPES.get(value.lower())
            if response is None:
                raise ConfigError(f'{at}: Unknown response type: "{value}"')
        elif key in _THRESHOLD:
            if not isinstance(value, str):
                raise ConfigError(
                    f"{at}: Expected response threshold to be a parseable time duration, "
                    f"got {go_type(value)}"
                )
            try:
                threshold = parse_seconds(value)
            except ValueError:
                raise ConfigError(
                    f"{at}: Expected response threshold to be a parseable time duration, "
                    f'got "{value}"'
                ) from None
        elif key == "account_token_position":
            position = read_int(at, value)
            if position < 0:
                raise ConfigError(f"{at}: expected a token position (1 or more), got {value}")
        else:
            accounts = [
                read_str(f"{at}[{i}]", a) for i, a in enumerate(read_array(at, "accounts", value))
            ]
    if export is None:
        raise ConfigError(f"{where}: an export needs a stream or a service subject")
    if (response is not None or threshold is not None) and not export.service:
        raise ConfigError(f"{where}: Detected response directive on non-service")
    export.accounts = accounts
    export.token_position = position
    export.response_type = response or export.response_type
    export.threshold_s = export.threshold_s if threshold is None else threshold
    return export


def read_imports(where: str, entries: list[object]) -> list[ImportSettings]:
    """An account's `imports`, each as nats-server's `parseImportStreamOrService` reads
    it; a service imported twice under one subject from one account is refused."""
    imports = [_import(f"{where}[{i}]", entry) for i, entry in enumerate(entries)]
    for i, entry in enumerate(imports):
        for earlier in imports[:i]:
            if (
                entry.service
                and earlier.service
                and (entry.to, entry.account) == (earlier.to, earlier.account)
            ):
                raise ConfigError(
                    f'{entry.where}: Duplicate service import subject "{entry.to}", previously '
                    f'used in import for account "{earlier.account}", subject "{earlier.subject}"'
                )
    return imports


def _import(where: str, v: object) -> ImportSettings:
    entry = _entry(where, v, "Import", _IMPORT_UNSUPPORTED)
    found: ImportSettings | None = None
    to = prefix = ""
    share = False
    keys = ("stream", "service", "prefix", "to", "share")
    for key, at, value in block_entries(entry, where, keys):
        at += on_line(entry, key)
        if key in ("stream", "service"):
            if found is not None:
                seen = "service" if found.service else "stream"
                raise ConfigError(f"{at}: Detected {key} but already saw a {seen}")
            if not isinstance(value, dict):
                kind = key.capitalize()
                raise ConfigError(
                    f"{at}: {kind} entry should be an account map, got {go_type(value)}"
                )
            account = subject = ""
            for name, name_at, text in block_entries(value, at, ("account", "subject")):
                if name == "account":
                    account = read_str(name_at, text)
                else:
                    subject = read_str(name_at, text)
            if not account or not subject:
                raise ConfigError(f"{at}: Expect an account name and a subject")
            found = ImportSettings(account, subject, service=key == "service", where=where)
        elif key == "prefix":
            prefix = read_str(at, value)
        elif key == "share":
            share = read_bool(at, value)
        else:
            to = read_str(at, value)
    if found is None:
        raise ConfigError(f"{where}: an import needs a stream or a service")
    if not found.service and prefix and to:
        raise ConfigError(f"{where}: Stream import can not have a 'prefix' and a 'to' property")
    found.to = to or (found.subject if found.service else "")
    found.prefix = "" if found.service else prefix
    found.share = found.service and share  # nats-server ignores it on a stream
    return found
