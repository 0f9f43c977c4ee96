"""Subject mappings: the `mappings` (or `maps`) block of the global account or of one in
`accounts`, read as nats-server's `parseAccountMappings` reads it (ADR 0030)."""

from __future__ import annotations

from collections.abc import Mapping

from brook.config.conf_values import on_line, read_block, read_str
from brook.config.settings import ConfigError, MapDestination, Settings, SubjectMapping
from brook.strconv import INTEGER
from brook.subjects import is_valid_subject


def apply_mappings(s: Settings, where: str, v: object) -> None:
    """The global account's `mappings` (or `maps`)."""
    if s.mappings:
        raise mappings_twice(where)
    s.mappings = mapping_entries(where, v)


def mappings_twice(where: str) -> ConfigError:
    # nats-server reads both `mappings` and `maps`, in the random order of a Go map.
    return ConfigError(f"{where}: an account's mappings are given twice (mappings and maps)")


def mapping_entries(where: str, v: object) -> list[SubjectMapping]:
    """nats-server's `mappings` block (of the global account or of one in `accounts`),
    read as its `parseAccountMappings` reads it, with its texts: a subject to one
    destination, to one `{destination, weight, cluster}` entry, or to a list of them.
    What the destinations mean (weights adding up, valid transforms) is checked when the
    server compiles them (`routing/mappings.py`)."""
    block = read_block(where, v)
    mappings = []
    spelled: Mapping[str, str] = getattr(block, "spelled", {})
    for key, value in block.items():
        source = spelled.get(key, key)  # subjects are case-sensitive
        at = f'{where}."{source}"{on_line(block, key)}'
        if not is_valid_subject(source.encode()):
            raise ConfigError(f'{at}: Subject "{source}" is not a valid subject')
        if isinstance(value, str):
            if not value:  # as an entry without a destination, below
                raise ConfigError(f"{at}: a mapping needs a destination subject")
            mappings.append(SubjectMapping(source, [MapDestination(value)], at, False))
            continue
        if isinstance(value, list):
            destinations = [_map_destination(f"{at}[{i}]", d) for i, d in enumerate(value)]
        else:
            destinations = [_map_destination(at, value)]
        mappings.append(SubjectMapping(source, destinations, at))
    return mappings


def _map_destination(where: str, v: object) -> MapDestination:
    """One `{destination, weight, cluster}` entry (nats-server's `parseAccountMapDest`)."""
    if not isinstance(v, dict):
        raise ConfigError(f"{where}: Expected an entry for the mapping destination")
    subject: str | None = None
    weight: int | None = None
    cluster = ""
    spelled: Mapping[str, str] = getattr(v, "spelled", {})
    for name, value in v.items():
        key = spelled.get(name, name)
        at = f"{where}.{name}{on_line(v, name)}"
        if name in ("dest", "destination"):
            subject = read_str(at, value)
        elif name == "weight":
            weight = _map_weight(at, value)
        elif name == "cluster":
            cluster = read_str(at, value)
        else:
            raise ConfigError(f'{at}: Unknown field "{key}" for mapping destination')
    if weight is None:
        raise ConfigError(f'{where}: Missing weight for mapping destination "{subject or ""}"')
    if not subject:  # nats-server takes it, then fails on the first message mapped there
        raise ConfigError(f"{where}: a mapping needs a destination subject")
    return MapDestination(subject, weight, cluster)


def _map_weight(where: str, v: object) -> int:
    """A percentage, 0 to 100: an integer, or a string of one with an optional `%`."""
    if isinstance(v, str):
        text = v.removesuffix("%")
        if not INTEGER.fullmatch(text) or not -(1 << 63) <= int(text) < 1 << 63:
            raise ConfigError(f'{where}: Invalid weight "{text}" for mapping destination')
        weight = int(text)
    elif isinstance(v, int) and not isinstance(v, bool):
        weight = int(v)
    else:
        shown = str(v).lower() if isinstance(v, bool) else v  # Go's %v of the value
        raise ConfigError(f"{where}: Unknown entry type for weight of {shown}")
    if not 0 <= weight <= 100:
        raise ConfigError(f"{where}: Invalid weight {weight} for mapping destination")
    return weight
