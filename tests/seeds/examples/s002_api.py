# Seed 002 (002_133d1cb3ec982c69.txt), an API summary of nats-py's JetStream context.
# Its "Usage Examples" blocks, each the author's code. `main()` is whole as written; the other
# blocks are fragments (top-level `await`, a `js` defined elsewhere), so each is wrapped in an
# async function taking `js` and returning what the reader would look at next; the push block's
# four examples are four functions so that each can be run on its own. Helpers the summary
# leaves undefined get trivial definitions, marked as such below. The tests point
# `nats.connect()` (the default address) at their server.
# The authors' code is untyped and kept as written: no lint, formatting or type checks.
# ruff: noqa
# fmt: off
# mypy: ignore-errors
import asyncio
import nats


# -- trivial definitions of what the summary leaves undefined -----------------------------------

async def process_order(msg):
    print(f"order: {msg.data.decode()}")
    await msg.ack()


async def process_audit_log(msg):
    print(f"audit: {msg.data.decode()}")


async def process_task(msg):
    print(f"task: {msg.data.decode()}")


async def process_job(data):
    print(f"job: {data.decode()}")


async def process_batch(msgs):
    print(f"batch of {len(msgs)}")


async def process_message(data):
    print(f"message: {data.decode()}")


class FatalError(Exception):
    pass


class _Result:
    def __init__(self, success):
        self.success = success


_seen = set()


async def complex_processing(data):
    """Succeeds, except: b"later" fails, b"fatal" is a FatalError, and b"flaky" raises
    another exception the first time it is seen."""
    print(f"complex_processing {data.decode()}")
    if data == b"fatal":
        raise FatalError()
    if data == b"flaky" and data not in _seen:
        _seen.add(data)
        raise RuntimeError("flaky")
    return _Result(success=data != b"later")


# -- JetStream Context: Usage Examples ------------------------------------------------------------

async def main():
    nc = await nats.connect()
    js = nc.jetstream()

    # Synchronous publish with acknowledgment
    ack = await js.publish("events.user.login", b'{"user_id": 123, "timestamp": "2024-01-01T10:00:00Z"}')
    print(f"Message stored at sequence {ack.seq}")

    # Asynchronous publish for high throughput
    future1 = await js.publish_async("metrics.cpu", b'{"usage": 75.5}')
    future2 = await js.publish_async("metrics.memory", b'{"usage": 82.1}')

    # Wait for specific acknowledgments
    ack1 = await future1
    ack2 = await future2

    # Wait for all pending publishes
    await js.publish_async_completed()
    return nc, js, ack1, ack2


# -- Push Subscriptions: Usage Examples -----------------------------------------------------------

# Simple JetStream subscription
async def handle_event(msg):
    data = msg.data.decode()
    print(f"Processing: {data}")
    await msg.ack()  # Acknowledge message


async def simple_subscription(js):
    js_sub = await js.subscribe("events.>", cb=handle_event)
    return js_sub


async def durable_subscription(js):
    # Durable consumer subscription
    await js.subscribe(
        "orders.created",
        durable="order-processor",
        manual_ack=True,
        cb=process_order
    )


async def ordered_subscription(js):
    # Ordered consumer for sequential processing
    await js.subscribe(
        "audit.logs",
        ordered_consumer=True,
        cb=process_audit_log
    )


async def queue_subscription(js):
    # Queue group for load balancing
    await js.subscribe(
        "work.tasks",
        queue="workers",
        durable="task-worker",
        cb=process_task
    )


# -- Pull Subscriptions: Usage Examples -----------------------------------------------------------

async def pull_subscription(js):
    # Pull subscription with manual fetching
    pull_sub = await js.pull_subscribe("batch.jobs", durable="job-processor")

    # Fetch specific number of messages
    msgs = await pull_sub.fetch(batch_size=10, timeout=5.0)
    for msg in msgs:
        await process_job(msg.data)
        await msg.ack()

    # Fetch with wait
    msgs = await pull_sub.fetch(batch_size=5, timeout=30.0)
    if msgs:
        await process_batch(msgs)

    # Continuous fetching loop
    async for msg in pull_sub.messages():
        try:
            await process_message(msg.data)
            await msg.ack()
        except Exception as e:
            print(f"Processing failed: {e}")
            await msg.nak()  # Negative acknowledgment for redelivery


# -- Message Acknowledgment: Usage Examples -------------------------------------------------------

async def message_handler(msg):
    try:
        # Long-running processing
        await msg.in_progress()  # Extend ack deadline

        result = await complex_processing(msg.data)

        if result.success:
            await msg.ack()  # Success
        else:
            await msg.nak(delay=30.0)  # Retry after 30 seconds

    except FatalError:
        await msg.term()  # Don't retry
    except Exception:
        await msg.nak()  # Retry immediately
