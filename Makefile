# The two commands the README opens with. Everything else is set up by them.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# Brook's bytecode, written as pip writes an installed package's: an editable install run
# with PYTHONDONTWRITEBYTECODE set (as on the shared test machine) would otherwise compile
# every module at each start of a server, more than half of `brook serve`'s start-up.
# Checked-hash files: each import compares the source's hash, so an edited .py is never
# shadowed by an old .pyc (a timestamp is to the second and compileall skips by it alone).
BYTECODE := $(BIN)/python -m compileall -q --invalidation-mode checked-hash src

# The modules mypyc compiles (brook/_compiled.py, ADR 0045) and their build: editing one
# rebuilds the extensions (an extension older than its source is never loaded, but would
# leave the tests running the pure-Python fallback).
COMPILED_SRC := setup.py src/brook/_compiled.py $(wildcard src/brook/protocol/*.py src/brook/routing/*.py) \
	src/brook/server/client_core.py src/brook/leafnode/leaf_core.py \
	src/brook/jetstream/store/file/format.py src/brook/jetstream/store/file/segment.py \
	src/brook/jetstream/store/file/subjects.py src/brook/jetstream/store/file/index.py \
	$(wildcard src/brook/jetstream/store/file/store*.py) \
	src/brook/jetstream/store/file/reader.py \
	src/brook/jetstream/publish_headers.py src/brook/jetstream/dedup.py \
	src/brook/jetstream/backlog.py src/brook/jetstream/commit.py src/brook/jetstream/persist.py \
	src/brook/jetstream/fast_reply.py src/brook/jetstream/ingress.py \
	src/brook/jetstream/space.py src/brook/jetstream/consumer_index.py \
	src/brook/jetstream/consumer/ack_reply.py \
	src/brook_spark/framescan.py
# The tests run again against the pure-Python modules (BROOK_NO_EXTENSIONS): those of the
# compiled modules themselves (the file store's models in tests/store among them, ADR 0065)
# and of the wire protocol they serve.
PURE_TESTS := tests/unit tests/property tests/wire tests/store

.PHONY: run test test-pure lint typecheck unit bench example clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# The distribution was named `brook` before ADR 0044 (now brook-nats): a venv made before
# that has both, and removing the old one afterwards would take the `brook` script with it.
$(STAMP): pyproject.toml $(COMPILED_SRC) | $(BIN)/python
	$(BIN)/python -m pip uninstall --quiet --yes brook 2>/dev/null || true
	$(BIN)/python -m pip install --quiet -e '.[dev,spark]'
	$(BYTECODE)
	touch $(STAMP)

run: $(STAMP)
	$(BYTECODE)
	$(BIN)/brook serve --addr 127.0.0.1 --port 4222 --jetstream --store_dir ./brook-data

lint: $(STAMP)
	$(BIN)/ruff check src tests bench examples tools
	$(BIN)/ruff format --check src tests bench examples tools
	$(BIN)/lint-imports

typecheck: $(STAMP)
	$(BIN)/mypy

# With the extensions built, the suite must run them (tests/unit/test_compiled.py); without
# a C compiler or Python's headers the package is pure Python and so are both runs.
test: lint typecheck
	$(BYTECODE)
	@$(BIN)/python -c 'import brook._compiled as c; print("compiled:", c.built())'
	BROOK_REQUIRE_COMPILED=$$(test -f src/brook/_compiled.json && echo 1) $(BIN)/pytest
	BROOK_NO_EXTENSIONS=1 $(BIN)/pytest -q $(PURE_TESTS)

# The whole suite against the pure-Python modules (twice make test's time, so apart).
test-pure: lint typecheck
	BROOK_NO_EXTENSIONS=1 $(BIN)/pytest

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
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache build src/brook/_compiled.json
	find src -name '*.so' -delete
