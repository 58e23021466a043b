# verdict — run `make help` for the targets.

GO         ?= go
# CPU_TARGET is the -march for llama.cpp and ggml: native for local builds,
# x86-64-v3 (AVX2/FMA/F16C) for portable images. Never build without it:
# the engine is ~33x slower without SIMD.
CPU_TARGET ?= native
BIN        ?= bin
DATA       ?= .verdict
# LLAMA picks the llama.cpp that bin/verdict links:
#   module   — the llama.cpp that the Go module github.com/ollama/ollama
#              v0.17.4 vendors, compiled by cgo (the default)
#   upstream — the release pinned in scripts/llama.cpp/pin, built with
#              CMake into $(LLAMA_DIR) (knows qwen35 and newer)
LLAMA      ?= module
# Where the pinned upstream source and its builds live (shared by every
# checkout that points here; .ci/run uses a cache outside the clone).
LLAMA_DIR  ?= $(DATA)/llama.cpp
# Packages with concurrency, also tested under the race detector.
RACE_PKGS  ?= ./engine/... ./worker/... ./queue/... ./sink/... ./router/... ./server/... ./lambda/...

# LLAMA_LINK (upstream route): static — one self-contained binary (the
# default); dynamic — shared libllama/ggml with ggml's backends as modules
# loaded at start from beside libggml (the images: `make dist`).
LLAMA_LINK ?= static
# GPU=cuda adds ggml's CUDA backend for CUDA_ARCHS (the SageMaker GPU
# families: T4 75, A10G 86, L4/L40S 89, H100/H200 90); it needs nvcc.
GPU        ?=
CUDA_ARCHS ?= 75;86;89;90
CUDA_HOME  ?= /usr/local/cuda
# OPENMP (upstream route): off — ggml's own thread pool (the default,
# measurably faster here: README, Performance); on — libgomp, llama.cpp's
# CMake default (and the peer llama-server's).
OPENMP     ?= off

LLAMA_TREE   := $(shell sed -n 's/^tree=//p' scripts/llama.cpp/pin | cut -c1-12)
# The same name scripts/llama.cpp/build.sh gives the configuration.
LLAMA_CONFIG := $(LLAMA_TREE)-$(CPU_TARGET)$(if $(filter off,$(OPENMP)),-noomp)$(if $(filter dynamic,$(LLAMA_LINK)),-dl)$(if $(GPU),-$(GPU)-$(subst ;,_,$(CUDA_ARCHS)))
LLAMA_PREFIX ?= $(abspath $(LLAMA_DIR))/$(LLAMA_CONFIG)
ifeq ($(LLAMA_LINK),static)
LLAMA_LIBS   ?= -lllama -lggml -lggml-cpu $(if $(GPU),-lggml-cuda) -lggml-base $(if $(GPU),-L$(CUDA_HOME)/lib64 -lcudart -lcublas -lcublasLt -lcuda)
else ifeq ($(LLAMA_LINK),dynamic)
# Backend modules are loaded at run time, never linked. The binary finds
# the libraries in ../lib beside it (dist/) or in the prefix (tests).
LLAMA_LIBS   ?= -lllama -lggml -lggml-base -Wl,-rpath,$$ORIGIN/../lib -Wl,-rpath,$(LLAMA_PREFIX)/lib
else
$(error LLAMA_LINK=$(LLAMA_LINK): want static or dynamic)
endif
# Tests with real tokenizers read llama.cpp's vocab-only GGUFs from here.
export VERDICT_LLAMA_SRC := $(abspath $(LLAMA_DIR))/src

export CGO_ENABLED  := 1
export CGO_CFLAGS   := -O3 -march=$(CPU_TARGET)
export CGO_CXXFLAGS := -O3 -march=$(CPU_TARGET)
ifeq ($(LLAMA),module)
TAGS       ?= llamacpp
OLLAMA_DIR := $(shell $(GO) mod download github.com/ollama/ollama >/dev/null 2>&1; $(GO) list -m -f '{{.Dir}}' github.com/ollama/ollama 2>/dev/null)
export CGO_CPPFLAGS := -I$(OLLAMA_DIR)/llama/llama.cpp/include -I$(OLLAMA_DIR)/ml/backend/ggml/ggml/include
LLAMA_DEP  := llama-src
BUILD_DEP  :=
else ifeq ($(LLAMA),upstream)
TAGS       ?= llamacpp,upstream
# The peer benchmark's llama-server (make llama-server), for its test.
export VERDICT_LLAMA_SERVER := $(abspath $(LLAMA_DIR))/$(LLAMA_TREE)-$(CPU_TARGET)-server/bin/llama-server
export CGO_CPPFLAGS := -I$(LLAMA_PREFIX)/include
export CGO_LDFLAGS  := -L$(LLAMA_PREFIX)/lib $(LLAMA_LIBS) -lstdc++ -lm $(if $(filter on,$(OPENMP)),-fopenmp) -lpthread
LLAMA_DEP  := llama-lib llama-server
BUILD_DEP  := llama-lib
else
$(error LLAMA=$(LLAMA): want module or upstream)
endif

.DEFAULT_GOAL := help

## help: list the targets
.PHONY: help
help:
	@grep -E '^## ' $(MAKEFILE_LIST) | sed -e 's/^## /  /' | column -t -s ':'

## build: build bin/verdict with embedded llama.cpp (LLAMA=module|upstream, CPU_TARGET=native)
.PHONY: build
build: $(BUILD_DEP)
	$(GO) build -tags $(TAGS) -o $(BIN)/verdict ./cmd/verdict

## llama-src: fetch the pinned upstream llama.cpp source (verified by tree hash) into LLAMA_DIR
.PHONY: llama-src
llama-src:
	@LLAMA_DIR=$(LLAMA_DIR) scripts/llama.cpp/source.sh >/dev/null

## llama-lib: build the pinned upstream libllama + ggml with CMake (CPU_TARGET) into LLAMA_DIR
.PHONY: llama-lib
llama-lib:
	@LLAMA_DIR=$(LLAMA_DIR) LLAMA_PREFIX=$(LLAMA_PREFIX) CPU_TARGET=$(CPU_TARGET) LINK=$(LLAMA_LINK) OPENMP=$(OPENMP) GPU=$(GPU) CUDA_ARCHS='$(CUDA_ARCHS)' scripts/llama.cpp/build.sh >/dev/null

## image-deps: the images' build-stage tools (CMake, Ninja, git, CA certificates); installs what is missing
.PHONY: image-deps
image-deps:
	@scripts/image/build-deps.sh

## dist: the images' files in DIST (bin/verdict, lib/ with libllama, ggml and its backend modules): the upstream route, LLAMA_LINK=dynamic, CPU_TARGET (x86-64-v3 in the images), GPU=cuda adds CUDA
DIST ?= dist
.PHONY: dist
dist:
	@$(MAKE) --no-print-directory dist/files LLAMA=upstream LLAMA_LINK=dynamic

.PHONY: dist/files
dist/files: llama-lib
	@test "$(LLAMA)/$(LLAMA_LINK)" = upstream/dynamic || { echo "dist: use make dist (upstream route, dynamic link)" >&2; exit 2; }
	rm -rf $(DIST) && mkdir -p $(DIST)/bin $(DIST)/lib
	$(GO) build -tags $(TAGS) -trimpath -ldflags='-s -w' -o $(DIST)/bin/verdict ./cmd/verdict
	cp -a $(LLAMA_PREFIX)/lib/*.so* $(DIST)/lib/
	@echo "dist: $(DIST) ($$(du -sh $(DIST) | cut -f1)): $$(cd $(DIST) && ls bin lib | tr '\n' ' ')"

## image-steps: every step of Dockerfile (IMAGE=cpu) or Dockerfile.gpu (IMAGE=gpu) that runs without Docker, then the SageMaker start check on the result (DIST)
IMAGE ?= cpu
.PHONY: image-steps
image-steps:
	scripts/image/steps.sh $(IMAGE)

## run: the main job — build, synthesize a model if none is given, score examples/
.PHONY: run
run: build
	./scripts/run-examples.sh

## test: every test on both llama.cpp routes (module, then upstream), with the race detector; then the CPU image's steps and its SageMaker start
.PHONY: test
test:
	$(MAKE) --no-print-directory test/route LLAMA=module
	$(MAKE) --no-print-directory test/route LLAMA=upstream
	$(MAKE) --no-print-directory image-steps IMAGE=cpu

## test/route: every test with the llama.cpp of LLAMA, then -race on the concurrent packages
.PHONY: test/route
test/route: $(LLAMA_DEP) conformance/js/node_modules
	@echo "== tests, LLAMA=$(LLAMA) (tags $(TAGS))"
	$(GO) vet -tags $(TAGS) ./...
	$(GO) test -tags $(TAGS) -count=1 -timeout 30m ./...
	$(GO) test -race -tags $(TAGS) -count=1 -timeout 30m $(RACE_PKGS)

## test/pkg: go test PKGS (default ./...) on the route of LLAMA; RUN=regexp picks tests
PKGS ?= ./...
RUN  ?= .
.PHONY: test/pkg
test/pkg: $(LLAMA_DEP)
	$(GO) test -tags $(TAGS) -count=1 -timeout 30m -run '$(RUN)' $(PKGS)

# The TypeSafe JS SDK that the conformance suite drives, pinned by the lockfile.
conformance/js/node_modules: conformance/js/package.json conformance/js/package-lock.json
	npm ci --prefix conformance/js --no-audit --no-fund
	@touch $@

## test/sdk: the TypeSafe JS SDK conformance suite alone (npm ci --prefix conformance/js first)
.PHONY: test/sdk
test/sdk: $(LLAMA_DEP) conformance/js/node_modules
	$(GO) test -tags $(TAGS) -count=1 -run TestTypeSafeSDKConformance -v ./cmd/verdict

## chaos: the chaos suite (docs/chaos.md) — kill -9, 503 storms, bad and slow clients, SIGTERM under load, on the route of LLAMA; about 5 minutes, not part of make test; RUN=regexp picks checks
.PHONY: chaos
chaos: $(LLAMA_DEP)
	$(GO) test -tags chaos,$(TAGS) -count=1 -timeout 40m -v -run '$(RUN)' ./chaos/

## test/short: unit tests only, no llama.cpp build
.PHONY: test/short
test/short:
	$(GO) test -short ./...

## bench: engine benchmark table (verdict bench)
.PHONY: bench
bench: build
	./$(BIN)/verdict bench $(BENCH_ARGS)

## bench-routes: W0/W1 of both llama.cpp routes side by side, interleaved in rounds (ROUNDS=3)
.PHONY: bench-routes
bench-routes:
	./scripts/bench-routes.sh

## gpu-bundle: what scripts/gpu-check.sh needs on a GPU machine without Go or network (.verdict/gpu-bundle)
.PHONY: gpu-bundle
gpu-bundle:
	./scripts/gpu-bundle.sh

## llama-server: build llama-server of the pinned llama.cpp (CPU_TARGET; SERVER_OPENMP=on, llama.cpp's default, or off) into LLAMA_DIR and print its path
.PHONY: llama-server
SERVER_OPENMP ?= on
llama-server:
	@echo "$$(LLAMA_DIR=$(LLAMA_DIR) CPU_TARGET=$(CPU_TARGET) TOOLS=server OPENMP=$(SERVER_OPENMP) scripts/llama.cpp/build.sh)/bin/llama-server"

## bench-peer: verdict serve against llama-server of the pinned llama.cpp (as CMake builds it, and without OpenMP) on the same model, interleaved rounds (PEER_ARGS=...)
.PHONY: bench-peer
bench-peer:
	$(MAKE) --no-print-directory build LLAMA=upstream BIN=bin/upstream
	./bin/upstream/verdict bench --peer llama-server --llama-server "$$($(MAKE) --no-print-directory -s llama-server)" \
		--llama-server-alt "$$($(MAKE) --no-print-directory -s llama-server SERVER_OPENMP=off)" --llama-server-alt-label "no OpenMP" \
		--out bench-peer.json $(PEER_ARGS)

## bench-portable: W0 prefill of the images' portable build (x86-64-v3, dynamic backends) against native, interleaved (ROUNDS=3)
.PHONY: bench-portable
bench-portable:
	./scripts/bench-portable.sh

## fuzz: run each fuzz target for FUZZTIME (default 30s)
FUZZTIME ?= 30s
.PHONY: fuzz
fuzz:
	$(GO) test ./decision -run '^$$' -fuzz FuzzParseSemIf -fuzztime $(FUZZTIME)
	$(GO) test ./decision -run '^$$' -fuzz FuzzParseSystemOne -fuzztime $(FUZZTIME)
	$(GO) test ./policy -run '^$$' -fuzz FuzzParse -fuzztime $(FUZZTIME)
	$(GO) test ./server -run '^$$' -fuzz FuzzInvocations -fuzztime $(FUZZTIME)
	$(GO) test ./worker -run '^$$' -fuzz FuzzDecodeMessage -fuzztime $(FUZZTIME)
	$(GO) test ./lambda -run '^$$' -fuzz FuzzHandle -fuzztime $(FUZZTIME)

## lint: gofmt, go vet (with and without the llamacpp tag) and go mod tidy -diff
.PHONY: lint
lint:
	$(GO) mod tidy -diff
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags $(TAGS) ./...

## docs: regenerate the README's command-line reference from the binary
.PHONY: docs
docs: build
	./$(BIN)/verdict help --markdown > $(BIN)/cli.md
	awk 'BEGIN{skip=0} /<!-- cli:start -->/{print; while ((getline l < "$(BIN)/cli.md") > 0) print l; skip=1; next} /<!-- cli:end -->/{skip=0} !skip{print}' README.md > $(BIN)/README.md
	mv $(BIN)/README.md README.md

## lambda: build the front door's Lambda bootstrap (no cgo) and bin/bootstrap.zip
LAMBDA_ARCH ?= amd64
.PHONY: lambda
lambda:
	CGO_ENABLED=0 GOOS=linux GOARCH=$(LAMBDA_ARCH) $(GO) build -tags lambda.norpc -trimpath -ldflags='-s -w' -o $(BIN)/bootstrap ./cmd/bootstrap
	cd $(BIN) && rm -f bootstrap.zip && zip -q -X bootstrap.zip bootstrap

## tidy: go mod tidy
.PHONY: tidy
tidy:
	$(GO) mod tidy

## clean: remove build outputs and the local data directory
.PHONY: clean
clean:
	rm -rf $(BIN) $(DATA)
