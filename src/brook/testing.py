"""Brook's pytest plugin: a real in-process server as fixtures (ADR 0044).

Installed with the package and loaded by pytest through the `pytest11` entry point named
`brook.testing` (the module's own name, so a `pytest_plugins = ["brook.testing"]` line in
a user's conftest finds it registered already instead of registering it twice). Fixtures:

* `brook_store_dir`: an empty JetStream store directory under the test's `tmp_path`.
* `brook_options`: keyword arguments for `brook.serve()`, `{}` unless a conftest overrides
  it (`max_payload_bytes=1024`, `token="s3cret"`, `jetstream=False`, ...).
* `brook_server` (async): `brook.serve(port=0, store_dir=brook_store_dir, **brook_options)`
  in the test's event loop: JetStream on, file storage, a free port; `.url` to connect.
* `nats_client` (async): a nats-py client connected to `brook_server`, closed afterwards.
* `brook_url` (sync): the URL of a server running on a background thread with its own
  event loop (`run_in_thread`, from `brook.embed`, re-exported here), for tests that are
  not coroutines (a synchronous client, a subprocess under test).

The async fixtures are pytest-asyncio fixtures when pytest-asyncio is installed, so they
work in its `auto` and `strict` modes alike (strict mode needs `@pytest.mark.asyncio` on
the tests themselves); without it they are plain async fixtures, which anyio's plugin
runs for `@pytest.mark.anyio` tests. Every pytest run of an environment with Brook installed
loads the plugin, so it imports only `brook.embed` (the settings) and pytest-asyncio; the
server's modules and nats-py are imported by the fixtures that use them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

import pytest

from brook.embed import run_in_thread, serve

if TYPE_CHECKING:
    from nats.aio.client import Client

    from brook.server.server import Server

__all__ = ["run_in_thread"]

_F = TypeVar("_F", bound=Callable[..., Any])

try:
    import pytest_asyncio

    def _async_fixture(function: _F) -> _F:
        return cast(_F, pytest_asyncio.fixture(function))

except ImportError:  # anyio's plugin (or none): a plain fixture on an async function

    def _async_fixture(function: _F) -> _F:
        return cast(_F, pytest.fixture(function))


@pytest.fixture
def brook_store_dir(tmp_path: Path) -> Path:
    """An empty JetStream store directory, removed with the test's `tmp_path`."""
    path = tmp_path / "brook-store"
    path.mkdir()
    return path


@pytest.fixture
def brook_options() -> dict[str, Any]:
    """Extra keywords for `brook.serve()`; override this fixture to change them."""
    return {}


def _serve_options(store_dir: Path, options: dict[str, Any]) -> dict[str, Any]:
    return {"port": 0, "store_dir": str(store_dir), **options}


@_async_fixture
async def brook_server(
    brook_store_dir: Path, brook_options: dict[str, Any]
) -> AsyncIterator[Server]:
    """A Brook in the test's event loop: JetStream with file storage, a free port."""

    async with serve(**_serve_options(brook_store_dir, brook_options)) as server:
        yield server


@_async_fixture
async def nats_client(brook_server: Server) -> AsyncIterator[Client]:
    """A nats-py client of `brook_server` (no reconnects: a lost server fails the test)."""
    import nats

    client = await nats.connect(brook_server.url, allow_reconnect=False)
    try:
        yield client
    finally:
        if not client.is_closed:
            await client.close()


@pytest.fixture
def brook_url(brook_store_dir: Path, brook_options: dict[str, Any]) -> Iterator[str]:
    """The URL of a Brook on a background thread, for tests that are not coroutines."""
    with run_in_thread(**_serve_options(brook_store_dir, brook_options)) as url:
        yield url
