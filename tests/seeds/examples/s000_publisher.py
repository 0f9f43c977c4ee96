# Seed 000 (000_383682cb78e0ebf1.txt), "Publisher (publisher.py)".
# The author's code; only its indentation, lost in the seed text, is restored. The tests run it
# as a script with the server address replaced by their server's.
# The authors' code is untyped and kept as written: no lint, formatting or type checks.
# ruff: noqa
# fmt: off
# mypy: ignore-errors
import asyncio
from nats.aio.client import Client as NATS
from nats.aio.errors import ErrConnectionClosed, ErrTimeout, ErrNoServers

async def publish_messages(js, subject):
    """
    Publishes a series of messages to the specified subject.
    """
    try:
        for i in range(1, 6):
            message = f"Message {i}"
            # Publish the message to the subject
            await js.publish(subject, message.encode())
            print(f"Published: {message}")
            await asyncio.sleep(1)  # Wait for a second before sending the next message
    except Exception as e:
        print(f"Error publishing message: {e}")

async def main():
    """
    Main coroutine that sets up the NATS client, connects to the server,
    and publishes messages to a subject.
    """
    nc = NATS()

    try:
        # Connect to the NATS server
        await nc.connect(servers=["nats://localhost:4222"])
        print("Publisher connected to NATS server.")

        # Create JetStream context
        js = nc.jetstream()

        # Define the subject to publish to
        subject = "my.subject.test"

        # Publish messages
        await publish_messages(js, subject)

    except ErrNoServers as e:
        print(f"Could not connect to NATS server: {e}")
    except Exception as e:
        print(f"An error occurred: {e}")
    finally:
        # Close the NATS connection
        await nc.close()
        print("Publisher disconnected from NATS server.")

if __name__ == '__main__':
    asyncio.run(main())
