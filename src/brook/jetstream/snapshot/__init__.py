"""Stream snapshots and restores (ADR 0008): the archive and its checks (`archive.py`),
nats-server's chunk flow out (`sender.py`) and in, staged and committed by one rename
(`restore.py`), and the sessions in progress with their limits (`transfers.py`)."""
