# The two commands in the README. Each creates .venv if needed and installs rlver into it with
# constraints.txt, which keeps torch at the CPU build on machines without a GPU.
PYTHON ?= python3
VENV ?= .venv
PIP := $(VENV)/bin/pip
PY := $(VENV)/bin/python
RLVER := $(VENV)/bin/rlver
CONSTRAINTS ?= constraints.txt

.PHONY: demo test setup setup-dev lint typecheck pytest browser verl-test bench clean

$(VENV)/bin/activate:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip

setup: $(VENV)/bin/activate
	$(PIP) install -q -c $(CONSTRAINTS) -e .

setup-dev: $(VENV)/bin/activate
	$(PIP) install -q -c $(CONSTRAINTS) -e ".[dev]"

demo: setup
	@if $(RLVER) demo --help >/dev/null 2>&1; then $(RLVER) demo; else $(RLVER) --help && $(RLVER) profiles --help; fi

# Headless Chromium for the report-rendering test; skipped quietly where apt is not available.
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
	      || echo "note: could not install chromium; the report screenshot test will be skipped"; \
	  else echo "note: chromium not installed; the report screenshot test will be skipped"; fi; }

lint: setup-dev
	$(VENV)/bin/ruff check src tests
	$(VENV)/bin/ruff format --check src tests

typecheck: setup-dev
	$(VENV)/bin/mypy

# Wall-clock tests (marked `timing`) run alone after the parallel suite, so they measure our code
# and not a neighbouring test.
pytest: setup-dev
	$(VENV)/bin/pytest -q -n 2 --timeout 900 -m "not timing"
	$(VENV)/bin/pytest -q --timeout 900 -m timing

test: setup-dev browser lint typecheck pytest

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
