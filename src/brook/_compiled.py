"""Which modules run compiled, and the import hook that never lets a stale build run.

The modules in `COMPILED` are compiled by mypyc from their own .py files when Brook is
installed with a C compiler at hand (setup.py, ADR 0045). Python's path finder prefers an
extension to a .py of the same name, so an extension built before the .py was edited
would silently run the old code. The build records the sha-256 of each compiled source
(`_compiled.json`); `install()`, run first thing by `brook/__init__.py`, compares them
with the sources present and puts a finder ahead of the path finder that imports every
compiled module from its .py unless all of them match: mypyc compiles the modules as one
group whose code calls each other directly, so one stale module makes the whole group so.
An extension beside a module `COMPILED` no longer lists (left by an earlier build's list)
is never loaded either: that module is imported from its .py whatever the build.

`BROOK_NO_EXTENSIONS=1` forces the pure-Python modules, as `AIOHTTP_NO_EXTENSIONS` does:
the suite runs against both. This module imports nothing of Brook (setup.py imports it
before Brook's dependencies are installed).
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import TypedDict

# Compiled together as one mypyc group, in dependency order.
COMPILED = (
    "brook.protocol.reads",
    "brook.protocol.lines",
    "brook.protocol.parser",
    "brook.routing.subject_index",
    "brook.routing.sublist",
    "brook.routing.router",
    "brook.protocol.encoder",
    "brook.protocol.headers",
    "brook.server.client_core",
    "brook.leafnode.leaf_core",
    "brook.jetstream.store.file.format",
    "brook.jetstream.store.file.segment",
    "brook.jetstream.store.file.subjects",
    "brook.jetstream.store.file.index",
    "brook.jetstream.store.file.store_core",
    "brook.jetstream.store.file.store_reads",
    "brook.jetstream.store.file.store_gaps",
    "brook.jetstream.store.file.store_reclaim",
    "brook.jetstream.store.file.store",
    "brook.jetstream.store.file.reader",  # a delivery's records read back (ADR 0067)
    "brook.jetstream.publish_headers",
    "brook.jetstream.dedup",
    "brook.jetstream.backlog",  # the group commit, per publish and per batch (ADR 0068)
    "brook.jetstream.commit",
    "brook.jetstream.persist",
    "brook.jetstream.fast_reply",  # a fast batch's reply subject, per message (ADR 0066)
    "brook.jetstream.space",  # a file stream's admission, per publish (ADR 0067)
    "brook.jetstream.consumer_index",  # which consumers a stored message concerns (ADR 0067)
    "brook.jetstream.ingress",  # a stream's subscription handler and plain publish (ADR 0067)
    "brook.jetstream.consumer.ack_reply",  # a delivery's ack subject (ADR 0067)
    "brook_spark.framescan",  # the Spark connector's frame loop (ADR 0059)
)
GROUP = "brook"  # mypyc's shared library: a top-level `brook__mypyc` extension
HASHES_FILE = "_compiled.json"
NO_EXTENSIONS = "BROOK_NO_EXTENSIONS"

_PACKAGE_DIR = Path(__file__).resolve().parent


def _source(module: str) -> Path:
    return _PACKAGE_DIR.parent.joinpath(*module.split(".")).with_suffix(".py")


def _has_extension(module: str) -> bool:
    source = _source(module)
    return any(
        source.with_name(source.stem + suffix).exists()
        for suffix in importlib.machinery.EXTENSION_SUFFIXES
    )


def _why_pure() -> str | None:
    """Why the compiled modules must not be loaded, or None if they may."""
    if os.environ.get(NO_EXTENSIONS):
        return f"{NO_EXTENSIONS} is set"
    try:
        built = json.loads((_PACKAGE_DIR / HASHES_FILE).read_text())
    except (OSError, ValueError):
        return "not built"
    if not isinstance(built, dict) or set(built) != set(COMPILED):
        return "built for another list of modules"
    if not all(_has_extension(m) for m in COMPILED):
        return "not built"
    changed = [
        m for m in COMPILED if hashlib.sha256(_source(m).read_bytes()).hexdigest() != built[m]
    ]
    if changed:
        return "sources changed since the build: " + ", ".join(changed)
    return None


def _strays() -> frozenset[str]:
    """The package's modules with an extension beside their .py that `COMPILED` does not
    list: built when an earlier list named them, they import a part of the shared library
    the present build no longer has (or old code)."""
    suffixes = sorted(importlib.machinery.EXTENSION_SUFFIXES, key=len, reverse=True)
    found: set[str] = set()
    for directory, _dirs, files in os.walk(_PACKAGE_DIR):
        for file in files:
            suffix = next((x for x in suffixes if file.endswith(x)), None)
            if suffix is None:
                continue
            source = Path(directory, file[: -len(suffix)] + ".py")
            name = ".".join(source.relative_to(_PACKAGE_DIR.parent).with_suffix("").parts)
            if name not in COMPILED and source.exists():
                found.add(name)
    return frozenset(found)


class _SourceFinder(importlib.abc.MetaPathFinder):
    """Finds the .py files of `names`, ahead of the path finder's extensions."""

    def __init__(self, names: frozenset[str]) -> None:
        self.names = names

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in self.names:
            return None
        return importlib.util.spec_from_file_location(fullname, _source(fullname))


_why: str | None = "not installed"


def install() -> None:
    """Decide, once per process, whether the compiled modules may be loaded."""
    global _why
    if _why != "not installed":
        return
    _why = _why_pure()
    names = _strays()
    if _why is not None:
        names |= {m for m in COMPILED if _has_extension(m)}
    if names:
        sys.meta_path.insert(0, _SourceFinder(names))


def built() -> str:
    """What the build left, before any module is loaded: for `make test`'s log."""
    why = _why_pure()
    return "every module listed (mypyc)" if why is None else f"none: {why}"


class Status(TypedDict):
    modules: list[str]
    pure_python_because: str | None


def status() -> Status:
    """What runs compiled in this process, for the start-up log and `/varz`
    (`brook_compiled`): the modules loaded from extensions, and why not if none."""
    loaded = [
        m
        for m in COMPILED
        if isinstance(
            getattr(getattr(sys.modules.get(m), "__spec__", None), "loader", None),
            importlib.machinery.ExtensionFileLoader,
        )
    ]
    return {"modules": loaded, "pure_python_because": None if loaded else _why}
