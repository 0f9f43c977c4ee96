"""Sans-I/O NATS client protocol: bytes in, operations out; operations in, bytes out.

Nothing in this package touches a socket, a clock or an event loop (wire reference §1).
"""
