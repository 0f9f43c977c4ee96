# Seed 003 (003_329087c247b087db.txt), FastStream's page on NATS JetStream.
# The seed text lost the page's decorators and the handler's body; those lines are restored from
# the file the page includes (FastStream's docs/docs_src/nats/js/main.py) and marked "restored".
# The last two lines are the wrapper that runs the app as `faststream run` would (that CLI needs
# the faststream[cli] extra). The tests point `NatsBroker()` (the default address) at their
# server.
# The authors' code is untyped and kept as written: no lint, formatting or type checks.
# ruff: noqa
# fmt: off
# mypy: ignore-errors
from faststream import FastStream, Logger
from faststream.nats import JStream, NatsBroker

broker = NatsBroker()
app = FastStream(broker)

stream = JStream(name="stream")

@broker.subscriber(  # restored
    "js-subject",  # restored
    stream=stream,  # restored
    deliver_policy="new",  # restored
)  # restored
async def handler(msg: str, logger: Logger):
    logger.info(msg)  # restored

@app.after_startup  # restored
async def test_send():
    await broker.publish("Hi!", "js-subject")
    # publish with stream verification
    await broker.publish("Hi!", "js-subject", stream="stream")


if __name__ == "__main__":  # wrapper
    import asyncio; asyncio.run(app.run())  # wrapper
