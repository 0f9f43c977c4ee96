"""The compiled hot path (ADR 0045): the extensions run only while built from the sources
present, `BROOK_NO_EXTENSIONS` forces the .py files, and `make test` fails if the build
it asked for is missing (`BROOK_REQUIRE_COMPILED`)."""

from __future__ import annotations

import asyncio
import importlib
import json
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import brook
from brook import _compiled
from tests.support.monitor import get_json

SRC = Path(brook.__file__).resolve().parent.parent
BUILT = (SRC / "brook" / _compiled.HASHES_FILE).exists()
needs_build = pytest.mark.skipif(not BUILT, reason="the compiled modules are not built here")

_REPORT = """
import importlib, json, sys
import brook
from brook import _compiled
for name in _compiled.COMPILED:
    importlib.import_module(name)
parser = sys.modules["brook.protocol.parser"]
print(json.dumps({**_compiled.status(), "parser": parser.__file__,
                  "edited": getattr(parser, "EDITED", False)}))
"""


async def test_make_test_runs_the_build_it_asked_for_and_varz_says_which(
    caplog: pytest.LogCaptureFixture,
) -> None:
    for name in _compiled.COMPILED:
        importlib.import_module(name)
    status = _compiled.status()
    if os.environ.get("BROOK_NO_EXTENSIONS"):
        assert status == {"modules": [], "pure_python_because": "BROOK_NO_EXTENSIONS is set"}
        line = "  Compiled: none, pure Python (BROOK_NO_EXTENSIONS is set)"
    elif os.environ.get("BROOK_REQUIRE_COMPILED"):
        assert status == {"modules": list(_compiled.COMPILED), "pure_python_because": None}
        line = f"  Compiled: {len(_compiled.COMPILED)} hot-path modules (mypyc)"
    else:
        assert status["modules"] in ([], list(_compiled.COMPILED))
        line = "  Compiled: "
    caplog.set_level(logging.INFO, logger="brook.server")
    async with asyncio.timeout(10), brook.serve(port=0, http_port=-1) as server:
        assert (await get_json(server, "/varz"))["brook_compiled"] == status
    assert any(r.getMessage().startswith(line) for r in caplog.records)


@pytest.fixture
def package_copy(tmp_path: Path) -> Path:
    """A copy of the built packages (and mypyc's shared library) to edit."""
    for package in {m.split(".")[0] for m in _compiled.COMPILED}:  # brook, brook_spark
        ignore = shutil.ignore_patterns("__pycache__")
        shutil.copytree(SRC / package, tmp_path / package, ignore=ignore)
    for lib in SRC.glob(f"{_compiled.GROUP}__mypyc*"):
        shutil.copy2(lib, tmp_path / lib.name)
    return tmp_path


def _report(path: Path, **env: str) -> dict[str, Any]:
    environ = {k: v for k, v in os.environ.items() if k != "BROOK_NO_EXTENSIONS"}
    environ |= {"PYTHONPATH": str(path), "PYTHONDONTWRITEBYTECODE": "1", **env}
    out = subprocess.run(
        [sys.executable, "-c", _REPORT], env=environ, capture_output=True, check=True, timeout=60
    )
    report: dict[str, Any] = json.loads(out.stdout)
    assert report["parser"].startswith(str(path))  # the copy was imported, not the checkout
    return report


@needs_build
def test_the_extensions_run_while_every_source_matches_the_build(package_copy: Path) -> None:
    report = _report(package_copy)
    assert report["modules"] == list(_compiled.COMPILED)
    assert report["parser"].endswith(".so")


@needs_build
def test_an_edited_source_is_never_shadowed_by_an_older_build(package_copy: Path) -> None:
    parser = package_copy / "brook" / "protocol" / "parser.py"
    parser.write_text(parser.read_text() + "\nEDITED = True\n")
    report = _report(package_copy)
    assert report["edited"] is True
    assert report["parser"].endswith("parser.py")
    # The group's modules call each other natively: one stale module makes all of them so.
    assert report["modules"] == []
    assert report["pure_python_because"] == (
        "sources changed since the build: brook.protocol.parser"
    )


@needs_build
def test_an_extension_without_the_build_record_is_not_loaded(package_copy: Path) -> None:
    (package_copy / "brook" / _compiled.HASHES_FILE).unlink()
    report = _report(package_copy)
    assert report["modules"] == []
    assert report["pure_python_because"] == "not built"
    assert report["parser"].endswith("parser.py")


@needs_build
def test_brook_no_extensions_forces_the_sources(package_copy: Path) -> None:
    report = _report(package_copy, BROOK_NO_EXTENSIONS="1")
    assert report == {
        "modules": [],
        "pure_python_because": "BROOK_NO_EXTENSIONS is set",
        "parser": str(package_copy / "brook" / "protocol" / "parser.py"),
        "edited": False,
    }


@needs_build
def test_an_extension_of_a_module_no_longer_listed_is_not_loaded(package_copy: Path) -> None:
    """A module dropped from `COMPILED` keeps the extension an earlier build left beside
    it (here: the parser's, as `durations`'s); it is imported from its .py, and the listed
    modules still run compiled."""
    parser = next((package_copy / "brook" / "protocol").glob("parser.*.so"))
    stray = package_copy / "brook" / ("durations" + parser.name.removeprefix("parser"))
    shutil.copy2(parser, stray)
    environ = {k: v for k, v in os.environ.items() if k != "BROOK_NO_EXTENSIONS"}
    environ |= {"PYTHONPATH": str(package_copy), "PYTHONDONTWRITEBYTECODE": "1"}
    script = (
        "import importlib, brook.durations as d, brook._compiled as c;"
        "[importlib.import_module(m) for m in c.COMPILED];"
        "print(d.__file__, len(c.status()['modules']))"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], env=environ, capture_output=True, check=True, timeout=60
    )
    source, compiled = out.stdout.decode().split()
    assert source == str(package_copy / "brook" / "durations.py")
    assert int(compiled) == len(_compiled.COMPILED)
