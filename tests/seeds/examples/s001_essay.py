# Seed 001 (001_8750dfdaabeb5a7a.txt), an essay on JetStream with nats-py snippets.
# Each snippet is the author's code, wrapped in the smallest thing that runs it: an async function
# (the snippets `await` at top level) whose parameters are the names the snippet uses without
# defining (`js`, `subscription`), returning what later snippets or the reader would look at.
# Helpers the essay leaves undefined get trivial definitions, marked as such below. The tests
# point `nats.connect()` (the default address) at their server.
# The authors' code is untyped and kept as written: no lint, formatting or type checks.
# ruff: noqa
# fmt: off
# mypy: ignore-errors
import nats
from nats.js.api import StreamConfig
from datetime import datetime, timedelta
from nats.js.api import DeliverPolicy  # wrapper: the essay uses DeliverPolicy without importing it


# -- trivial definitions of what the essay leaves undefined ---------------------------------------

def process(msg):
    print(f"processed {msg.subject}: {msg.data.decode()}")


class PermanentError(Exception):
    pass


class SlowProcessingError(Exception):
    pass


class _Result:
    def __init__(self, success):
        self.success = success


_seen = set()


async def process_order(data):
    """Succeeds, except: b"poison" is a PermanentError, b"slow" a SlowProcessingError, and
    b"retry" fails the first time it is seen."""
    print(f"process_order {data.decode()}")
    if data == b"poison":
        raise PermanentError()
    if data == b"slow":
        raise SlowProcessingError()
    first_time = data not in _seen
    _seen.add(data)
    return _Result(success=not (data == b"retry" and first_time))


# -- Streams ----------------------------------------------------------------------------------------

async def create_stream():
    nc = await nats.connect()
    js = nc.jetstream()

    await js.add_stream(
        name="ORDERS",
        subjects=["orders.>"],
        storage="file",
        max_msgs=100000,
        max_age=86400,
    )
    return nc, js


# -- Publishing to Streams --------------------------------------------------------------------------

async def publish(js):
    ack = await js.publish("orders.new", b'{"id": 123}')
    print(f"Stored at sequence {ack.seq}")


async def publish_with_msg_id(js):
    ack = await js.publish(
        "orders.new",
        b'{"id": 123}',
        headers={"Nats-Msg-Id": "order-123"}
    )
    return ack


# -- Consumers ----------------------------------------------------------------------------------------

async def durable_consumer(js):
    sub = await js.subscribe("orders.>", durable="my-processor")

    async for msg in sub.messages:
        process(msg)
        await msg.ack()


# -- Push vs Pull -------------------------------------------------------------------------------------

async def push_consumer(js):
    sub = await js.subscribe("orders.>", durable="push-consumer")

    async for msg in sub.messages:
        # Messages arrive automatically
        await msg.ack()


async def pull_consumer(js):
    sub = await js.pull_subscribe("orders.>", durable="pull-consumer")

    # Fetch up to 10 messages, wait up to 5 seconds
    msgs = await sub.fetch(10, timeout=5)
    for msg in msgs:
        process(msg)
        await msg.ack()


# -- Acknowledgments ----------------------------------------------------------------------------------

async def acknowledgments(subscription):
    async for msg in subscription.messages:
        try:
            result = await process_order(msg.data)
            if result.success:
                await msg.ack()
            else:
                await msg.nak()
        except PermanentError:
            await msg.term()
        except SlowProcessingError:
            await msg.in_progress()
            # Continue processing...


# -- Replay Policies ----------------------------------------------------------------------------------

async def start_from_sequence(js):
    # Start from sequence 1000
    await js.subscribe(
        "orders.>",
        deliver_policy=DeliverPolicy.BY_START_SEQUENCE,
        opt_start_seq=1000,
    )


async def start_from_time(js):
    # Start from one hour ago
    await js.subscribe(
        "orders.>",
        deliver_policy=DeliverPolicy.BY_START_TIME,
        opt_start_time=datetime.now() - timedelta(hours=1),
    )


# -- Queue Groups -------------------------------------------------------------------------------------

async def queue_group(js):
    await js.subscribe(
        "orders.>",
        queue="processors",
        durable="order-processor",
    )


# -- Stream Operations --------------------------------------------------------------------------------

async def stream_operations(js):
    # Get stream info
    info = await js.stream_info("ORDERS")
    print(f"Messages: {info.state.messages}")
    print(f"Bytes: {info.state.bytes}")
    print(f"First seq: {info.state.first_seq}")
    print(f"Last seq: {info.state.last_seq}")

    # Get specific message
    msg = await js.get_msg("ORDERS", seq=100)

    # Delete specific message
    await js.delete_msg("ORDERS", seq=100)

    # Purge all messages
    await js.purge_stream("ORDERS")
    return msg
