"""The `/accountz` document: the accounts, or one account's `AccountInfo`.

Mirrors nats-server's `Accountz` (server/monitor.go): without `acc`, the server's account
names and its system account; with `acc`, that account's detail (`accountInfo`): whether
it is the system account, has JetStream, its client connections, its subscription index's
statistics, and the service exports and imports of the system account's services
(`brook.monitor.system`): the system account exports `$SYS.REQ.ACCOUNT.*.CONNZ` and
`.STATZ` (streamed responses), `$SYS.DEBUG.SUBSCRIBERS` and `$SYS.REQ.USER.*.INFO`, and
every account imports what nats-server's `registerSystemImports` imports, and on a server
with JetStream the `$JS.API.>` service every account but the system account imports from
it; the account's mappings (its own, and a JetStream domain's) and its configured exports
and imports, or a JWT account's exports and linked imports with its JWT, issuer, name,
tags, the claims as nats-server re-encodes them (`decoded_jwt`, `brook.jwt.goclaims`) and
revoked users (ADR 0034; nats-server's `validation_result_jwt` is not shown). An unknown
account is refused as nats-server refuses it ("Account X does not exist"). Brook shows no
pending responses, as nats-server leaves them out when empty.
"""

from __future__ import annotations

import time
from typing import Any

from brook.config.settings import ExportSettings, ImportSettings
from brook.monitor.durations import rfc3339_nano
from brook.monitor.params import BadParameter
from brook.monitor.subsz import sublist_statistics
from brook.server.statistics import AccountSnapshot, StatisticsFeed

__all__ = ["build_account_info", "build_accountz"]


def build_accountz(feed: StatisticsFeed, account: str) -> dict[str, Any]:
    """`/accountz?acc=account` ("" for the list); raises `BadParameter` for an account
    the server does not have."""
    accounts = feed.account_snapshots()
    doc: dict[str, Any] = {"server_id": feed.server_id, "now": rfc3339_nano(time.time())}
    system = next((a.name for a in accounts if a.system), "")
    if system:
        doc["system_account"] = system
    if not account:
        doc["accounts"] = [a.name for a in accounts]
    else:
        doc["account_detail"] = build_account_info(feed, account, accounts)
    return doc


def build_account_info(
    feed: StatisticsFeed, name: str, accounts: list[AccountSnapshot] | None = None
) -> dict[str, Any]:
    """nats-server's `AccountInfo` of account `name`."""
    accounts = feed.account_snapshots() if accounts is None else accounts
    account = next((a for a in accounts if a.name == name), None)
    if account is None:
        raise BadParameter(f"Account {name} does not exist")
    system = next((a.name for a in accounts if a.system), "")
    sublists = feed.sublists(name)
    info: dict[str, Any] = {
        "account_name": name,
        "update_time": rfc3339_nano(account.updated_at),
    }
    if account.system:
        info["is_system"] = True
    claims = account.jwt
    decoded = None
    if claims is not None:
        # Imported here: only a JWT account has claims, and a server without any never
        # loads brook.jwt (test_serve_imports_only_what_its_configuration_uses).
        from brook.jwt import account_claims_json, validation_issues

        decoded = account_claims_json(claims.token)
    # nats-server's `expired`: set once the second of the JWT's `exp` has come
    expired = decoded is not None and 0 < decoded.get("exp", 0) <= time.time()
    info |= {
        "expired": expired,
        "complete": account.jwt.complete if account.jwt is not None else True,
        "jetstream_enabled": account.jetstream,
        "leafnode_connections": 0,
        "client_connections": account.clients,
        "subscriptions": sum(s.stats["num_subscriptions"] for s in sublists),
    }
    if account.mappings:
        info["mappings"] = {
            source: [{"subject": subject, "weight": weight} for subject, weight in dests]
            for source, dests in sorted(account.mappings.items())
        }
    configured = next((a for a in feed.settings.accounts if a.name == name), None)
    declared = claims or configured
    # nats-server's JetStream API is the system account's `$JS.API.>` service, imported
    # by every other account.
    jetstream_api = feed.settings.jetstream.enabled
    exports = [_export(e) for e in declared.exports] if declared is not None else []
    if account.system_services and account.system:
        exports += _system_exports()
    if jetstream_api and account.system:
        exports.append({"subject": "$JS.API.>", "type": "service", "response_type": "Singleton"})
    if exports:
        info["exports"] = exports
    imports = [_import(i) for i in declared.imports] if declared is not None else []
    if account.system_services:
        imports += _system_imports(name, system, account.system)
    if jetstream_api and not account.system:
        imports.append(_service_import("$JS.API.>", system, "$JS.API.>", share=True))
    if imports:
        info["imports"] = imports
    if claims is not None:  # nats-server's fields of a JWT account
        info |= {"jwt": claims.token, "issuer_key": claims.issuer}
    info["name_tag"] = claims.name if claims is not None and claims.name else name
    if claims is not None:
        if claims.tags:
            info["tags"] = list(claims.tags)
        if decoded is not None:
            info["decoded_jwt"] = decoded
            issues = validation_issues(decoded, time.time())
            if issues:
                info["validation_result_jwt"] = issues
        if claims.revocations:
            info["revoked_user"] = _times(claims.revocations)
    info["sublist_stats"] = sublist_statistics([s.stats for s in sublists])
    return info


def _system_exports() -> list[dict[str, Any]]:
    streamed = [f"$SYS.REQ.ACCOUNT.*.{name}" for name in ("CONNZ", "STATZ")]
    exports = [{"subject": s, "type": "service", "response_type": "Streamed"} for s in streamed]
    for subject in ("$SYS.DEBUG.SUBSCRIBERS", "$SYS.REQ.USER.*.INFO"):
        exports.append({"subject": subject, "type": "service", "response_type": "Singleton"})
    return exports


_RESPONSE_TYPES = {"singleton": "Singleton", "stream": "Streamed", "chunked": "Chunked"}


def _export(export: ExportSettings) -> dict[str, Any]:
    """A configured export as nats-server's `ExtExport` shows it."""
    out: dict[str, Any] = {"subject": export.subject}
    out["type"] = "service" if export.service else "stream"
    if export.token_required:
        out["token_req"] = True
    if export.service:
        out["response_type"] = _RESPONSE_TYPES[export.response_type]
    if export.accounts:
        out["approved_accounts"] = list(export.accounts)
    if export.revocations:
        out["revoked_activations"] = _times(export.revocations)
    return out


def _times(revocations: dict[str, int]) -> dict[str, str]:
    """Revocations (key: unix seconds) as nats-server shows them (Go times)."""
    return {key: rfc3339_nano(seconds) for key, seconds in revocations.items()}


def _import(imported: ImportSettings) -> dict[str, Any]:
    """A configured import as nats-server's `ExtImport` shows it: a stream's subject
    with its local (prefixed or renamed) subject, a service's exported subject with
    the local one (`to`, and `local_subject` again)."""
    if imported.service:
        return _service_import(
            imported.subject, imported.account, imported.to, share=imported.share
        )
    local = imported.to or imported.subject
    if imported.prefix:
        local = f"{imported.prefix}.{imported.subject}"
    return {
        "subject": imported.subject,
        "account": imported.account,
        "local_subject": local,
        "type": "stream",
        "invalid": False,
        "share": False,
        "tracking": False,
    }


def _service_import(subject: str, account: str, local: str, *, share: bool) -> dict[str, Any]:
    return {
        "subject": subject,
        "account": account,
        "to": local,
        "local_subject": local,
        "type": "service",
        "invalid": False,
        "share": share,
        "tracking": False,
    }


def _system_imports(name: str, system: str, is_system: bool) -> list[dict[str, Any]]:
    """The services an account imports from the system account (nats-server's
    `registerSystemImports`; the system account imports only its user info)."""
    imports = [] if is_system else [
        (f"$SYS.REQ.ACCOUNT.{name}.CONNZ", "$SYS.REQ.ACCOUNT.PING.CONNZ", False),
        (f"$SYS.REQ.ACCOUNT.{name}.CONNZ", "$SYS.REQ.SERVER.PING.CONNZ", False),
        (f"$SYS.REQ.ACCOUNT.{name}.STATZ", "$SYS.REQ.ACCOUNT.PING.STATZ", False),
    ]  # fmt: skip
    imports.append((f"$SYS.REQ.USER.{name}.INFO", "$SYS.REQ.USER.INFO", True))
    return [
        _service_import(subject, system, local, share=share) for subject, local, share in imports
    ]
