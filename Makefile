# Two entry points (see README): `make demo` and `make test`.
# Both run scripts/setup.sh first, which is a no-op once packages are present.
BUILD ?= build
JOBS ?= $(shell nproc)
# ccache (installed by setup) keeps compiled objects in ~/.cache/ccache, outside
# the clone, keyed on paths relative to the clone: another clone or worktree of
# the same commit reuses them. Turn it off with CCACHE_DISABLE=1.
export CCACHE_BASEDIR := $(CURDIR)
export CCACHE_NOHASHDIR := 1
LAUNCHER = $(if $(shell command -v ccache),-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)

.PHONY: setup build images demo sim-demo test test-asan check-thread-safety clean

setup:
	./scripts/setup.sh

build: setup
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTESSERA_WERROR=ON $(LAUNCHER)
	cmake --build $(BUILD) -j $(JOBS)

# Tessera's images, built by buildah from deploy/images/Dockerfile with this
# build's artifacts, as OCI archives in $(BUILD)/images (no daemon, no registry).
images: build
	./scripts/build-images.sh $(BUILD) $(BUILD)/images

# The main job on its embedded default: a local control plane with
# tessera-scheduler as kube-scheduler's extender, simulated GPU nodes, one
# real node (as root; a sharing Deployment of real containers there) and the
# example workloads in examples/workloads. DEMO_KEEP=1 leaves it running;
# DEMO_FRONT_ENDS=gpushare,hami switches the compatibility front ends on.
demo: build
	./scripts/demo.sh $(BUILD)

# The simulator on the small synthetic trace in examples/synthetic, every
# policy, with a comparison table and a plot.
sim-demo: build
	./scripts/sim-demo.sh $(BUILD)

# Every test: the lock annotations checked by clang, the -Werror build and its
# images under ctest, then the unit and fuzz tests again under AddressSanitizer + UBSan.
test: check-thread-safety build images
	cd $(BUILD) && TESSERA_REQUIRE_IMAGES=1 ctest --output-on-failure -j $(JOBS)
	$(MAKE) test-asan

test-asan: setup
	cmake -S . -B $(BUILD)-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DTESSERA_WERROR=ON \
	  -DTESSERA_SANITIZE=ON -DTESSERA_BUILD_BENCH=OFF $(LAUNCHER)
	cmake --build $(BUILD)-asan -j $(JOBS)
	cd $(BUILD)-asan && ctest --output-on-failure -j $(JOBS) -L 'unit|fuzz'

# Lock discipline the compiler checks: clang-14's thread-safety analysis, as
# errors, over the libraries whose shared state names its lock
# (src/core/thread_annotations.h), the node agent's unit tests, the kubelet
# stand-in and the fake API server of unit tests. Compiles those targets only
# (-O0, no debug info, through ccache), in a build folder of its own; runs
# nothing.
TSA_TARGETS = tessera_core tessera_metrics tessera_nvml tessera_kube tessera_scheduler \
  tessera_scheduler_config tessera_scheduler_testing tessera_region tessera_cuda_logic tessera-cuda \
  core_thread_annotations_test tessera_arbiter tessera_node node_unit_test node_arbiter_test \
  tessera_kubelet_sim tessera_kube_fake kube_fake_api_test tessera_scheduler_kube tessera_dra dra_unit_test
check-thread-safety: setup
	cmake -S . -B $(BUILD)-tsa -G Ninja -DCMAKE_CXX_COMPILER=clang++-14 -DCMAKE_BUILD_TYPE=Debug \
	  -DCMAKE_CXX_FLAGS_DEBUG=-O0 -DTESSERA_THREAD_SAFETY=ON -DTESSERA_BUILD_BENCH=OFF $(LAUNCHER)
	cmake --build $(BUILD)-tsa -j $(JOBS) --target $(TSA_TARGETS)

clean:
	rm -rf $(BUILD) $(BUILD)-asan $(BUILD)-tsa
