# The two entry points (see README): `make demo` and `make test`. Both do all setup on a
# fresh Debian machine: install packages, configure, build.
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: demo test deps build fuzz clean

deps:
	@bash scripts/install-deps.sh

$(BUILD)/build.ninja: | deps
	cmake -S . -B $(BUILD) -G Ninja $(CMAKE_FLAGS)

build: deps $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS)

test: build
	bash scripts/run-tests.sh $(BUILD)

# The demo needs only the `moerl` binary, not the test suite.
demo: deps $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS) --target moerl
	bash scripts/demo.sh $(BUILD)

clean:
	rm -rf $(BUILD) build-fuzz
