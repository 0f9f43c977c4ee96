"""The accounts' exports and imports, checked as nats-server checks them and linked.

nats-server's `parseAccounts` adds, once every account exists, the stream exports, the
service exports, the stream imports and the service imports, in that order, each refused
with its words when it names an account that does not exist, imports what the exporter
does not export to it, or would close a cycle of imports (accounts.go). What passes
becomes the crossings of `routing/imports.py` between the accounts' routers (ADR 0030).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from brook.config.settings import ConfigError, ExportSettings, ImportSettings, Settings
from brook.routing.imports import Responses, ServiceImport, StreamImport
from brook.routing.mappings import SubjectMappings
from brook.routing.router import Router
from brook.routing.transform import SubjectTransform, TransformError, tokenized
from brook.subjects import has_wildcard, is_valid_subject, subset_match

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


class Links:
    """Every crossing between the accounts; `close` removes them."""

    def __init__(self, settings: Settings, accounts: Mapping[str, LinkedAccount]) -> None:
        self._accounts = accounts
        self._exports: dict[str, list[ExportSettings]] = {}
        self._imports: dict[str, _Imports] = {name: _Imports() for name in accounts}
        self._responses: dict[str, Responses] = {}
        self._links: list[StreamImport | ServiceImport] = []
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
        for link in self._links:
            link.close()
        for responses in self._responses.values():
            responses.close()

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
        self, exporter: str, importer: str, subject: str, service: bool
    ) -> ExportSettings | None:
        """The export of `exporter` that lets `importer` import `subject` (nats-server's
        checkStreamExportApproved/checkServiceExportApproved: the same subject, else
        an export it is within), or None."""
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
        if match.accounts is None or importer in match.accounts:
            return match
        return None

    # ------------------------------------------------------------------ stream imports

    def _stream_import(self, account: str, imported: ImportSettings) -> None:
        exporter = imported.account
        subject = imported.subject

        def refused(error: str) -> ConfigError:
            return ConfigError(f'{imported.where}: Error adding stream import "{subject}": {error}')

        if exporter not in self._accounts:
            raise ConfigError(f'accounts: "{exporter}" account not defined for stream import')
        if self._approved(exporter, account, subject, service=False) is None:
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
        imports = self._imports[account]
        if any(e == exporter and s == subject for e, s, _ in imports.streams):
            raise refused(DUPLICATE_STREAM)
        imports.streams.append((exporter, subject, to))
        source, target = self._accounts[exporter], self._accounts[account]
        self._links.append(
            StreamImport(source.router, target.router, subject.encode(), to.encode())
        )

    def _stream_cycle(self, account: str, to: str, visited: set[str]) -> bool:
        """nats-server's checkStreamImportsForCycles."""
        exports = [e for e in self._exports.get(account, ()) if not e.service]
        if not any(_within(to, e.subject) for e in exports):
            return False
        for exporter, _, imported_to in self._imports[account].streams:
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
        export = self._approved(exporter, account, remote, service=True)
        if export is None:
            raise refused(SERVICE_NOT_AUTHORIZED)
        if self._service_cycle(exporter, local, {account}):
            raise refused(CYCLE)
        _check_transform("service", remote, local, refused, shown=(local, remote))
        self._imports[account].services.append((exporter, remote, local))
        source, target = self._accounts[exporter], self._accounts[account]
        responses = self._responses.get(exporter)
        if responses is None:
            responses = self._responses[exporter] = Responses(source.router)
        self._links.append(
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
        for exporter, remote, local in self._imports[account].services:
            if collide(subject, remote):
                if exporter in visited:
                    return True
                visited.add(account)
                # As nats-server: on with the import's local subject when it is narrower.
                narrower = local if _within(local, subject) else subject
                if self._service_cycle(exporter, narrower, visited):
                    return True
        return False
