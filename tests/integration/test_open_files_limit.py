"""`brook serve` raises its soft limit on open files to the hard one, as the Go runtime
does for nats-server (cli/main.py): a file store holds a file per segment, and a store
with more segments than the usual soft limit must still open.

A stream is filled in-process with small segments (`segment_slots_max` at its minimum),
then `brook serve` is started on the same store with a soft limit below its segment count:
without the raise its recovery fails for want of file descriptors."""

from __future__ import annotations

import asyncio
import os
import resource
import subprocess
import sys
from pathlib import Path

import nats
import pytest

import brook
from brook import limits
from brook.config.settings import Settings
from brook.config.settings_jetstream import JetStreamSettings
from tests.support.jsapi import create_streams
from tests.support.jsapi import request as _request
from tests.support.natsserver import free_port, wait_for_info

pytestmark = pytest.mark.timeout(120)

SOFT = 64  # below the segments' count, above what Python and the server need besides
SEGMENTS = 80


def _soft_limit(pid: int) -> int:
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith("Max open files"):
            return int(line.split()[3])
    raise AssertionError("no open files limit")


def _segment_files(store: Path) -> int:
    return sum(1 for p in store.rglob("*.seg") if p.is_file())


# Sets the limit, then becomes the server (no `preexec_fn`, unsafe with threads running).
_LOWERED = (
    "import os, resource, sys\n"
    "resource.setrlimit(resource.RLIMIT_NOFILE, (int(sys.argv[1]), int(sys.argv[2])))\n"
    "os.execv(sys.executable, [sys.executable, *sys.argv[3:]])\n"
)


def _serve_with_soft_limit(store: Path, port: int, soft: int, hard: int) -> subprocess.Popen[bytes]:
    """`brook serve` on `store`, started with its soft limit on open files at `soft`."""
    cmd = [sys.executable, "-c", _LOWERED, str(soft), str(hard),
           "-m", "brook", "serve", "--host", "127.0.0.1", "--port", str(port),
           "--jetstream", "--store-dir", str(store)]  # fmt: skip
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    return subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


async def test_a_store_with_more_segments_than_the_soft_limit_opens(tmp_path: Path) -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 4 * SEGMENTS:
        pytest.skip(f"hard limit on open files {hard} too low for the test")
    count = SEGMENTS * limits.SEGMENT_SLOTS_MIN
    js_settings = JetStreamSettings(segment_slots_max=limits.SEGMENT_SLOTS_MIN)
    async with brook.serve(
        port=0, store_dir=str(tmp_path), settings=Settings(jetstream=js_settings)
    ) as server:
        nc = await nats.connect(server.url)
        await create_streams(nc, ({"name": "F", "subjects": ["f.>"]},))
        for i in range(count):
            await nc.publish(f"f.{i % 7}", b"x")
        await nc.flush()
        for _ in range(400):
            info = await _request(nc, "$JS.API.STREAM.INFO.F")
            if info["state"]["messages"] == count:
                break
            await asyncio.sleep(0.025)
        assert info["state"]["messages"] == count
        await nc.close()
    assert _segment_files(tmp_path) >= SEGMENTS
    port = free_port()
    proc = _serve_with_soft_limit(tmp_path, port, SOFT, hard)
    try:
        wait_for_info(port, 30)
        assert _soft_limit(proc.pid) == (hard if hard != resource.RLIM_INFINITY else SOFT)
        nc = await nats.connect(f"nats://127.0.0.1:{port}")
        info = await _request(nc, "$JS.API.STREAM.INFO.F")
        assert info["state"]["messages"] == count
        msg = await nc.jetstream().get_msg("F", count)
        assert msg.data == b"x"
        await nc.close()
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    assert b"Too many open files" not in err, err[-2000:]
