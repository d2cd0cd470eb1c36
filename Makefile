# A thin wrapper around CMake, as neovim's Makefile is: `make run` and `make test` install what
# is missing on a Debian 12 machine, configure, build, and run the demo or the tests.
BUILD ?= build
ASAN_BUILD ?= build-asan
CMAKE_FLAGS ?=
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
DEB_PACKAGES = cmake make gcc pkg-config libgsl-dev libyaml-dev libsqlite3-dev libopenblas-dev zlib1g-dev \
  dataset-fashion-mnist
# What only the tests need (not `make run`): Chromium renders `hetsim report` pages, Pillow
# reads its screenshots, Jupyter executes the notebooks in notebooks-data/, the sqlite3 shell
# checks rows from the CLI tests, Open MPI runs the sweep over ranks, and PyTorch (CPU) runs
# tools/hetsim_profile.py and bench/ddp_train.py in tests/cli_profile.sh, and g++ builds
# test_deviceless_cuda_kernels (the CUDA kernels under an emulation on the CPU). They are installed
# before configuring, so that the MPI sweep driver is built too.
TEST_DEB_PACKAGES = sqlite3 chromium python3-pil python3-matplotlib python3-pandas jupyter-nbconvert \
  python3-nbformat python3-ipykernel \
  openmpi-bin libopenmpi-dev \
  python3-torch python3-torchvision \
  g++
SUDO = $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: all deps test-deps install-debs build run test asan bench clean gpu-bundle fuzz valgrind

all: build

deps:
	@$(MAKE) --no-print-directory install-debs PKGS="$(DEB_PACKAGES)"

test-deps:
	@$(MAKE) --no-print-directory install-debs PKGS="$(TEST_DEB_PACKAGES)"

install-debs:
	@missing=$$(for p in $(PKGS); do dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing: $$missing"; \
	  $(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi

# A configure that fails (a library missing) leaves no cache behind, so that the next `make`
# configures again instead of building in a half-configured tree.
$(BUILD)/CMakeCache.txt: | deps
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS) || { rm -f $(BUILD)/CMakeCache.txt; exit 1; }

build: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

# The bundled demo: the LBB paper's 4-GPU server under synchronous SGD.
run: build
	./$(BUILD)/hetsim sim --cluster traces/lbb-4gpu.yaml --model resnet18 --policy ssgd \
	  --global-batch 256 --iterations 200 --db $(BUILD)/demo.db --trace-out $(BUILD)/demo-trace.json
	./$(BUILD)/hetsim query --db $(BUILD)/demo.db runs

test: test-deps build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

# The whole suite under AddressSanitizer and UndefinedBehaviorSanitizer.
asan: deps test-deps
	cmake -S . -B $(ASAN_BUILD) -DHETSIM_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug $(CMAKE_FLAGS)
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ctest --test-dir $(ASAN_BUILD) --output-on-failure -j $(JOBS)

bench: build
	./$(BUILD)/bench_events
	bash bench/bench_sim.sh $(BUILD)/hetsim

# Hardening runs that are not part of `make test` (docs/reliability.md): libFuzzer on the
# cluster YAML loader, the CSV trace loader, the IDX reader, `hetsim query`, the JSON reader,
# `calib import`, the simulator and the curves reader of `fit-convergence`, FUZZ_SECONDS per
# target (crash inputs replayed by test_fuzz_regress in every test run); and the whole suite
# under valgrind memcheck, which takes tens of minutes.
FUZZ_SECONDS ?= 600
fuzz:
	@$(MAKE) --no-print-directory install-debs PKGS="clang"
	bash tests/fuzz/run.sh $(FUZZ_SECONDS)

valgrind: build test-deps
	@$(MAKE) --no-print-directory install-debs PKGS="valgrind"
	bash tests/valgrind.sh $(BUILD)

# A build to carry to a GPU machine without our Debian libraries (docs/gpu.md).
GPU_BUILD ?= build-gpu
gpu-bundle: deps
	bash tools/gpu-build.sh $(GPU_BUILD)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)
