# Seed 000 (000_383682cb78e0ebf1.txt), "Replier (replier.py)".
# The author's code; only its indentation, lost in the seed text, is restored. The tests run it
# as a script with the server address replaced by their server's.
# The authors' code is untyped and kept as written: no lint, formatting or type checks.
# ruff: noqa
# fmt: off
# mypy: ignore-errors
import asyncio
import nats
from nats.aio.msg import Msg
import uuid
from functools import partial

# Define the message handler coroutine
async def message_handler(msg: Msg, consumer_name: str, nc: nats.aio.client.Client):
    # Decode and process the message
    request = msg.data.decode()
    print(f"{consumer_name} received request: {request}")

    # Extract the reply subject from the message headers
    reply_subject = msg.header.get('reply-to') if msg.header else None

    # Generate a response
    response = f"Response from {consumer_name} : {request.upper()}"

    # Send the response back to the reply subject if it exists
    if reply_subject:
        await nc.publish(reply_subject, response.encode())
        print(f"{consumer_name} sent response")

    # Acknowledge the message to confirm processing
    await msg.ack()

async def main():
    # Connect to the NATS server
    nc = await nats.connect("nats://localhost:4222")

    # Create a JetStream context
    js = nc.jetstream()

    # Generate a unique durable consumer name
    consumer_name = f'consumer_{uuid.uuid4()}'
    print(f"{consumer_name} is listening for messages...")

    # Subscribe to the 'requests' subject using push-based subscription
    handler = partial(message_handler, consumer_name=consumer_name, nc=nc)
    await js.subscribe(
        subject='my.subject.requests',
        durable=consumer_name,
        stream='example_stream',
        cb=handler,
        manual_ack=True
    )

    # Keep the consumer running
    await asyncio.Event().wait()

if __name__ == '__main__':
    asyncio.run(main())
