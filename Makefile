# paper-repro: `make reproduce` runs the cpu-tiny study; `make test` runs the tests.
# Both install into .venv first: the package with its study and dev extras, every pinned version
# from constraints.txt (pyproject.toml has only ranges). torch is installed first, pinned there
# (2.13.0): on the project machines pip finds that CPU wheel on local disk, while an unpinned torch
# pulls a multi-GB CUDA build.
# Elsewhere, on a CPU-only machine, pass TORCH_INDEX=https://download.pytorch.org/whl/cpu.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
TORCH_INDEX ?=
PIP_TORCH := $(if $(TORCH_INDEX),--extra-index-url $(TORCH_INDEX),)
STAMP := $(VENV)/.installed
PYTEST_ARGS ?=

QUICK ?=
JOBS ?= 2
RUN_FLAGS := --jobs $(JOBS) $(if $(QUICK),--quick,)

.PHONY: install test test-slow lint bench reproduce validate models gpu-smoke gpu-rehearsal clean

CONSTRAINTS := constraints.txt

$(STAMP): pyproject.toml $(CONSTRAINTS)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c $(CONSTRAINTS) torch $(PIP_TORCH)
	$(BIN)/python -m pip install --quiet -c $(CONSTRAINTS) -e ".[study,dev]" $(PIP_TORCH)
	touch $(STAMP)

# The notebooks' kernel, paper-repro (paper_repro/common/console.py): ipykernel on this venv's Python with its
# own log at CRITICAL, so that papermill's console shows no kernel start-up warning.
KERNEL := $(VENV)/share/jupyter/kernels/paper-repro/kernel.json
$(KERNEL): paper_repro/kernelspec/kernel.json $(STAMP)
	$(BIN)/jupyter kernelspec install --sys-prefix --replace --name paper-repro --log-level=WARN paper_repro/kernelspec
	touch $@

install: $(STAMP) $(KERNEL)

test: install
	HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 $(BIN)/python -m pytest -n 2 $(PYTEST_ARGS)

test-slow: install
	HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 $(BIN)/python -m pytest -m slow $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports  # the package's layers (.importlinter)

bench: $(STAMP)
	HF_HUB_OFFLINE=1 $(BIN)/paper-repro bench ledger
	HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 OMP_NUM_THREADS=1 $(BIN)/paper-repro bench run
	HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 $(BIN)/paper-repro bench eval
	HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 OMP_NUM_THREADS=1 $(BIN)/paper-repro bench ladder
	HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 $(BIN)/paper-repro bench trl-flops

# Does the study reproduce? The whole cpu-tiny study recomputed from nothing into $(REPRODUCED) (git
# ignores it; killed and rerun, it finishes only what is missing): the stage notebooks executed with
# papermill, then the analysis; then compared with the committed study (paper-repro reproduce:
# run ids matched, the largest difference per metric and how many runs differ, the differing runs
# against the seed spread, every verdict that moved and every estimate outside its interval; its last
# line says bit for bit, within noise, or does not reproduce, and it fails only for the last).
# INTO=committed: the maintainer's path, into data/results/cpu-tiny/ and notebooks/executed/cpu-tiny/,
# finishing what is missing there (with every run committed, only the analysis runs).
# QUICK=1: a smoke run (1 seed, 3 cells, a quarter of the budget) into .../quick/ folders.
# the folder is paper-repro reproduce's to name (expanded when the recipe runs, after the install)
REPRODUCED = $(shell $(BIN)/paper-repro reproduce --profile cpu-tiny --where)
INTO ?=
RUN := HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 $(BIN)/paper-repro run --profile cpu-tiny --stage all $(RUN_FLAGS)
reproduce: install
ifneq ($(QUICK),)
	$(RUN)
else ifeq ($(INTO),committed)
	$(RUN)
else ifeq ($(INTO),)
	$(RUN) --results $(REPRODUCED) --executed $(REPRODUCED)/notebooks
	$(BIN)/paper-repro reproduce --profile cpu-tiny --results $(REPRODUCED)
else
	@echo "INTO=$(INTO): unknown; leave it unset (recompute into $(REPRODUCED) and compare) or INTO=committed" >&2; exit 2
endif

# The FLOP model against FlopCounterMode on real passes of three small models.
validate: $(STAMP)
	HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 $(BIN)/paper-repro validate --out data/results/cpu-tiny/flops_validation.csv

# Regenerate the cpu-tiny testbed (splits, tokenizer, policies S/M/L, PRM, base_models.csv, the PRM's error
# profile): 14 min on 2 cores (README).
models: install
	HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 $(BIN)/papermill notebooks/00_embedded_models.ipynb \
		notebooks/executed/cpu-tiny/00_embedded_models.ipynb

# On a machine with a CUDA GPU: a cpu-tiny cell on CUDA in bf16, and a vLLM colocate cell if vllm is
# installed (pip install -c constraints.txt -e ".[gpu]"); under 5 minutes; log and summary in gpu_smoke/.
gpu-smoke: $(STAMP)
	$(BIN)/paper-repro smoke --out gpu_smoke

# Before renting a GPU, on the CPU: Qwen2.5-1.5B/3B/7B and the PRM at their real widths, depth cut to 1, 2
# and 4 layers, one GRPO round of a gpu-paper cell per size, each phase's peak memory measured against the
# memory model and each pass's FLOPs against the ledger (docs/gpu-paper.md, "The rehearsal"); results in
# gpu_rehearsal/. After `make gpu-smoke` on a GPU: paper-repro rehearse --compare gpu_smoke/gpu_smoke.json
gpu-rehearsal: $(STAMP)
	HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 $(BIN)/paper-repro rehearse --out gpu_rehearsal

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
