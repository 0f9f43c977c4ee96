"""JetStream: streams, their stores, consumers and the `$JS.API` that manages them.

The engine (`engine.py`) keeps the streams (`stream.py`) and their consumers (`consumer/`)
and wires them to the router; `api/` serves the `$JS.API.*` requests, `direct.py` direct
gets, `snapshot/` snapshots and restores; the stores (`store/`) sit below all of it and
import nothing of the rest. Key-Value and Object Store are the clients' conventions over
plain streams; streams honour only what nats-server itself reads for them (subject delete
markers, `KV-Operation: PURGE`). Above it only the server imports it, and `brook store check`
the store's checker (docs/architecture.md).
"""
