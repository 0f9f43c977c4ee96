"""Builds Brook's compiled hot path with mypyc (ADR 0045); everything else is in pyproject.toml.

The modules in `brook._compiled.COMPILED` are compiled from their own .py files, which stay
the one source and are installed beside the extensions. The build is optional: without a
C compiler, with `BROOK_NO_EXTENSIONS` set, or on any compile error, a warning is printed
and the pure-Python package is installed, as aiohttp and msgpack do.

Each build writes `brook/_compiled.json`, the sha-256 of every compiled module's source.
`brook._compiled` loads the extensions only while every source still has that hash, so an
edited .py is never shadowed by an extension built from an older one.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).resolve().parent
SRC = HERE / "src"
sys.path.insert(0, str(SRC / "brook"))
from _compiled import COMPILED, GROUP, HASHES_FILE  # noqa: E402  (no brook import: no deps yet)

sys.path.pop(0)


def _source(module: str) -> Path:
    return SRC.joinpath(*module.split(".")).with_suffix(".py")


def _hashes() -> dict[str, str]:
    return {m: hashlib.sha256(_source(m).read_bytes()).hexdigest() for m in COMPILED}


def _warn(why: str) -> None:
    print(f"brook: building the pure-Python package only ({why})", file=sys.stderr)


class OptionalBuildExt(build_ext):
    """Builds the extensions if it can; otherwise removes them, and the package stays pure."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:  # a missing compiler or any compile error
            _warn(f"compiling failed: {exc}")
            self.extensions = []
            return
        record = json.dumps(_hashes(), indent=1, sort_keys=True) + "\n"
        targets = {Path(self.build_lib) / "brook" / HASHES_FILE}
        if self.inplace or getattr(self, "editable_mode", False):
            targets.add(SRC / "brook" / HASHES_FILE)
        for target in targets:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(record)


def _extensions() -> list[object]:
    if os.environ.get("BROOK_NO_EXTENSIONS"):
        _warn("BROOK_NO_EXTENSIONS is set")
        return []
    try:
        from mypyc.build import mypycify
    except ImportError:
        _warn("mypyc is not installed")
        return []
    try:
        # The build environment has mypy but not Brook's dependencies (pip installs them
        # after building): the modules the compiled ones import are type-checked silently,
        # their third-party imports as Any (the compiled modules import none).
        flags = ["--follow-imports=silent", "--ignore-missing-imports"]
        paths = [str(_source(m).relative_to(HERE)) for m in COMPILED]
        return list(mypycify([*flags, *paths], group_name=GROUP))
    except BaseException as exc:  # mypy's type errors end in SystemExit
        _warn(f"mypyc failed: {exc!r}")
        return []


setup(ext_modules=_extensions(), cmdclass={"build_ext": OptionalBuildExt})
