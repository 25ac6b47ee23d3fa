# Two entry points for a fresh machine: `make up` (a local cluster) and `make test` (everything CI runs).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
DATA_DIR ?= $(HOME)/.local/share/kubelite
PORT ?= 6443

.PHONY: up test install sandbox lint typecheck layers unit bench bench-scheduler bench-agent clean

$(BIN)/kubelite: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e ".[dev]"
	touch $@

install: $(BIN)/kubelite

# The node agent mounts pod volumes with bubblewrap; install it when we can (root + apt).
sandbox:
	@command -v bwrap >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && \
	  apt-get update -qq && apt-get install -y -qq bubblewrap; } || \
	  echo "note: bubblewrap (bwrap) is not installed: pods with volume mounts will be refused"

up: install sandbox
	$(BIN)/kubelite up --data-dir $(DATA_DIR) --port $(PORT)

lint: install
	$(BIN)/ruff check kubelite tests benchmarks

typecheck: install
	$(BIN)/mypy

layers: install
	$(BIN)/lint-imports

test: lint typecheck layers
	$(BIN)/pytest -q

bench: install
	$(BIN)/python -m benchmarks.apiserver

bench-scheduler: install
	$(BIN)/python -m benchmarks.scheduler

bench-agent: install
	$(BIN)/python -m benchmarks.agent

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
