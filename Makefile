# The two commands a newcomer types. Both create .venv on first use.
VENV   ?= .venv
PYTHON ?= python3
BIN     = $(VENV)/bin
STAMP   = $(VENV)/.installed

.PHONY: run test lint docs fmt bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

run: $(STAMP)
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
