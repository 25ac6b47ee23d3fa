# Two entry points for a fresh machine: `make up` (a local cluster) and `make test` (everything CI runs).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
DATA_DIR ?= $(HOME)/.local/share/kubelite
PORT ?= 6443

.PHONY: up test install sandbox lint typecheck layers unit fuzz bench bench-scheduler bench-agent clean
.PHONY: chaos

$(BIN)/kubelite: pyproject.toml
	@echo "==> [1/3] Creating a Python virtual environment in $(VENV)"
	$(PYTHON) -m venv $(VENV)
	@echo "==> [2/3] Upgrading pip"
	$(BIN)/pip install --quiet --upgrade pip
	@echo "==> [3/3] Installing kubelite and its Python dependencies into $(VENV) (aiohttp, uvloop, orjson,"
	@echo "          PyYAML, cryptography, the kubernetes client, numpy; test tools): about a minute"
	$(BIN)/pip install --progress-bar on -e ".[dev]"
	touch $@

install: $(BIN)/kubelite

# The Debian packages the node agent uses (bubblewrap, nftables), installed when we can (scripts/system-deps).
sandbox:
	@scripts/system-deps

up: install sandbox
	@echo "==> Starting kubelite up: API server, scheduler, controllers and a node agent for this machine"
	@echo "    (data in $(DATA_DIR), port $(PORT); Ctrl-C stops it)"
	$(BIN)/kubelite up --data-dir $(DATA_DIR) --port $(PORT)

lint: install
	$(BIN)/ruff check kubelite tests benchmarks

typecheck: install
	$(BIN)/mypy

layers: install
	$(BIN)/lint-imports

test: lint typecheck layers
	$(BIN)/pytest -q

# A long fuzz campaign (CI runs a fixed-seed sample inside `make test`); figures go to RELIABILITY.md.
fuzz: install
	KUBELITE_FUZZ=campaign KUBELITE_FUZZ_EXAMPLES=50000 $(BIN)/pytest -s --timeout=0 tests/fuzz

# Fault injection with checked invariants (README "Fault injection"): 50 seeded schedules of 60 s each
# (CI runs 5 short ones inside `make test`). Reproduce one schedule: make chaos CHAOS_ARGS="--seed 7 --schedules 1".
CHAOS_ARGS ?= --schedules 50 --duration 60 --seed 1
chaos: install sandbox
	$(BIN)/python -m kubelite.testing.chaos $(CHAOS_ARGS)

bench: install
	$(BIN)/python -m benchmarks.apiserver

bench-scheduler: install
	$(BIN)/python -m benchmarks.scheduler

bench-agent: install
	$(BIN)/python -m benchmarks.agent

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
