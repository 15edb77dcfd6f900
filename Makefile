# The two commands a newcomer types. Both create .venv on first use.
VENV   ?= .venv
PYTHON ?= python3
BIN     = $(VENV)/bin
STAMP   = $(VENV)/.installed
SHELL   = /bin/bash

.PHONY: run test lint docs fmt bench clean

CORE    = $(VENV)/.core
PIP     = $(BIN)/python -m pip --disable-pip-version-check --no-input

# `make run` needs only the core (the library, the simulator, SQLite): a short install.
$(CORE): pyproject.toml
	@test -x $(BIN)/python || { echo "==> creating $(VENV) with $$($(PYTHON) --version)"; $(PYTHON) -m venv $(VENV); }
	@echo "==> installing stoker and its core dependencies into $(VENV) (the first time only)"
	@$(PIP) install -e . | { grep -E '^(Collecting|Successfully)' || true; }; test $${PIPESTATUS[0]} -eq 0
	@$(BIN)/python -c "import stoker" && touch $(CORE)

# `make test` needs every extra and the development tools: a longer install, once.
$(STAMP): pyproject.toml
	@test -x $(BIN)/python || { echo "==> creating $(VENV) with $$($(PYTHON) --version)"; $(PYTHON) -m venv $(VENV); }
	@echo "==> installing every extra and the development tools into $(VENV) (the first time only)"
	@$(PIP) install --quiet --upgrade pip
	@$(PIP) install -e '.[dev]' | { grep -E '^(Collecting|Successfully)' || true; }; test $${PIPESTATUS[0]} -eq 0
	@$(BIN)/python -c "import stoker, starlette, pytest" && touch $(STAMP) $(CORE)

run: $(CORE)
	$(BIN)/stoker demo

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# The suite runs on every core, one worker per logical CPU (pytest-xdist, each worker with
# a PostgreSQL database of its own); `make test TEST_WORKERS=0` runs it in one process.
TEST_WORKERS ?= logical

test: lint
	@$(MAKE) --no-print-directory docs
	$(BIN)/python -m pytest -n $(TEST_WORKERS)

# The docs site (mkdocs.yml) into site/: silent when clean, and any warning (a broken link,
# reference or anchor) fails it. Why a script and not `mkdocs build --strict --quiet`:
# scripts/docs_build.py; tests/test_docs_build.py runs the same script.
docs: $(STAMP)
	$(BIN)/python scripts/docs_build.py

fmt: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

bench: $(STAMP)
	$(BIN)/stoker bench overhead

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache site
