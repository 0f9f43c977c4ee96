"""brook.testing, the pytest plugin, as a user's project meets it: a pytester run.

Each test writes a user's test files into pytester's directory (outside this project, so
none of its conftest or pyproject settings apply) and runs pytest in a subprocess, which
loads the plugin only through the package's `pytest11` entry point. The user's tests talk to
the fixtures' servers with nats-py and FastStream over TCP and assert what they stored.
"""

from __future__ import annotations

import importlib.util
import sys

import nats
import pytest

import brook.testing
from brook.config.errors import ConfigError

pytestmark = pytest.mark.timeout(120)

# A user's tests in pytest-asyncio's strict mode (its default): async tests are marked.
USER_TESTS = """
import asyncio

import nats
import pytest

import brook.testing


@pytest.mark.asyncio
async def test_client_and_server(brook_server, nats_client, brook_store_dir):
    assert nats_client.connected_url.port == brook_server.port
    js = nats_client.jetstream()
    await js.add_stream(name="ORDERS", subjects=["orders.>"])  # file storage: the store dir
    ack = await js.publish("orders.new", b"one")
    assert (ack.stream, ack.seq) == ("ORDERS", 1)
    assert (await js.get_msg("ORDERS", 1)).data == b"one"
    assert any(brook_store_dir.rglob("meta.json"))


def test_sync_server(brook_url, brook_store_dir):
    async def publish():
        nc = await nats.connect(brook_url, allow_reconnect=False)
        js = nc.jetstream()
        await js.add_stream(name="SYNC", subjects=["sync"])
        acks = [await js.publish("sync", str(i).encode()) for i in range(3)]
        await nc.close()
        return [a.seq for a in acks]

    assert asyncio.run(publish()) == [1, 2, 3]
    assert any(brook_store_dir.rglob("meta.json"))


def test_run_in_thread_options(tmp_path):
    with brook.testing.run_in_thread(token="s3cret") as url:
        async def refused():
            with pytest.raises(nats.errors.Error):
                await nats.connect(url, allow_reconnect=False, max_reconnect_attempts=0)

        async def admitted():
            nc = await nats.connect(url, token="s3cret", allow_reconnect=False)
            sub = await nc.subscribe("hello")
            await nc.publish("hello", b"world")
            msg = await sub.next_msg(timeout=2)
            await nc.close()
            return msg.data

        asyncio.run(refused())
        assert asyncio.run(admitted()) == b"world"


@pytest.fixture
def brook_options():
    return {"max_payload_bytes": 1024}


@pytest.mark.asyncio
async def test_options_fixture(nats_client):
    assert nats_client.max_payload == 1024


@pytest.mark.parametrize("brook_options", [{"max_payload_bytes": 2048, "jetstream": False}])
@pytest.mark.asyncio
async def test_options_per_test(nats_client):
    assert nats_client.max_payload == 2048
    with pytest.raises(nats.js.errors.ServiceUnavailableError):
        await nats_client.jetstream().account_info()
"""

# The same fixtures under anyio's plugin, as a project using anyio rather than pytest-asyncio.
ANYIO_TESTS = """
import pytest


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.mark.anyio
async def test_anyio(nats_client):
    sub = await nats_client.subscribe("hello")
    await nats_client.publish("hello", b"world")
    assert (await sub.next_msg(timeout=2)).data == b"world"
"""

FASTSTREAM_TESTS = """
import pytest
from faststream.nats import NatsBroker, NatsRouter

router = NatsRouter()  # the application's handlers, as in app.py


@router.subscriber("orders.new")
@router.publisher("orders.accepted")
async def accept(order: dict) -> dict:
    return {"id": order["id"], "status": "accepted"}


@pytest.mark.asyncio
async def test_faststream_app(brook_server, nats_client):
    accepted = await nats_client.subscribe("orders.accepted")
    broker = NatsBroker(brook_server.url)
    broker.include_router(router)
    async with broker:
        await broker.start()
        reply = await broker.request({"id": 7}, "orders.new", timeout=5)
        assert await reply.decode() == {"id": 7, "status": "accepted"}
    msg = await accepted.next_msg(timeout=5)
    assert msg.data == b'{"id":7,"status":"accepted"}'
"""


def run_user_suite(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", "--timeout=60", *args)


def test_fixtures_in_a_strict_mode_project(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_user=USER_TESTS, test_anyio=ANYIO_TESTS)
    run_user_suite(pytester).assert_outcomes(passed=6)
    # Without pytest-asyncio's plugin: anyio's runs the async fixtures.
    run_user_suite(pytester, "-p", "no:asyncio", "test_anyio.py").assert_outcomes(passed=1)


def test_auto_mode_a_pytest_plugins_line_and_faststream(pytester: pytest.Pytester) -> None:
    """asyncio_mode=auto, a conftest naming the plugin the entry point already loaded, and a
    FastStream app's broker on the fixture's server (when faststream is installed)."""
    pytester.makeini("[pytest]\nasyncio_mode = auto\n")
    pytester.makeconftest('pytest_plugins = ["brook.testing"]\n')
    pytester.makepyfile(test_user=USER_TESTS.replace("@pytest.mark.asyncio\n", ""))
    expected = 5
    if importlib.util.find_spec("faststream") is not None:
        pytester.makepyfile(test_faststream=FASTSTREAM_TESTS)
        expected += 1
    run_user_suite(pytester).assert_outcomes(passed=expected)


async def test_run_in_thread_from_inside_an_event_loop(tmp_path) -> None:
    """The thread's loop is its own: a coroutine test can use it too, and the store stays."""
    with brook.testing.run_in_thread(store_dir=str(tmp_path)) as url:
        nc = await nats.connect(url, allow_reconnect=False)
        js = nc.jetstream()
        await js.add_stream(name="T", subjects=["t"])
        await js.publish("t", b"kept")
        await nc.close()
    async with brook.serve(store_dir=str(tmp_path)) as server:  # the same store, restarted
        nc = await nats.connect(server.url, allow_reconnect=False)
        assert (await nc.jetstream().get_msg("T", 1)).data == b"kept"
        await nc.close()


def test_a_server_that_cannot_start_raises_in_the_caller() -> None:
    with (
        pytest.raises(ConfigError, match="max_payload: -1 must be between"),
        brook.testing.run_in_thread(max_payload_bytes=-1),
    ):
        pytest.fail("the block ran without a server")


def test_the_project_suite_has_the_plugin_once(pytestconfig: pytest.Config) -> None:
    plugin = pytestconfig.pluginmanager.get_plugin("brook.testing")
    assert plugin is sys.modules["brook.testing"]
    names = [name for name, p in pytestconfig.pluginmanager.list_name_plugin() if p is plugin]
    assert names == ["brook.testing"]
