# Seed 000 (000_383682cb78e0ebf1.txt), "Creating a Stream in NATS JetStream (stream.py)".
# The author's code; only its indentation, lost in the seed text, is restored. The tests run it
# as a script with the server address replaced by their server's.
# The authors' code is untyped and kept as written: no lint, formatting or type checks.
# ruff: noqa
# fmt: off
# mypy: ignore-errors
import asyncio
from nats.aio.client import Client as NATS
from nats.js.api import StreamConfig, RetentionPolicy, StorageType

async def main():
    # Create a NATS client instance
    nc = NATS()

    # Connect to NATS server
    await nc.connect(servers=["nats://localhost:4222"])

    # Create JetStream context
    js = nc.jetstream()

    stream_name = "example_stream"

    # Check if the stream already exists
    try:
        stream_info = await js.stream_info(stream_name)
        # If it exists, delete the stream
        await js.delete_stream(stream_name)
        print(f"Existing stream '{stream_name}' deleted.")
    except Exception as e:
        # Stream does not exist
        print(f"Stream '{stream_name}' does not exist. Proceeding to create a new one.")

    # Define stream configuration with correct enums and integer max_age
    config = StreamConfig(
        name=stream_name,                   # Stream name
        subjects=["my.subject.*"],          # Subjects to subscribe
        retention=RetentionPolicy.LIMITS,   # Retention policy: LIMITS, INTEREST, or WORK_QUEUE
        storage=StorageType.FILE,           # Storage type: MEMORY or FILE
        max_age=9 * 10**9,                  # Max age in nanoseconds (9 seconds)
        max_msgs=1000,                      # Max number of messages
        max_bytes=10 * 1024 * 1024,         # Max storage size in bytes (10MB)
    )

    # Add stream to JetStream context
    try:
        await js.add_stream(config=config)
        print(f"Stream '{config.name}' created successfully.")
    except Exception as e:
        print(f"Error creating stream: {e}")

    # Close the NATS connection
    await nc.close()

if __name__ == '__main__':
    asyncio.run(main())
