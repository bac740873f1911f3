# SPDX-License-Identifier: BSD-2-Clause
# Thin wrapper around CMake. `make test` is what CI runs.
BUILD      ?= build
BUILD_TYPE ?= RelWithDebInfo
JOBS       ?= $(shell nproc)
TEST_JOBS  ?= 2
CMAKE_ARGS ?=

.PHONY: all deps build install test demo asan tsan fuzz security-check certs format clean

all: build

deps:
	@scripts/deps

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) $(CMAKE_ARGS)

build: $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

# The libraries, headers, .pc files, CMake package, tools, man pages and the
# systemd unit under PREFIX (DESTDIR for packagers).
PREFIX ?= /usr/local
install: build
	DESTDIR=$(DESTDIR) cmake --install $(BUILD) --prefix $(PREFIX)

test: deps
	$(MAKE) --no-print-directory build
	cd $(BUILD) && ctest --output-on-failure -j $(TEST_JOBS) $(CTEST_ARGS)

demo: deps
	$(MAKE) --no-print-directory build
	scripts/demo $(BUILD)

# Sanitizer builds live in their own trees so they never mix with the default.
asan: deps
	$(MAKE) --no-print-directory test BUILD=build-asan BUILD_TYPE=Debug CMAKE_ARGS=-DQPG_SANITIZE=address

tsan: deps
	$(MAKE) --no-print-directory test BUILD=build-tsan BUILD_TYPE=Debug CMAKE_ARGS=-DQPG_SANITIZE=thread

# libFuzzer (clang) on the bootstrap parser and the framing, FUZZ_SECONDS each.
FUZZ_SECONDS ?= 60
fuzz: deps
	scripts/fuzz $(FUZZ_SECONDS)

# The attack/fault checks as a table (check, result, evidence).
security-check: deps
	$(MAKE) --no-print-directory build
	scripts/security-check $(BUILD)

certs:
	scripts/make-certs certs

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

clean:
	rm -rf build build-asan build-tsan build-fuzz
