"""How many clients subscribe to a subject in one account: nats-server's answers to
`$SYS.REQ.ACCOUNT.NSUBS` (`nsubsRequest`) and `$SYS.DEBUG.SUBSCRIBERS`
(`debugSubscribers`), server/events.go.

Counted as nats-server's `totalSubs` counts: the subscriptions of clients and of leafnode
connections that dialled in to this server, never the server's own (JetStream's, the
system services', an import's) nor those of a leaf connection this server dialled. For a
literal subject, those whose subject matches it; for one with wildcards, those whose
subject it contains (`subjectIsSubsetMatch`). With a queue group, only that group's
members; for a literal subject that leaves out every plain subscriber, for a wildcard an
empty group name (which only NSUBS's base64 `queue` can give) stands for them.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from typing import Any

from brook.server.statistics import StatisticsFeed
from brook.subjects import has_wildcard, matches, subset_match

__all__ = ["NsubsRequest", "count_subscribers", "debug_request", "nsubs_request"]


@dataclass(frozen=True, slots=True)
class NsubsRequest:
    """nats-server's `accNumSubsReq`: `{"acc", "subject", "queue"}`, the queue group
    base64 (Go's `[]byte`); None when absent or null."""

    account: str
    subject: str
    queue: str | None


def nsubs_request(payload: bytes) -> NsubsRequest:
    """The request, or ValueError where Go's `json.Unmarshal` fails (nats-server logs it
    and does not answer)."""
    if not payload:
        raise ValueError("request requires a body")
    body: Any = json.loads(payload)
    if body is None:
        return NsubsRequest("", "", None)
    if not isinstance(body, dict):
        raise ValueError("json: cannot unmarshal into Go value of type server.accNumSubsReq")
    account, subject, queue = body.get("acc"), body.get("subject"), body.get("queue")
    if not isinstance(account, str | None) or not isinstance(subject, str | None):
        raise ValueError("json: cannot unmarshal into Go struct field of type string")
    if queue is not None:
        if not isinstance(queue, str):
            raise ValueError("json: cannot unmarshal into Go struct field of type []uint8")
        try:  # Go's StdEncoding: padded, and it skips line breaks
            raw = base64.b64decode(queue.replace("\r", "").replace("\n", ""), validate=True)
        except binascii.Error as exc:
            raise ValueError(f"illegal base64 data: {exc}") from None
        queue = raw.decode("utf-8", "replace")
    return NsubsRequest(account or "", subject or "", queue)


def debug_request(payload: bytes) -> tuple[str, str | None]:
    """`$SYS.DEBUG.SUBSCRIBERS`' body: a subject, optionally a space and a queue group
    (Go's `strings.Split(strings.TrimSpace(msg), " ")`)."""
    args = payload.decode("utf-8", "replace").strip().split(" ")
    return args[0], args[1] if len(args) > 1 else None


def count_subscribers(feed: StatisticsFeed, account: str, subject: str, queue: str | None) -> int:
    wanted = subject.encode()
    literal = not has_wildcard(wanted)
    if literal and b"" in wanted.split(b"."):
        return 0  # Go's sublist matches nothing for an empty token
    dialled = {c.cid for c in feed.leaf_connections() if c.is_spoke}
    count = 0
    for sublist in feed.sublists(account, details=True):
        for sub in sublist.subscriptions:
            if sub.cid == 0 or sub.cid in dialled:
                continue
            if literal:
                if not matches(sub.subject.encode(), wanted):
                    continue
                if queue is not None and (not sub.queue or sub.queue != queue):
                    continue
            elif not subset_match(wanted, sub.subject.encode()) or (
                queue is not None and sub.queue != queue
            ):
                continue
            count += 1
    return count
