# kiln — the two commands a newcomer needs:
#   make run    install what is missing, build, compile the default recipe and show the package
#   make test   install what is missing, build, run every test (GPU tests skip without a GPU)
# Other targets: make build, make deps, make test-asan (ASan+UBSan build and tests), make clean.

BUILD    ?= build
JOBS     ?= $(shell nproc 2>/dev/null || echo 2)
# Warnings are errors in CI (CI=true) and wherever WERROR=ON is given.
WERROR   ?= $(if $(filter true,$(CI)),ON,OFF)
DEB_PKGS := cmake make gcc pkg-config liblua5.4-dev libsqlite3-dev sqlite3 llvm-22-dev lld-22 libzstd-dev
SUDO     := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: all deps build run test test-asan clean

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

build: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

run: build
	$(BUILD)/kiln compile recipes/llama.lua -o $(BUILD)/model.kiln -v
	$(BUILD)/kiln inspect $(BUILD)/model.kiln

test: build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

test-asan: deps
	cmake -S . -B $(BUILD)-asan -DKILN_WERROR=$(WERROR) -DKILN_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug
	cmake --build $(BUILD)-asan -j $(JOBS)
	ctest --test-dir $(BUILD)-asan --output-on-failure -j $(JOBS)

clean:
	rm -rf $(BUILD) $(BUILD)-asan
