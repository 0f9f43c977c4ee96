"""The `brook` command line: `brook serve` now; management commands talk over the wire."""
