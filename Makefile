# The two commands the README opens with. Everything else is set up by them.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: run test lint typecheck unit bench example clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev,spark]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/brook serve --addr 127.0.0.1 --port 4222 --jetstream --store_dir ./brook-data

lint: $(STAMP)
	$(BIN)/ruff check src tests bench examples tools
	$(BIN)/ruff format --check src tests bench examples tools
	$(BIN)/lint-imports

typecheck: $(STAMP)
	$(BIN)/mypy

test: lint typecheck
	$(BIN)/pytest

bench: $(STAMP)
	$(BIN)/python -m bench.core
	$(BIN)/python -m bench.jetstream
	$(BIN)/python -m bench.consumers
	$(BIN)/python -m bench.scale
	$(BIN)/python -m bench.mirrors
	$(BIN)/python -m bench.websocket
	$(BIN)/python -m bench.spark

# The Spark pipeline of examples/, against the Brook of `make run` (start it first).
example: $(STAMP)
	$(BIN)/python examples/orders_pipeline.py --servers nats://127.0.0.1:4222

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
