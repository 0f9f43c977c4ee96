"""A nats-py JetStream context whose push subscriptions can queue a whole bucket's backlog.

Why the scale test needs it: nats-py answers a push consumer's flow-control request as soon
as its reader *receives* the request when the subscription has a callback, which every KV
watcher (and so `keys()`) has: `_JSI.get_js_delivered` counts messages received, not
processed. Server flow control therefore never waits for the application, and whatever the
server sends piles up in the subscription's queue, which holds 512Ki messages by default
(`DEFAULT_JS_SUB_PENDING_MSGS_LIMIT`). Past that nats-py drops messages, reports them only
to `error_cb` (`SlowConsumerError`), and an ordered consumer does not notice the gap: it
advances its sequence tracking before the enqueue and records the dropped message as the
last one seen, so the next idle heartbeat matches. A watcher that loses the entry with
delta 0 never yields the `None` that ends the initial values, and the watch stalls with
the server's consumer healthy (everything delivered, still bound). A million-key watch
races into that limit against either server (nats-server first, being the faster sender).

`KeyValue.watch` has no parameter for the limit; this context gives every subscription it
makes without an explicit limit `pending_msgs_limit` instead of the library default.
"""

from __future__ import annotations

from typing import Any

from nats.js import JetStreamContext


class BacklogJetStream(JetStreamContext):
    def __init__(self, conn: Any, *, pending_msgs_limit: int, timeout: float = 5) -> None:
        super().__init__(conn, timeout=timeout)
        self.pending_msgs_limit = pending_msgs_limit

    async def subscribe(self, subject: str, *args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("pending_msgs_limit", self.pending_msgs_limit)
        return await super().subscribe(subject, *args, **kwargs)
