"""JetStream: streams, their stores, and (later) consumers, KV and object store."""
