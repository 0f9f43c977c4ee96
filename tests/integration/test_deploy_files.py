"""deploy/Dockerfile and deploy/brook.service, checked without Docker or systemd running.

The Dockerfile is read instruction by instruction: its base image, user, volume and ports,
and the files it copies exist; then its ENTRYPOINT + CMD run as a real process (the store
and ports moved under the test's control by flags added at the end, which win) and its
HEALTHCHECK command runs against it: healthy while it serves, failing once it is stopped.
The systemd unit goes through `systemd-analyze verify` where that exists.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.natsserver import free_port, wait_for_port

pytestmark = pytest.mark.timeout(60)

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "deploy" / "Dockerfile"
UNIT = ROOT / "deploy" / "brook.service"


def instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs: comments dropped, continuation lines joined."""
    out: list[tuple[str, str]] = []
    logical = ""
    for line in text.splitlines():
        if not logical and (not line.strip() or line.lstrip().startswith("#")):
            continue
        logical += line.rstrip().removesuffix("\\") + " " if line.endswith("\\") else line
        if not line.endswith("\\"):
            word, _, rest = logical.strip().partition(" ")
            out.append((word.upper(), rest.strip()))
            logical = ""
    assert not logical, "a continuation line ends the file"
    return out


def one(found: list[tuple[str, str]], name: str) -> str:
    (value,) = [rest for word, rest in found if word == name]
    return value


def test_the_dockerfile_reads_sanely() -> None:
    found = instructions(DOCKERFILE.read_text())
    assert found[0] == ("FROM", "python:3.11-slim")
    assert {word for word, _ in found} <= {
        "FROM", "ENV", "COPY", "RUN", "USER", "VOLUME", "EXPOSE", "HEALTHCHECK", "ENTRYPOINT",
        "CMD",
    }  # fmt: skip
    # What it copies exists, and is all the build context holds (.dockerignore: an allowlist).
    allowed = {
        line.removeprefix("!")
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.startswith("!")
    }
    copied = set()
    for word, rest in found:
        if word == "COPY":
            *sources, _ = rest.split()
            assert all((ROOT / source).exists() for source in sources), rest
            copied.update(sources)
    assert copied == allowed
    assert "*" in (ROOT / ".dockerignore").read_text().splitlines()
    user = one(found, "USER")
    assert user not in ("root", "0")
    # The user is in force where the server runs: after every RUN, before the command.
    words = [word for word, _ in found]
    assert words.index("USER") > max(i for i, w in enumerate(words) if w == "RUN")
    assert json.loads(one(found, "VOLUME")) == ["/data"]
    assert one(found, "EXPOSE").split() == ["4222", "8222"]
    command = json.loads(one(found, "ENTRYPOINT")) + json.loads(one(found, "CMD"))
    assert command[:2] == ["brook", "serve"]
    assert "/data" in command


def test_the_dockerfiles_command_and_healthcheck_work(tmp_path: Path) -> None:
    found = instructions(DOCKERFILE.read_text())
    command = json.loads(one(found, "ENTRYPOINT")) + json.loads(one(found, "CMD"))
    healthcheck = one(found, "HEALTHCHECK")
    check = json.loads(healthcheck[healthcheck.index("CMD ") + 4 :])
    assert check[0] == "python"
    assert "http://127.0.0.1:8222/healthz" in check[-1]

    port, http_port = free_port(), free_port()
    store = tmp_path / "data"
    args = [a if a != "/data" else str(store) for a in command[1:]]
    args += ["-a", "127.0.0.1", "-p", str(port), "-m", str(http_port)]  # the last flags win
    brook = [sys.executable, "-m", "brook", *args]
    probe = [sys.executable, *check[1:-1], check[-1].replace(":8222/", f":{http_port}/")]
    proc = subprocess.Popen(brook, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_for_port(http_port)
        healthy = subprocess.run(probe, capture_output=True, text=True, timeout=20)
        assert healthy.returncode == 0, healthy.stderr
        proc.send_signal(signal.SIGTERM)  # docker stop
        output, _ = proc.communicate(timeout=20)
        assert proc.returncode == 0, output
        assert f'Store Directory: "{store}"' in output
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    down = subprocess.run(probe, capture_output=True, text=True, timeout=20)
    assert down.returncode != 0


def test_the_systemd_unit_verifies(tmp_path: Path) -> None:
    text = UNIT.read_text()
    for line in ("Type=exec", "Restart=on-failure", "ExecReload=/bin/kill -s HUP $MAINPID",
                 "KillSignal=SIGTERM", "User=brook"):  # fmt: skip
        assert line in text.splitlines()
    assert any(line.startswith("LimitNOFILE=") for line in text.splitlines())
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze is not installed: the unit's keys were not verified")
    brook = Path(sys.executable).parent / "brook"
    unit = tmp_path / "brook.service"
    unit.write_text(text.replace("/opt/brook/bin/brook", str(brook)))
    done = subprocess.run(
        ["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, timeout=30
    )
    assert (done.returncode, done.stdout + done.stderr) == (0, "")
