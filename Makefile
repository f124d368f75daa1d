# warden — the top-level commands. The README's quick start is exactly two of them:
#
#   make run    install dependencies, build the release preset, run the main job
#   make test   install dependencies, then the whole check: sanitizer build + tests,
#               release build, install, a separate project built against that install,
#               a build with one engine, and the Debian packages built, installed and checked
#
# Other targets: deps, check, release, asan, test-slow, install, consumer, components,
# package, format, clean.
# Every step is a target of its own, so when one fails make names it in its error line
# ("make: *** [Makefile:NN: asan-ctest] Error 8").

# Run recipes with bash in strict mode: a failing command in a pipeline fails the step.
SHELL := bash
.SHELLFLAGS := -euo pipefail -c
# The steps build on each other and most use both cores; never run two at once, except
# the two that run beside ctest (asan-ctest-beside).
.NOTPARALLEL:
.DEFAULT_GOAL := help

JOBS ?= 2
RELEASE_DIR := build/release
PACKAGE_DIR := build/package
STAGE_DIR := $(CURDIR)/build/stage
CONSUMER_DIR := build/consumer

# The main job of `make run`: warden's lock server in the foreground, on 127.0.0.1:7380
# with its durable state in ./data. Stop it with Ctrl-C (state is kept).
RUN_CMD = $(RELEASE_DIR)/src/server/wardend --listen 127.0.0.1:7380 --data-dir ./data

# $(call say,TEXT) prints a step header and notes the step's start in STEP_LOG, from which
# `make test` prints every step's time at its end (scripts/step-times.sh). TEXT must not
# contain a comma (make's argument separator) or a single quote.
STEP_LOG := build/steps.log
say = @printf '\n==> %s\n' '$(1)'; mkdir -p build; printf '%s %s\n' "$$(date +%s)" '$(1)' >> $(STEP_LOG)

.PHONY: help deps run test test-steps test-slow check fuzz release asan asan-ctest \
        asan-ctest-beside install \
        consumer consumer-run components package package-check format clean

help:
	@echo 'make run        build the release preset and run the main job ($$RUN_CMD)'
	@echo 'make test       sanitizer build + tests, release build, install, consumer check, packages'
	@echo 'make package    the Debian packages in build/package (libwarden0, one per engine, warden, wardend)'
	@echo 'make components a redis-only build, installed and used by examples/consumer'
	@echo 'make check      the quick loop: unit tests and one instance of each engine'"'"'s conformance'
	@echo 'make test-slow  the tests labelled "slow" on the sanitizer build'
	@echo 'make format     clang-format every C++ source in place'
	@echo 'make clean      remove build/'

deps:
	$(call say,dependencies)
	bash scripts/install-deps.sh

run: deps release
	$(call say,run: the main job)
	$(RUN_CMD)

# Every step of the whole check, timed: the table of step times ends the output, passed
# or failed.
test:
	bash scripts/step-times.sh $(STEP_LOG) $(BESIDE_STEP_LOG) $(MAKE) --no-print-directory test-steps

# The fuzz step and the release build run beside ctest (asan-ctest-beside); the steps
# after it take the release build as done (-o release) rather than configure it again.
test-steps: deps asan asan-ctest-beside
	$(MAKE) --no-print-directory -o deps -o release install consumer consumer-run components \
	  package package-check
	$(call say,make test: all steps passed)

# Debug + AddressSanitizer + UndefinedBehaviorSanitizer, warnings as errors. Built with
# clang and line tables only (-gline-tables-only: enough for the sanitizers' stack
# traces): about a third less compile time than g++ with full debug information. The
# release and package builds keep g++, so both compilers see every source of the library.
asan:
	$(call say,build: asan preset)
	cmake --preset asan
	cmake --build --preset asan -j $(JOBS)

# The preset excludes the tests labelled "slow"; they run in `make test-slow`. Each
# GoogleTest executable runs as a few shards, each one process for many cases
# (tests/CMakeLists.txt). Most cases wait on servers and timers, not on the CPU, so CTest
# runs more shards than there are cores (CTEST_JOBS); the CPU-heavy ones say so
# (PROCESSORS) and get room.
#
# scripts/test-report.py then names every case with its result in one JUnit report
# (CASES_JUNIT), checks that every case each executable lists has one, and prints the
# cases per label. A skipped case counts as passed, so the report is checked too: a skip
# that tests/allowed-skips.txt does not list (with the pinned capability it stems from)
# fails this step, naming the case. The step fails after all three ran if any failed.
CTEST_JOBS ?= 4
CTEST_JUNIT := build/asan/ctest-junit.xml
CASES_JUNIT := build/asan/test-cases.xml
asan-ctest: asan
	$(call say,ctest: asan preset (without label slow))
	failed=0; \
	ctest --preset asan -j $(CTEST_JOBS) --output-junit $(CURDIR)/$(CTEST_JUNIT) || failed=1; \
	python3 scripts/test-report.py build/asan $(CTEST_JUNIT) $(CASES_JUNIT) || failed=1; \
	python3 scripts/check-skips.py $(CASES_JUNIT) tests/allowed-skips.txt || failed=1; \
	exit $$failed

# The preset's own filter excludes "slow" and "check"; -LE '^$$' (a label no test has)
# lifts that.
test-slow: deps asan
	$(call say,ctest: asan preset (label slow only))
	ctest --preset asan -L '^slow$$' -LE '^$$' -j $(JOBS)

# The quick loop while developing (a few minutes): the unit tests, and the conformance
# suite on one instance of each engine (mem://, warden://, redis://, etcd://, zk://,
# redlock://, postgres://, mysql://; label "check"). CI runs `make test`: everything.
check: deps asan
	$(call say,ctest: asan preset (labels unit and check))
	ctest --preset asan -L '^(unit|check)$$' -LE '^$$' -j $(CTEST_JOBS)

# The libFuzzer targets (clang) are built here, in the asan build directory (they are not
# part of its `all`, so the tests do not wait for them); each runs for a bounded 5 s
# (WARDEN_FUZZ_SECONDS) from its seed corpus (fuzz/corpus/<target>), two at a time. Their replays already ran
# in asan-ctest. The targets: wardend's request parser and dispatcher; engine URIs and the
# engines' config parsers; sequencers; wardend's state file, table snapshot and users
# file; the torture history reader; the RESP clients' reading of replies (a server that
# answers garbage).
fuzz: asan
	$(call say,fuzz: libFuzzer targets (built then run 5 s each))
	cmake --build --preset asan -j $(JOBS) --target warden_fuzzers
	ctest --preset asan -L '^fuzz$$' -LE '^$$' --output-on-failure -j $(JOBS)

# ctest's shards spend most of their time waiting on servers and timers, not on the
# cores, so `make test` runs the fuzz step (its build included) and the release build
# beside ctest rather than after it (scripts/beside.sh; their output follows ctest's, and
# their times are a table of their own at the end). ctest is held to pass beside two CPU
# hogs for its whole length (docs/testing.md, "Loaded runs"), more than these two take.
# The sub-makes take the asan build as done (-o asan): it was built just before.
BESIDE_STEP_LOG := build/steps-beside.log
asan-ctest-beside: asan
	bash scripts/beside.sh build/beside.log $(BESIDE_STEP_LOG) \
	  '$(MAKE) --no-print-directory -o asan STEP_LOG=$(BESIDE_STEP_LOG) fuzz release' \
	  $(MAKE) --no-print-directory -o asan asan-ctest

# The release and package builds compile the same sources with the same flags (they
# differ in where `cmake --install` puts files, not in what is compiled), so the second
# takes its objects from the first through ccache (kept in build/ccache; paths are
# rewritten relative to the checkout, so the two build directories share entries).
CCACHE := -DCMAKE_CXX_COMPILER_LAUNCHER=ccache
export CCACHE_DIR := $(CURDIR)/build/ccache
export CCACHE_BASEDIR := $(CURDIR)
export CCACHE_NOHASHDIR := 1

release:
	$(call say,build: release preset)
	cmake --preset release $(CCACHE)
	cmake --build --preset release -j $(JOBS)

# A fresh staging prefix each time, so files that are no longer installed cannot hide
# a broken install rule.
install: release
	$(call say,install: $(RELEASE_DIR) -> build/stage)
	rm -rf $(STAGE_DIR)
	cmake --install $(RELEASE_DIR) --prefix $(STAGE_DIR)

# examples/consumer is a separate project that sees warden only through the installed
# package (find_package and pkg-config), like a user's project would. Its programs find
# libwarden.so through the RPATH CMake sets for the build tree.
consumer: install
	$(call say,consumer: build examples/consumer against build/stage)
	rm -rf $(CONSUMER_DIR)
	cmake -S examples/consumer -B $(CONSUMER_DIR) -G Ninja -DCMAKE_BUILD_TYPE=Release \
	  -DCMAKE_PREFIX_PATH=$(STAGE_DIR)
	cmake --build $(CONSUMER_DIR) -j $(JOBS)

consumer-run: consumer
	$(call say,consumer: run against the installed libwarden)
	PKG_CONFIG_PATH=$(STAGE_DIR)/lib/pkgconfig pkg-config --cflags --libs warden warden-redis
	$(STAGE_DIR)/bin/warden --version
	$(CONSUMER_DIR)/warden_consumer
	$(CONSUMER_DIR)/warden_consumer_pc
	$(CONSUMER_DIR)/warden_asio_lock
	$(CONSUMER_DIR)/warden_engines $$(cat $(CONSUMER_DIR)/engines.txt)
	$(CONSUMER_DIR)/warden_engines_pc $$(cat $(CONSUMER_DIR)/engines.txt)

# Engines as components: a release build with WARDEN_ENGINES=redis (its objects come
# from the release build's through ccache), installed and used by examples/consumer
# with COMPONENTS redis. See scripts/check-components.sh.
components: release
	$(call say,components: a redis-only build and install)
	cmake --preset release-redis $(CCACHE) --no-warn-unused-cli
	cmake --build --preset release-redis -j $(JOBS)
	bash scripts/check-components.sh build/release-redis $(CURDIR)/build/stage-redis \
	  build/consumer-redis

# The Debian packages (libwarden0, libwarden-dev, warden, wardend with its systemd unit,
# config file and system user): a release build laid out for /usr and /etc (the package
# preset), then CPack. See cmake/package.cmake.
package: deps
	$(call say,package: Debian packages in $(PACKAGE_DIR))
	cmake --preset package $(CCACHE)
	cmake --build --preset package -j $(JOBS)
	rm -f $(PACKAGE_DIR)/*.deb
	cd $(PACKAGE_DIR) && cpack
	ls -l $(PACKAGE_DIR)/*.deb

# Installs the packages (dpkg -i as root, else unpacks them), runs the packaged wardend
# from its packaged config, verifies the unit, purges. See scripts/check-package.sh.
package-check: package
	$(call say,package: install and check)
	bash scripts/check-package.sh $(PACKAGE_DIR)

format:
	find $(wildcard include src tests bench examples) -type f \( -name '*.h' -o -name '*.cc' \) -print0 \
	  | xargs -0 -r clang-format -i

clean:
	rm -rf build
