# Seed 000 (000_383682cb78e0ebf1.txt), "Requester (requester.py)".
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

# Subscribe to the reply subject to receive responses from consumers
async def response_handler(msg: Msg, responses: list):
    # Decode the response message
    response = msg.data.decode()
    print(f"Received response: {response}")
    responses.append(response)

async def collect_responses(responses):
    # Wait until the expected number of responses are received
    expected_responses = 1  # Set this based on the number of consumers
    while len(responses) < expected_responses:
        await asyncio.sleep(0.1)
    print("Collected all responses")

async def main():
    # Connect to the NATS server
    nc = await nats.connect("nats://localhost:4222")

    # Create a JetStream context
    js = nc.jetstream()

    # Create a unique inbox (reply subject) for receiving responses
    reply_subject = nc.new_inbox()
    responses = []

    # Subscribe to the reply subject
    handler = partial(response_handler, responses=responses)
    await nc.subscribe(reply_subject, cb=handler)

    # Include the reply subject in the message headers
    headers = {'reply-to': reply_subject}

    # Publish a request message with the reply subject included in headers
    await js.publish(
        subject='my.subject.requests',
        payload=b'Hello, Consumers!',
        headers=headers
    )
    print("Published request with reply subject in headers:", reply_subject)

    # Wait for responses with a timeout
    try:
        await asyncio.wait_for(collect_responses(responses), timeout=5)
    except asyncio.TimeoutError:
        print("Timed out waiting for responses")

    # Print all collected responses
    print("All responses:", responses)

    # Close the NATS connection
    await nc.close()

if __name__ == '__main__':
    asyncio.run(main())
