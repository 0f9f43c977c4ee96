"""How permission refusals are logged, against nats-server's own log (`-l FILE`).

nats-server logs each refused publish, subscription and reserved reply at error level
(`[ERR]`), with its words (`Publish Violation - Subject "x"`); Brook logs the same words at
the same level, after its own prefix (the connection id and the user).
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest

import brook
from brook.config.conf import load_conf_file
from tests.support.natsserver import run_nats_server
from tests.support.raw import PONG, RawClient

pytestmark = [pytest.mark.conformance, pytest.mark.timeout(60)]

CONF = """authorization { users: [
  {user: u, password: p, permissions: {publish: {deny: "secret.>"}, subscribe: {deny: "hidden"}}}
]}
"""
STEPS = (
    b"PUB secret.x 1\r\nx\r\nSUB hidden 1\r\nSUB hidden q 2\r\n"
    b"PUB a $JS.ACK.s.c.1.1.1.1.0 0\r\n\r\nPUB fine 0\r\n\r\nPING\r\n"
)
_VIOLATION = re.compile(r"((?:Publish|Subscription) Violation - .*)$")


async def run_steps(url: str) -> None:
    async with RawClient.connect_url(url) as client:
        await client.send(b'CONNECT {"verbose":false,"user":"u","pass":"p"}\r\n' + STEPS)
        await client.read_ops(lambda op: op == PONG, timeout=5.0)


async def test_violations_logged_at_error_level_in_nats_server_words(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "server.conf"
    path.write_text(CONF)
    log_file = tmp_path / "nats-server.log"
    with run_nats_server("-c", str(path), "-l", str(log_file), jetstream=False) as url:
        await run_steps(url)
    theirs = [
        ("ERROR" if "[ERR]" in line else line.split()[3], match.group(1))
        for line in log_file.read_text().splitlines()
        if (match := _VIOLATION.search(line))
    ]
    caplog.set_level(logging.DEBUG, logger="brook")
    async with brook.serve(port=0, settings=load_conf_file(str(path))) as server:
        await run_steps(server.url)
    ours = [
        (r.levelname, match.group(1))
        for r in caplog.records
        if (match := _VIOLATION.search(r.getMessage()))
    ]
    assert theirs == [
        ("ERROR", 'Publish Violation - Subject "secret.x"'),
        ("ERROR", 'Subscription Violation - Subject "hidden", SID 1'),
        ("ERROR", 'Subscription Violation - Subject "hidden", Queue: "q", SID 2'),
        ("ERROR", 'Publish Violation - Reply "$JS.ACK.s.c.1.1.1.1.0"'),
    ]
    assert ours == theirs
