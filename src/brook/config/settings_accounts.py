"""The `accounts` block's settings (ADR 0027, ADR 0030): each account, its subject
mappings, its exports and imports; its users are `AuthSettings`'."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from brook import limits

if TYPE_CHECKING:
    from brook.config.settings_jetstream import JetStreamAccountLimits


@dataclass(slots=True)
class MapDestination:
    """One destination of a subject mapping (nats-server's `MapDest`): a transform
    destination, the share of messages it gets (percent), and the cluster it is scoped to
    ('' for none: a single server has no cluster, so scoped destinations never apply)."""

    subject: str
    weight: int = 100
    cluster: str = ""


@dataclass(slots=True)
class SubjectMapping:
    """A `mappings` entry: published subjects matching `source` go to one of the
    destinations (ADR 0030). `where` names the entry in the file, for errors found when
    the server compiles it; `weighted` False for the plain `"src": "dest"` form, whose
    errors nats-server words differently."""

    source: str
    destinations: list[MapDestination]
    where: str = ""
    weighted: bool = True


@dataclass(slots=True)
class ExportSettings:
    """An account's stream or service export (nats-server's `exports` entry): who may
    import `subject` (None: any account; a list: those named), and a service's response
    type (`singleton`, `stream`, `chunked`) and threshold."""

    subject: str
    service: bool
    accounts: list[str] | None = None
    response_type: str = "singleton"
    threshold_s: float = limits.SERVICE_RESPONSE_THRESHOLD_S
    # `account_token_position`: when > 0, only an account whose name is that token of the
    # subject it imports may import (the export's token there must be `*`).
    token_position: int = 0
    where: str = ""


@dataclass(slots=True)
class ImportSettings:
    """An account's stream or service import: `subject` of `account` (its export), seen
    here under `to` (a stream's may be `prefix.subject` instead; a service's `to`
    defaults to `subject`)."""

    account: str
    subject: str
    service: bool
    to: str = ""
    prefix: str = ""
    share: bool = False  # a service's: the requester's details in its Nats-Request-Info
    where: str = ""


@dataclass(slots=True)
class AccountSettings:
    """One configured account (`accounts { NAME: {...} }`): its subjects, and its
    JetStream when enabled, are its own. Its users are in `AuthSettings` with `account`
    set to its name (a user belongs to one account)."""

    name: str
    jetstream: bool = False  # `jetstream: enabled` (the server's JetStream must be on)
    # The limits of its `jetstream { max_mem: ... }` block; None: enabled without limits.
    jetstream_limits: JetStreamAccountLimits | None = None
    mappings: list[SubjectMapping] = field(default_factory=list)  # ADR 0030
    exports: list[ExportSettings] = field(default_factory=list)
    imports: list[ImportSettings] = field(default_factory=list)
