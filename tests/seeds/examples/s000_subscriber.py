# Seed 000 (000_383682cb78e0ebf1.txt), "Subscriber (publisher.py)" (run as subscriber.py).
# The author's code; only its indentation, lost in the seed text, is restored. The tests run it
# as a script with the server address replaced by their server's.
# The authors' code is untyped and kept as written: no lint, formatting or type checks.
# ruff: noqa
# fmt: off
# mypy: ignore-errors
import asyncio
from nats.aio.client import Client as NATS
from nats.aio.errors import ErrConnectionClosed, ErrTimeout, ErrNoServers

async def message_handler(msg):
    """
    Callback function to handle received messages.
    """
    data = msg.data.decode()
    print(f"Received a message on '{msg.subject}': {data}")
    await msg.ack()  # Acknowledge the message

async def subscribe_to_subject(js, subject):
    """
    Subscribes to the specified subject and handles incoming messages.
    """
    try:
        # Subscribe to the subject without a queue group
        await js.subscribe(subject, cb=message_handler)
        print(f"Subscriber is listening on '{subject}'.")
    except Exception as e:
        print(f"Error subscribing to subject: {e}")

async def main():
    """
    Main coroutine that sets up the NATS client, connects to the server,
    and subscribes to a subject to receive messages.
    """
    nc = NATS()

    try:
        # Connect to the NATS server
        await nc.connect(servers=["nats://localhost:4222"])
        print("Subscriber connected to NATS server.")

        # Create JetStream context
        js = nc.jetstream()

        # Define the subject to subscribe to
        subject = "my.subject.*"

        # Subscribe to the subject
        await subscribe_to_subject(js, subject)

        # Keep the subscriber running to listen for incoming messages
        print("Subscriber is running. Press Ctrl+C to exit.")
        while True:
            await asyncio.sleep(1)

    except ErrNoServers as e:
        print(f"Could not connect to NATS server: {e}")
    except asyncio.CancelledError:
        pass  # Handle task cancellation gracefully
    except Exception as e:
        print(f"An error occurred: {e}")
    finally:
        # Close the NATS connection
        await nc.close()
        print("Subscriber disconnected from NATS server.")

if __name__ == '__main__':
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        print("\nSubscriber stopped by user.")
