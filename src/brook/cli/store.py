"""`brook store ...`: inspection commands for file-store directories.

`brook store check DIR [--json]` runs `check_store` (read-only) and prints a human report or
JSON. Exit status: 0 healthy, 1 problems found, 2 usage errors (bad arguments, DIR missing).
Wired into `brook` by `cli/main.py`.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def store_check_command(argv: list[str]) -> int:
    """`brook store check DIR [--json]`; returns the exit status."""
    parser = argparse.ArgumentParser(
        prog="brook store check",
        description="Verify a Brook file-store directory without changing it.",
    )
    parser.add_argument("directory", help="the stream's store directory (holds meta.json)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse printed the usage or --help already
        return 0 if exc.code == 0 else 2
    directory = Path(args.directory)
    if not directory.is_dir():
        print(f"brook store check: {directory}: not a directory", file=sys.stderr)
        return 2

    from brook.jetstream.store.check import check_store

    report = check_store(directory)
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        print(report.format())
    return 0 if report.healthy else 1
