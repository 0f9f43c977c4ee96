"""`brook store ...`: inspection commands for file-store directories.

`brook store check DIR [--json]` runs `check_store` (read-only) on what DIR names, which is
one of three levels of `jetstream.store_dir`'s layout (storage-format.md §2):

* a file store (holds `meta.json` or `msgs/`): that store, as before;
* a stream directory (holds `stream.json`): its `data/` file store, or nothing for a memory
  stream (whose messages are never on disk);
* the store directory (holds `streams/` or `jetstream/<account>/streams/`): every stream of
  every account, each reported under its account and name.

Anything else is a usage error, never an empty success. Exit status: 0 healthy, 1 problems
found, 2 usage errors (bad arguments, DIR missing or not one of the three). JSON: a file
store's or stream's report as one object; a store directory's as `{"directory", "healthy",
"streams": [{"account", "stream", "storage", "report"}]}`. Wired into `brook` by
`cli/main.py`.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from brook.jetstream.store.check import CheckReport


@dataclass(slots=True)
class StreamCheck:
    """One stream of a store directory: its file store's report, or none for memory."""

    account: str | None  # None: a stream directory given alone
    stream: str
    storage: str
    report: CheckReport | None  # None: memory storage, nothing on disk to check

    @property
    def healthy(self) -> bool:
        return self.report is None or self.report.healthy

    def to_dict(self) -> dict[str, Any]:
        report = None if self.report is None else self.report.to_dict()
        return {"account": self.account, "stream": self.stream, "storage": self.storage,
                "report": report}  # fmt: skip

    def format(self) -> str:
        title = f"stream {self.stream}"
        if self.account is not None:
            title += f" (account {self.account})"
        if self.report is None:
            return f"{title}: memory storage, nothing on disk to check"
        return f"{title}\n{self.report.format()}"


class NotAStoreDirectory(Exception):
    """DIR is neither a file store, a stream directory nor a store directory."""


def check_stream_dir(directory: Path, account: str | None) -> StreamCheck:
    """Check the stream whose directory holds `stream.json`; a damaged definition is a
    finding of its report, as it would stop the server from loading the stream."""
    from brook.jetstream.definitions import DATA_DIR, STREAM_FILE, read_definition
    from brook.jetstream.store.check import CheckReport, Finding, check_store

    try:
        config, _ = read_definition(directory)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        report = CheckReport(str(directory))
        report.findings.append(Finding("meta", STREAM_FILE, detail=f"unreadable: {exc}"))
        return StreamCheck(account, directory.name, "unknown", report)
    if config.storage == "memory":
        return StreamCheck(account, directory.name, "memory", None)
    return StreamCheck(account, directory.name, "file", check_store(directory / DATA_DIR))


def stream_dirs(store_dir: Path) -> list[tuple[str, Path]]:
    """Every stream directory of every account under `store_dir`, `$G`'s first (in
    `streams/`), then each other account's (`jetstream/<account>/streams/`) by name."""
    from brook.config.settings_auth import GLOBAL_ACCOUNT
    from brook.jetstream.definitions import STREAMS_DIR
    from brook.server.accounts import ACCOUNTS_STORE_DIR

    roots = [(GLOBAL_ACCOUNT, store_dir / STREAMS_DIR)]
    accounts = store_dir / ACCOUNTS_STORE_DIR
    if accounts.is_dir():
        roots += [(a.name, a / STREAMS_DIR) for a in sorted(accounts.iterdir()) if a.is_dir()]
    if not any(root.is_dir() for _, root in roots):
        raise NotAStoreDirectory
    return [
        (account, stream)
        for account, root in roots
        if root.is_dir()
        for stream in sorted(root.iterdir())
        if stream.is_dir()
    ]


def check_directory(directory: Path) -> CheckReport | StreamCheck | list[StreamCheck]:
    """What DIR is, checked: a file store's report, a stream's, or every stream's."""
    from brook.jetstream.definitions import STREAM_FILE
    from brook.jetstream.store.check import check_store
    from brook.jetstream.store.file.recovery import META, MSGS

    if (directory / META).exists() or (directory / MSGS).is_dir():
        return check_store(directory)
    if (directory / STREAM_FILE).exists():
        return check_stream_dir(directory, account=None)
    return [check_stream_dir(path, account) for account, path in stream_dirs(directory)]


def store_check_command(argv: list[str]) -> int:
    """`brook store check DIR [--json]`; returns the exit status."""
    parser = argparse.ArgumentParser(
        prog="brook store check",
        description="Verify Brook file stores without changing them: one stream's, or every "
        "stream's of a store directory.",
    )
    parser.add_argument(
        "directory",
        help="a stream's directory (holds stream.json), its file store (data/, holds "
        "meta.json) or the whole store directory (jetstream.store_dir: every account's streams)",
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse printed the usage or --help already
        return 0 if exc.code == 0 else 2
    directory = Path(args.directory)
    if not directory.is_dir():
        print(f"brook store check: {directory}: not a directory", file=sys.stderr)
        return 2
    try:
        checked = check_directory(directory)
    except NotAStoreDirectory:
        print(
            f"brook store check: {directory}: not a Brook store, stream or file-store directory"
            " (no meta.json, stream.json, streams/ or jetstream/<account>/streams/ in it)",
            file=sys.stderr,
        )
        return 2
    if isinstance(checked, list):  # a store directory
        healthy = all(stream.healthy for stream in checked)
        if args.json:
            streams = [stream.to_dict() for stream in checked]
            doc = {"directory": str(directory), "healthy": healthy, "streams": streams}
            print(json.dumps(doc, indent=2))
        else:
            print("\n\n".join(stream.format() for stream in checked) or "no streams")
            print(f"\n{len(checked)} stream(s): {'healthy' if healthy else 'problems found'}")
        return 0 if healthy else 1
    if args.json:
        print(json.dumps(checked.to_dict(), indent=2))
    else:
        print(checked.format())
    return 0 if checked.healthy else 1
