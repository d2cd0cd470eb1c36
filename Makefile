# A thin wrapper around CMake, as neovim's Makefile is: `make run` and `make test` install what
# is missing on a Debian 12 machine, configure, build, and run the demo or the tests.
BUILD ?= build
ASAN_BUILD ?= build-asan
CMAKE_FLAGS ?=
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
DEB_PACKAGES = cmake make gcc pkg-config libgsl-dev libyaml-dev libsqlite3-dev libopenblas-dev zlib1g-dev \
  dataset-fashion-mnist
SUDO = $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: all deps build run test asan bench clean

all: build

deps:
	@missing=$$(for p in $(DEB_PACKAGES); do dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing: $$missing"; \
	  $(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi

$(BUILD)/CMakeCache.txt: | deps
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS)

build: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

# The bundled demo: the LBB paper's 4-GPU server under synchronous SGD.
run: build
	./$(BUILD)/hetsim sim --cluster traces/lbb-4gpu.yaml --model resnet18 --policy ssgd \
	  --global-batch 256 --iterations 200 --db $(BUILD)/demo.db --trace-out $(BUILD)/demo-trace.json
	./$(BUILD)/hetsim query --db $(BUILD)/demo.db runs

test: build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

# The whole suite under AddressSanitizer and UndefinedBehaviorSanitizer.
asan: deps
	cmake -S . -B $(ASAN_BUILD) -DHETSIM_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug $(CMAKE_FLAGS)
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ctest --test-dir $(ASAN_BUILD) --output-on-failure -j $(JOBS)

bench: build
	./$(BUILD)/bench_events
	bash bench/bench_sim.sh $(BUILD)/hetsim

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)
