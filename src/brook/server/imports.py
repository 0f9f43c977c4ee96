"""The accounts' exports and imports, checked as nats-server checks them and linked.

nats-server's `parseAccounts` adds, once every account exists, the stream exports, the
service exports, the stream imports and the service imports, in that order, each refused
with its words when it names an account that does not exist, imports what the exporter
does not export to it, or would close a cycle of imports (accounts.go). What passes
becomes the crossings of `routing/imports.py` between the accounts' routers (ADR 0030).

Account JWTs declare exports and imports too (ADR 0034): read into the same settings
(`jwt_exports`, `jwt_imports`) and checked and linked by the same code, but as
nats-server's `updateAccountClaimsWithRefresh` adds them: an import refused is logged and
left out (the account is "incomplete"), not a start-up error; a claim update replaces
the account's exports and imports, and the imports of every account that imports from it
are checked again (an export removed or revoked drops them, one added completes them).
An export with `token_req` admits importers holding an activation token of the
exporter's (`_activated`, nats-server's `checkActivation`), each dropped when it expires.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from brook import limits
from brook.config.settings import ConfigError, ExportSettings, ImportSettings, Settings
from brook.routing.imports import Responses, ServiceImport, StreamImport
from brook.routing.mappings import SubjectMappings
from brook.routing.router import Router
from brook.routing.transform import SubjectTransform, TransformError, tokenized
from brook.subjects import has_wildcard, is_valid_subject, subset_match

if TYPE_CHECKING:
    from brook import jwt

log = logging.getLogger("brook.server")

STREAM_NOT_AUTHORIZED = "stream import not authorized"
SERVICE_NOT_AUTHORIZED = "service import not authorized"
BAD_PREFIX = "stream import prefix can not contain wildcard tokens"
CYCLE = "import forms a cycle"
DUPLICATE_STREAM = "stream import already exists"
INVALID_SUBJECT = "invalid subject"


class LinkedAccount(Protocol):
    """What linking needs of an account (server/accounts.py's `Account`)."""

    name: str
    router: Router
    mappings: SubjectMappings | None


def collide(a: str, b: str) -> bool:
    """nats-server's SubjectsCollide: some subject matches both."""
    at, bt = a.split("."), b.split(".")
    for i in range(min(len(at), len(bt))):
        x, y = at[i], bt[i]
        if x == ">" or y == ">":
            return True
        if x != y and x != "*" and y != "*":
            return False
    return len(at) == len(bt)


def _within(subject: str, export: str) -> bool:
    """nats-server's subjectIsSubsetMatch(subject, export)."""
    return subset_match(export.encode(), subject.encode())


def _check_transform(
    kind: str,
    subject: str,
    to: str,
    refused: Callable[[str], ConfigError],
    *,
    shown: tuple[str, str],
) -> None:
    """A wildcard import of `subject` under another subject `to` must compile as a strict
    transform, as nats-server's `addMappedStreamImportWithClaim` and `addServiceImport`
    check it; its text names the two subjects in `shown`'s order (a service import's `to`
    first, as nats-server's)."""
    if not has_wildcard(subject.encode()) or to == subject:
        return
    try:
        SubjectTransform.compile(subject, tokenized(to.encode()), strict=True)
    except TransformError as exc:
        raise refused(
            f"failed to create mapping transform for {kind} import subject from "
            f'"{shown[0]}" to "{shown[1]}": {exc.text}'
        ) from None


@dataclass
class _Imports:
    """An account's imports added so far: (exporting account, its subject, ours)."""

    streams: list[tuple[str, str, str]] = field(default_factory=list)
    services: list[tuple[str, str, str]] = field(default_factory=list)


_NONE = _Imports()  # an account without imports (never added to)


class Links:
    """Every crossing between the accounts, by importing account; `close` removes them."""

    def __init__(self, settings: Settings, accounts: Mapping[str, LinkedAccount]) -> None:
        self._accounts = accounts
        self._exports: dict[str, list[ExportSettings]] = {}
        self._imports: dict[str, _Imports] = {}
        self._responses: dict[str, Responses] = {}
        self._links: dict[str, list[StreamImport | ServiceImport]] = {}
        # Account JWTs (ADR 0034): each one's declared imports, its keys (activations
        # signed by them are its own) and the timers of its activations' expiry.
        self._declared: dict[str, list[ImportSettings]] = {}
        self._linked: dict[str, list[ImportSettings]] = {}  # those of them linked
        self._incomplete: set[str] = set()  # accounts with an import refused
        self._signers: dict[str, frozenset[str]] = {}
        self._expiry: dict[str, asyncio.TimerHandle] = {}
        configured = settings.accounts
        for kind in ("stream", "service"):
            for entry in configured:
                for export in entry.exports:
                    if export.service == (kind == "service"):
                        self._export(entry.name, export)
        for entry in configured:
            for imported in entry.imports:
                if not imported.service:
                    self._stream_import(entry.name, imported)
        for entry in configured:
            for imported in entry.imports:
                if imported.service:
                    self._service_import(entry.name, imported)

    def close(self) -> None:
        for name in list(self._links):
            self._unlink(name)
        for responses in self._responses.values():
            responses.close()

    def _unlink(self, account: str) -> None:
        for link in self._links.pop(account, ()):
            link.close()
        self._imports.pop(account, None)
        self._linked.pop(account, None)
        timer = self._expiry.pop(account, None)
        if timer is not None:
            timer.cancel()

    # ------------------------------------------------------------------ account JWTs

    def apply_jwt(self, claims: jwt.AccountClaims) -> None:
        """An account JWT's exports and imports, in place of what the account had
        (nats-server's `updateAccountClaimsWithRefresh`): exports first, then the
        account's imports, then the imports of every account importing from it."""
        name = claims.subject
        self._exports.pop(name, None)
        for kind in ("stream", "service"):
            for export in jwt_exports(claims):
                if export.service == (kind == "service"):
                    try:
                        self._export(name, export)
                    except ConfigError as exc:
                        log.debug("Error adding %s export to account [%s]: %s", kind, name, exc)
        self._signers[name] = frozenset((name, *claims.signing_keys))
        self._declared[name] = jwt_imports(claims)
        self._relink(name)
        self._relink_importers(name)

    def forget(self, name: str) -> None:
        """A deleted account JWT: its exports and imports are gone."""
        self._exports.pop(name, None)
        self._signers.pop(name, None)
        self._declared.pop(name, None)
        self._incomplete.discard(name)
        self._unlink(name)
        self._relink_importers(name)

    def _relink_importers(self, exporter: str) -> None:
        for importer, declared in list(self._declared.items()):
            if importer != exporter and any(i.account == exporter for i in declared):
                self._relink(importer)

    def _relink(self, account: str) -> None:
        """The account's declared imports linked anew; each refused one logged and left
        out, as nats-server leaves an account incomplete."""
        self._unlink(account)
        self._incomplete.discard(account)
        declared = self._declared.get(account, [])
        for service in (False, True):
            for imported in declared:
                if imported.service != service:
                    continue
                if imported.account not in self._accounts:
                    log.error(
                        "Can't locate account [%s] for import of [%s] %s",
                        imported.account,
                        imported.subject,
                        "service" if service else "stream",
                    )
                    self._incomplete.add(account)
                    continue
                try:
                    if service:
                        self._service_import(account, imported)
                    else:
                        self._stream_import(account, imported)
                except ConfigError as exc:
                    log.debug("Error adding import to account [%s]: %s", account, exc)
                    self._incomplete.add(account)
                else:
                    self._linked.setdefault(account, []).append(imported)

    def jwt_links(self, account: str) -> tuple[list[ExportSettings], list[ImportSettings], bool]:
        """A JWT account's exports, the imports linked and whether all of its imports
        were (nats-server's `complete`), for monitoring."""
        exports, linked = self._exports.get(account, ()), self._linked.get(account, ())
        return list(exports), list(linked), account not in self._incomplete

    # ------------------------------------------------------------------ exports

    def _export(self, account: str, export: ExportSettings) -> None:
        kind = "service" if export.service else "stream"
        for name in export.accounts or ():
            if name not in self._accounts:
                raise ConfigError(f'accounts: "{name}" account not defined for {kind} export')
        position = export.token_position
        tokens = export.subject.split(".")
        if position > 0 and (len(tokens) < position or tokens[position - 1] != "*"):
            raise ConfigError(
                f'{export.where}: Error adding {kind} export "{export.subject}": '
                "sublist: invalid subject"
            )
        self._exports.setdefault(account, []).append(export)

    def _approved(
        self, exporter: str, importer: str, imported: ImportSettings, subject: str
    ) -> ExportSettings | None:
        """The export of `exporter` that lets `importer` import `subject` (nats-server's
        checkStreamExportApproved/checkServiceExportApproved: the same subject, else
        an export it is within), or None."""
        service = imported.service
        exports = [e for e in self._exports.get(exporter, ()) if e.service == service]
        if not is_valid_subject(subject.encode()):
            return None
        match = next((e for e in exports if e.subject == subject), None)
        exact = match is not None
        if match is None:
            match = next((e for e in exports if _within(subject, e.subject)), None)
        if match is None:
            return None
        if position := match.token_position:
            # The importer's name at that token of the subject it imports (nats-server's
            # checkAuth, which the same subject as the export's never passes).
            tokens = subject.split(".")
            named = not exact and position <= len(tokens) and tokens[position - 1] == importer
            return match if named else None
        if match.token_required:
            return match if self._activated(exporter, importer, imported, match) else None
        if match.accounts is None or importer in match.accounts:
            return match
        return None

    def _activated(
        self, exporter: str, importer: str, imported: ImportSettings, export: ExportSettings
    ) -> bool:
        """nats-server's `checkActivation`: the import's token is an activation of the
        exporter's (or of one of its signing keys, naming it) for this importer, kind and
        subject, valid now and not revoked; its expiry drops the import again."""
        from brook import jwt  # only account JWTs carry activations

        if not imported.token:
            return False
        try:
            act = jwt.decode_activation(imported.token)
        except jwt.InvalidJwt:
            return False
        kind = "service" if imported.service else "stream"
        if (
            exporter not in (act.issuer, act.issuer_account)
            or act.subject != importer
            or act.import_kind != kind
            or not act.import_subject
            or not jwt.contained(imported.subject, act.import_subject)
            or (act.issuer_account and act.issuer not in self._signers.get(exporter, ()))
            or jwt.issues(act)
        ):
            return False
        revoked = export.revocations
        if max(revoked.get(act.subject, -1), revoked.get("*", -1)) >= act.issued_at:
            return False
        if act.expires:
            if act.expires <= time.time():
                return False
            self._expire_at(importer, act.expires)
        return True

    def _expire_at(self, importer: str, expires: int) -> None:
        """Check the importer's imports again when an activation expires (nats-server's
        `activationExpired`); one timer per account, at the soonest."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # built before the server runs: checked at the next update
            return
        delay = max(expires - time.time(), 0.0)
        timer = self._expiry.get(importer)
        if timer is not None:
            if timer.when() <= loop.time() + delay:
                return
            timer.cancel()
        self._expiry[importer] = loop.call_later(delay, self._relink, importer)

    # ------------------------------------------------------------------ stream imports

    def _stream_import(self, account: str, imported: ImportSettings) -> None:
        exporter = imported.account
        subject = imported.subject

        def refused(error: str) -> ConfigError:
            return ConfigError(f'{imported.where}: Error adding stream import "{subject}": {error}')

        if exporter not in self._accounts:
            raise ConfigError(f'accounts: "{exporter}" account not defined for stream import')
        if self._approved(exporter, account, imported, subject) is None:
            raise refused(STREAM_NOT_AUTHORIZED)
        to = imported.to
        if imported.prefix:
            if has_wildcard(imported.prefix.encode()):
                raise refused(BAD_PREFIX)
            to = imported.prefix.rstrip(".") + "." + subject
        to = to or subject
        for checked in (to, subject):
            if self._stream_cycle(exporter, checked, {account}):
                raise refused(CYCLE)
        _check_transform("stream", subject, to, refused, shown=(subject, to))
        imports = self._imports.setdefault(account, _Imports())
        if any(e == exporter and s == subject for e, s, _ in imports.streams):
            raise refused(DUPLICATE_STREAM)
        imports.streams.append((exporter, subject, to))
        source, target = self._accounts[exporter], self._accounts[account]
        self._links.setdefault(account, []).append(
            StreamImport(source.router, target.router, subject.encode(), to.encode())
        )

    def _stream_cycle(self, account: str, to: str, visited: set[str]) -> bool:
        """nats-server's checkStreamImportsForCycles."""
        exports = [e for e in self._exports.get(account, ()) if not e.service]
        if not any(_within(to, e.subject) for e in exports):
            return False
        for exporter, _, imported_to in self._imports.get(account, _NONE).streams:
            if collide(to, imported_to):
                if exporter in visited:
                    return True
                visited.add(account)
                narrower = imported_to if _within(imported_to, to) else to
                if self._stream_cycle(exporter, narrower, visited):
                    return True
        return False

    # ------------------------------------------------------------------ service imports

    def _service_import(self, account: str, imported: ImportSettings) -> None:
        exporter = imported.account
        remote, local = imported.subject, imported.to or imported.subject

        def refused(error: str) -> ConfigError:
            return ConfigError(f'{imported.where}: Error adding service import "{remote}": {error}')

        if exporter not in self._accounts:
            raise ConfigError(f'accounts: "{exporter}" account not defined for service import')
        if not is_valid_subject(local.encode()) or not is_valid_subject(remote.encode()):
            raise refused(INVALID_SUBJECT)
        export = self._approved(exporter, account, imported, remote)
        if export is None:
            raise refused(SERVICE_NOT_AUTHORIZED)
        if self._service_cycle(exporter, local, {account}):
            raise refused(CYCLE)
        _check_transform("service", remote, local, refused, shown=(local, remote))
        self._imports.setdefault(account, _Imports()).services.append((exporter, remote, local))
        source, target = self._accounts[exporter], self._accounts[account]
        responses = self._responses.get(exporter)
        if responses is None:
            responses = self._responses[exporter] = Responses(source.router)
        self._links.setdefault(account, []).append(
            ServiceImport(
                target.router,
                account,
                local.encode(),
                source.router,
                remote.encode(),
                responses,
                mappings=source.mappings,
                response_type=export.response_type,
                threshold_s=export.threshold_s,
                share=imported.share,
            )
        )

    def _service_cycle(self, account: str, subject: str, visited: set[str]) -> bool:
        """nats-server's checkServiceImportsForCycles."""
        for exporter, remote, local in self._imports.get(account, _NONE).services:
            if collide(subject, remote):
                if exporter in visited:
                    return True
                visited.add(account)
                # As nats-server: on with the import's local subject when it is narrower.
                narrower = local if _within(local, subject) else subject
                if self._service_cycle(exporter, narrower, visited):
                    return True
        return False


# ---------------------------------------------------------------------------- account JWTs

_RESPONSE_TYPES = {"Stream": "stream", "Chunked": "chunked"}  # else Singleton


def jwt_exports(claims: jwt.AccountClaims) -> list[ExportSettings]:
    """An account JWT's exports as the settings of a config file's; an export of no
    known kind is skipped, as nats-server's switch skips it."""
    exports = []
    for export in claims.exports:
        if export.kind not in ("stream", "service"):
            continue
        if export.latency:
            log.warning(
                "account %s: service latency tracking of export %r is not served by Brook",
                claims.subject,
                export.subject,
            )
        threshold_ns = export.response_threshold_ns
        exports.append(
            ExportSettings(
                export.subject,
                service=export.kind == "service",
                accounts=[] if export.token_req else None,
                response_type=_RESPONSE_TYPES.get(export.response_type, "singleton"),
                threshold_s=threshold_ns / 1e9
                if threshold_ns > 0
                else limits.SERVICE_RESPONSE_THRESHOLD_S,
                token_position=export.account_token_position,
                token_required=export.token_req,
                revocations=export.revocations,
                where=f"account {claims.subject}",
            )
        )
    return exports


def jwt_imports(claims: jwt.AccountClaims) -> list[ImportSettings]:
    """An account JWT's imports as the settings of a config file's, read as
    nats-server reads jwt's Import: a stream's `to` is a prefix, its `local_subject`
    its subject here; a service's `to` (deprecated) is the exporter's subject and its
    `subject` then the local one, its `local_subject` the local one otherwise."""
    imports = []
    for imported in claims.imports:
        entry = ImportSettings(
            imported.account, imported.subject, service=False, token=imported.token
        )
        entry.where = f"account {claims.subject}"
        if imported.kind == "stream":
            if imported.local_subject:
                entry.to = imported.local_subject
            else:
                entry.prefix = imported.to
        elif imported.kind == "service":
            entry.service, entry.share = True, imported.share
            if imported.local_subject:
                entry.to = imported.local_subject
            else:
                entry.subject, entry.to = imported.to or imported.subject, imported.subject
        else:
            continue
        imports.append(entry)
    return imports
