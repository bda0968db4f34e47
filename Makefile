# llamaloop build. Every target exports the same cgo flags, so Go's build cache
# compiles llama.cpp once and reuses it.
SHELL := /bin/bash
GO ?= go

OLLAMA_MODULE := github.com/ollama/ollama
OLLAMA_DIR := $(shell $(GO) mod download $(OLLAMA_MODULE) >/dev/null 2>&1; $(GO) list -m -f '{{.Dir}}' $(OLLAMA_MODULE))
ifeq ($(OLLAMA_DIR),)
$(error cannot locate the $(OLLAMA_MODULE) module: run 'go mod download' and check the network to the Go module proxy)
endif

# PORTABLE=1 builds for baseline x86-64 (or the toolchain's default elsewhere)
# instead of this machine's CPU, into build/bin-portable (beside the native
# build/bin, which it leaves alone).
ifeq ($(PORTABLE),1)
ARCH_FLAGS ?=
BIN := build/bin-portable
else
ARCH_FLAGS ?= -march=native
BIN := build/bin
endif
OPT_FLAGS ?= -O3 $(ARCH_FLAGS)

# GGML_USE_CPU_REPACK is what upstream's CMake defines for the CPU backend
# (GGML_CPU_REPACK, on by default) and the module's cgo files do not: it lets
# ggml repack q4_0, q4_K and iq4_nl weights at load time into the interleaved
# layouts of its AVX2/AVX-512/NEON kernels (about twice the 4-bit speed).
# GGML_USE_LLAMAFILE, upstream's other CPU definition, the module already sets.
#
# When the flags target AMX (__AMX_INT8__ and __AVX512VNNI__: -march=native on
# a Sapphire Rapids or later Xeon, -march=sapphirerapids), ggml's CPU backend
# refers to its AMX kernels, which cgo/amx.cpp compiles from the module by
# path; their includes need two more folders, searched after all others. Other
# flags leave CGO_CPPFLAGS as it was, and so Go's build cache.
CC ?= cc
TARGETS_AMX := $(shell $(CC) $(OPT_FLAGS) -dM -E -x c /dev/null 2>/dev/null | grep -cE '__(AMX_INT8|AVX512VNNI)__ ')
AMX_CPPFLAGS := $(if $(filter 2,$(TARGETS_AMX)),-idirafter $(OLLAMA_DIR)/ml/backend/ggml/ggml/src -idirafter $(OLLAMA_DIR)/ml/backend/ggml/ggml/src/ggml-cpu)
export CGO_ENABLED := 1
export CGO_CPPFLAGS := -DNDEBUG -DGGML_USE_CPU_REPACK -I$(OLLAMA_DIR)/llama/llama.cpp/include -I$(OLLAMA_DIR)/ml/backend/ggml/ggml/include$(if $(AMX_CPPFLAGS), $(AMX_CPPFLAGS))
export CGO_CFLAGS := $(OPT_FLAGS)
export CGO_CXXFLAGS := $(OPT_FLAGS)

# LLAMA_CPP=DIR builds against a llama.cpp the user built and installed with
# CMake (cmake --install --prefix DIR: include/, lib/; CPU, CUDA or Metal,
# static or shared) instead of the pinned module: the build tag
# llamacpp_external, with the headers and libraries build/llama-probe.sh finds
# in DIR. The probe stops the build with one line naming what DIR lacks, and
# chooses between the C API generations cgo/compat.h knows (llama.cpp
# ec98e2002 to 3f545becc). Binaries go to build/bin-llamacpp; the default
# build's flags, and so its cache, are untouched.
LLAMA_CPP ?=
ifneq ($(LLAMA_CPP),)
LLAMA_PROBE := $(shell build/llama-probe.sh '$(LLAMA_CPP)' 2>&1)
ifneq ($(filter llamaloop:%,$(firstword $(LLAMA_PROBE))),)
$(error $(LLAMA_PROBE))
endif
export CGO_CPPFLAGS := $(shell echo '$(LLAMA_PROBE)' | cut -d'|' -f1)
export CGO_LDFLAGS := $(shell echo '$(LLAMA_PROBE)' | cut -d'|' -f2)
export GOFLAGS := $(strip $(GOFLAGS) -tags=llamacpp_external)
BIN := build/bin-llamacpp
endif

MODELS := build/models
COMMANDS := $(notdir $(wildcard cmd/*))
# A stamp per flag set: the notice shows when llama.cpp is about to be compiled.
LLAMA_STAMP := build/.llama-$(shell echo '$(CGO_CPPFLAGS) $(CGO_CFLAGS) $(CGO_CXXFLAGS)' | cksum | cut -d' ' -f1)

# The packages whose tests run llama.cpp (directly or through a command they
# build): test-asan and test-gpu run these.
LLAMA_TEST_PKGS = $(shell $(GO) list -test -f '{{if .ForTest}}{{.ForTest}} {{join .Deps " "}}{{end}}' ./... | grep ' github.com/llamaloop/llamaloop/cgo' | cut -d' ' -f1 | sort -u)

# AddressSanitizer: go test -asan instruments Go and the C files; the C++
# flags need it too. -O1 keeps the instrumented build of llama.cpp quick.
ASAN_FLAGS := -O1 $(ARCH_FLAGS) -fno-omit-frame-pointer
ASAN_STAMP := build/.llama-asan-$(shell echo '$(CGO_CPPFLAGS) $(ASAN_FLAGS)' | cksum | cut -d' ' -f1)

.PHONY: all build test test-external test-asan test-gpu demo bench env clean cuda metal models bench-models llama gpu-bundle check-arch cpu-variants campaign

all: build

# llama compiles only llama.cpp (the slow part of a first build).
llama: $(LLAMA_STAMP)

$(LLAMA_STAMP):
	@echo "note: $(if $(LLAMA_CPP),compiling the cgo layer against the llama.cpp in $(LLAMA_CPP) (seconds),compiling llama.cpp through cgo (first build only: about 3-10 minutes on 2 cores; cached afterwards))"
	$(GO) build ./cgo/
	@mkdir -p build && touch $@

build: llama
	@mkdir -p $(BIN)
	$(GO) build -o $(BIN)/ ./cmd/...

# PURE_TEST_PKGS build and pass without cgo too: test runs them once more
# with CGO_ENABLED=0, so that they stay buildable without llama.cpp.
PURE_TEST_PKGS := ./internal/serve/ ./internal/testkit/scripted/

test: llama
	$(GO) test -count=1 -timeout 30m ./...
	CGO_ENABLED=0 $(GO) test -count=1 -timeout 10m $(PURE_TEST_PKGS)

# test-external runs the llama.cpp-backed tests against the llama.cpp
# installed in LLAMA_CPP (make test-external LLAMA_CPP=DIR); the validation's
# tables are those of the external engine (llamacpp/validate_tables_*.go), and
# LLAMA_CPP_SRC=SRC names the sources they are checked against (the tests that
# read llama.cpp's sources skip without it).
test-external: llama
	@test -n '$(LLAMA_CPP)' || { echo "test-external: set LLAMA_CPP=DIR, a llama.cpp installed with cmake --install" >&2; exit 1; }
	LLAMALOOP_LLAMA_SRC='$(LLAMA_CPP_SRC)' $(GO) test -count=1 -timeout 30m $(LLAMA_TEST_PKGS)

# test-asan runs the llama.cpp-backed tests under AddressSanitizer (and its
# leak check at exit): the CPU hides memory errors that a GPU turns into
# crashes. It compiles llama.cpp once more, instrumented.
test-asan:
	@test -f $(ASAN_STAMP) || echo "note: compiling llama.cpp with AddressSanitizer (first run only: about 5 minutes on 2 cores)"
	CGO_CFLAGS='$(ASAN_FLAGS)' CGO_CXXFLAGS='$(ASAN_FLAGS) -fsanitize=address' \
		LSAN_OPTIONS=suppressions=$(CURDIR)/build/lsan.supp:print_suppressions=0 \
		$(GO) test -asan -ldflags='-s=false -w=false' -count=1 -timeout 60m $(LLAMA_TEST_PKGS)
	@mkdir -p build && touch $(ASAN_STAMP)

# check-arch compiles and links the commands and the llamacpp tests for
# x86-64-v2, x86-64-v3, znver4, sapphirerapids and PORTABLE=1 (ARCHES=... for
# some), and runs what this CPU can execute (build/check-arch.sh says how).
# CPU_VARIANTS=build/lib (after make cpu-variants) runs the portable build's
# tests once more with the variants loaded.
ARCHES ?=
CPU_VARIANTS ?=
check-arch:
	CPU_VARIANTS='$(CPU_VARIANTS)' build/check-arch.sh $(ARCHES)

# test-gpu runs the llama.cpp-backed tests with every layer of every test
# model offloaded to the GPU backend in build/lib (make cuda first).
GPU_LAYERS ?= -1
test-gpu: llama
	@ls build/lib/libggml-*.so >/dev/null 2>&1 || { echo "test-gpu: no GPU backend in build/lib: run 'make cuda' first" >&2; exit 1; }
	LLAMALOOP_BACKEND_DIR=$(CURDIR)/build/lib LLAMALOOP_TEST_GPU_LAYERS=$(GPU_LAYERS) \
		$(GO) test -count=1 -timeout 30m $(LLAMA_TEST_PKGS)

$(MODELS)/demo.gguf:
	$(GO) run ./internal/cmd/mkmodels -out $(MODELS)

models: $(MODELS)/demo.gguf

# bench-models writes the benchmark-shaped models: BENCH_MODELS=all (the
# default) bench-small and bench-1b, each in F16, q8_0, q4_0 and q4_K_M,
# about 5.9 GB in all; BENCH_MODELS=small only bench-small's four, 0.58 GB.
BENCH_MODELS ?= all
comma := ,
bench-models: llama
	@echo "note: writing the benchmark models into $(MODELS): $(if $(filter small,$(BENCH_MODELS)),bench-small alone$(comma) 0.58 GB,about 5.9 GB (BENCH_MODELS=small writes bench-small alone$(comma) 0.58 GB))"
	$(GO) run ./internal/cmd/mkmodels -out $(MODELS) $(if $(filter small,$(BENCH_MODELS)),-bench-small,-bench)

demo: build models
	$(BIN)/llamagen --demo -m $(MODELS)/demo.gguf --threads 1

# LLAMA_BENCH=PATH adds llama.cpp's own llama-bench at PATH for a ratio column.
bench: build bench-models
	$(BIN)/llamabench --models $(MODELS) --json build/bench.json --chart build/bench.svg $(if $(LLAMA_BENCH),--llama-bench $(LLAMA_BENCH))

# campaign runs the hostile-input campaign (internal/cmd/campaign): hostile
# chat templates served by llamaserve with a neighbour request, T5 files and
# concurrent T5 calls, damaged backend folders, mutated GGUF files and mutated
# projector (mmproj) files, each
# child under an address-space limit and a timeout; it prints crash kinds,
# hangs and peak RSS per family (about 2-3 minutes on 2 cores, and about 5
# more for the 500 mutated projectors; 11 before the bounded template engine,
# whose crashing templates take longer).
# CAMPAIGN_FLAGS scales it, e.g. CAMPAIGN_FLAGS='-mutations 3000 -jobs 8'.
CAMPAIGN_FLAGS ?=
campaign: build models
	$(GO) test -c -o $(BIN)/llamacpp.test ./llamacpp
	$(GO) run ./internal/cmd/campaign $(CAMPAIGN_FLAGS)

# env prints the variables a Go build outside this Makefile needs:
#   eval "$$(make -s -C path/to/llamaloop env)" && go build ./...
env:
	@echo 'export CGO_ENABLED=$(CGO_ENABLED)'
	@echo "export CGO_CPPFLAGS='$(CGO_CPPFLAGS)'"
	@echo "export CGO_CFLAGS='$(CGO_CFLAGS)'"
	@echo "export CGO_CXXFLAGS='$(CGO_CXXFLAGS)'"
	$(if $(LLAMA_CPP),@echo "export CGO_LDFLAGS='$(CGO_LDFLAGS)'")
	$(if $(LLAMA_CPP),@echo "export GOFLAGS='$(GOFLAGS)'")

# clean removes what the targets wrote into build/ (binaries, GPU and CPU
# backends, models, benchmark output), and nothing outside it: Go's build
# cache is shared by every project of this user (go clean -cache empties it
# for all of them; run it yourself to recompile llama.cpp from scratch).
clean:
	rm -rf build/bin build/bin-portable build/lib build/cmake-* build/gpu-bundle build/gpu-bundle.tar.xz \
		build/models build/bench.json build/bench.svg build/arch

# cuda builds ggml's CUDA backend from the pinned sources as a shared library
# into build/lib (with the libggml-base.so it needs, found through $$ORIGIN);
# run programs with LLAMALOOP_BACKEND_DIR=build/lib. Needs the CUDA toolkit
# and CMake.
CUDA_ARCH ?= native
cuda:
	build/backend.sh cuda "$(OLLAMA_DIR)" build/lib "$(CUDA_ARCH)"

# cpu-variants builds the module's x86-64 CPU backends (baseline, SSE4.2, AVX,
# AVX2, AVX-512, AVX-512 VNNI, AVX-VNNI) as shared libraries into build/lib:
# a program built with PORTABLE=1 and run with LLAMALOOP_BACKEND_DIR naming
# that folder computes with the best of them that the CPU runs. Needs CMake.
cpu-variants:
	build/backend.sh cpu "$(OLLAMA_DIR)" build/lib

# metal: on macOS llama.cpp's Metal backend is the default GPU path; this
# prints the recipe.
metal:
	build/backend.sh metal "$(OLLAMA_DIR)" build/lib

# gpu-bundle packs what a GPU machine without Go needs to run build/gpu-check.sh:
# the commands, the model writer and the llama.cpp-backed test binaries
# (x86-64-v3, stripped) and the module's CMake project, in build/gpu-bundle.tar.xz.
gpu-bundle:
	@echo "note: compiles llama.cpp once more for x86-64-v3 (first run only: about 3-5 minutes on 2 cores)"
	build/gpu-bundle.sh "$(OLLAMA_DIR)" build/gpu-bundle $(LLAMA_TEST_PKGS)
