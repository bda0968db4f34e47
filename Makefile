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
# instead of this machine's CPU.
ifeq ($(PORTABLE),1)
ARCH_FLAGS ?=
else
ARCH_FLAGS ?= -march=native
endif
OPT_FLAGS ?= -O3 $(ARCH_FLAGS)

export CGO_ENABLED := 1
export CGO_CPPFLAGS := -DNDEBUG -I$(OLLAMA_DIR)/llama/llama.cpp/include -I$(OLLAMA_DIR)/ml/backend/ggml/ggml/include
export CGO_CFLAGS := $(OPT_FLAGS)
export CGO_CXXFLAGS := $(OPT_FLAGS)

BIN := build/bin
MODELS := build/models
COMMANDS := $(notdir $(wildcard cmd/*))
# A stamp per flag set: the notice shows when llama.cpp is about to be compiled.
LLAMA_STAMP := build/.llama-$(shell echo '$(CGO_CPPFLAGS) $(CGO_CFLAGS) $(CGO_CXXFLAGS)' | cksum | cut -d' ' -f1)

.PHONY: all build test demo bench env clean cuda metal models bench-models llama

all: build

# llama compiles only llama.cpp (the slow part of a first build).
llama: $(LLAMA_STAMP)

$(LLAMA_STAMP):
	@echo "note: compiling llama.cpp through cgo (first build only: about 3-10 minutes on 2 cores; cached afterwards)"
	$(GO) build ./cgo/
	@mkdir -p build && touch $@

build: llama
	@mkdir -p $(BIN)
	$(GO) build -o $(BIN)/ ./cmd/...

test: llama
	$(GO) test -count=1 -timeout 30m ./...

$(MODELS)/demo.gguf:
	$(GO) run ./internal/cmd/mkmodels -out $(MODELS)

models: $(MODELS)/demo.gguf

bench-models: llama
	$(GO) run ./internal/cmd/mkmodels -out $(MODELS) -bench

demo: build models
	$(BIN)/llamagen --demo -m $(MODELS)/demo.gguf --threads 1

bench: build bench-models
	$(BIN)/llamabench --models $(MODELS) --json build/bench.json --chart build/bench.svg

# env prints the variables a Go build outside this Makefile needs:
#   eval "$$(make -s -C path/to/llamaloop env)" && go build ./...
env:
	@echo 'export CGO_ENABLED=$(CGO_ENABLED)'
	@echo "export CGO_CPPFLAGS='$(CGO_CPPFLAGS)'"
	@echo "export CGO_CFLAGS='$(CGO_CFLAGS)'"
	@echo "export CGO_CXXFLAGS='$(CGO_CXXFLAGS)'"

clean:
	rm -rf build/bin build/lib
	$(GO) clean -cache -testcache

# cuda builds ggml's CUDA backend from the pinned sources as a shared library
# into build/lib; run programs with LLAMALOOP_BACKEND_DIR=build/lib. Needs the
# CUDA toolkit and CMake; untested where no GPU exists.
CUDA_ARCH ?= native
cuda:
	third_party/build-gpu-backend.sh cuda "$(OLLAMA_DIR)" build/lib "$(CUDA_ARCH)"

# metal: on macOS llama.cpp's Metal backend is the default GPU path; see
# third_party/README.md.
metal:
	third_party/build-gpu-backend.sh metal "$(OLLAMA_DIR)" build/lib
