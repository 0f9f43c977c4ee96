"""The `brook` command line (`main.py`): `brook serve` runs a server; `brook kv` and
`brook object` manage buckets on any NATS server over the wire, through nats-py; `brook
store check` verifies a file-store directory on disk."""
