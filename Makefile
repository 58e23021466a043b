# verdict — run `make help` for the targets.

GO         ?= go
BIN        ?= bin
DATA       ?= .verdict
# CPU_TARGET is the -march of llama.cpp and ggml: native for local builds,
# x86-64-v3 (AVX2/FMA/F16C) for portable images. Never build without it:
# the engine is ~33x slower without SIMD.
CPU_TARGET ?= native
# Where the pinned llama.cpp source (scripts/llama.cpp/pin) and its builds
# live: a cache outside the checkout, shared by every checkout on the
# machine. Each build is a prefix named by the tree and its configuration.
LLAMA_DIR  ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/verdict/llama.cpp
# Packages with concurrency, also tested under the race detector.
RACE_PKGS  ?= ./engine/... ./worker/... ./router/... ./lambda/... ./internal/queue/... ./internal/sink/... ./internal/server/... ./internal/results/... ./internal/quality/...

# LLAMA_LINK: static — one self-contained binary (the default); dynamic —
# shared libllama/ggml with ggml's backends as modules loaded at start
# from beside libggml (the images: `make dist`).
LLAMA_LINK ?= static
# GPU=cuda adds ggml's CUDA backend for CUDA_ARCHS (the SageMaker GPU
# families: T4 75, A10G 86, L4/L40S 89, H100/H200 90); it needs nvcc.
GPU        ?=
CUDA_ARCHS ?= 75;86;89;90
CUDA_HOME  ?= /usr/local/cuda
# OPENMP: off — ggml's own thread pool (the default, faster on this
# project's machines: docs/performance.md); on — libgomp, llama.cpp's
# CMake default (and the peer llama-server's).
OPENMP     ?= off

LLAMA_TREE   := $(shell sed -n 's/^tree=//p' scripts/llama.cpp/pin | cut -c1-12)
# The same name scripts/llama.cpp/build.sh gives the configuration.
LLAMA_CONFIG := $(LLAMA_TREE)-$(CPU_TARGET)$(if $(filter off,$(OPENMP)),-noomp)$(if $(filter dynamic,$(LLAMA_LINK)),-dl)$(if $(GPU),-$(GPU)-$(subst ;,_,$(CUDA_ARCHS)))
LLAMA_PREFIX ?= $(abspath $(LLAMA_DIR))/$(LLAMA_CONFIG)
LLAMA_DEFAULT_CONFIG := $(LLAMA_TREE)-native-noomp
# Plain go build/test/vet find the default configuration through the link
# $(DATA)/llama (the binding's #cgo directives name it). Make names its
# configuration's prefix itself, first on the search paths: CGO_* settings
# are part of Go's cache keys, so switching configurations rebuilds.
comma := ,
export CGO_ENABLED  := 1
export CGO_CPPFLAGS := -I$(LLAMA_PREFIX)/include
export CGO_LDFLAGS  := -L$(LLAMA_PREFIX)/lib $(if $(filter dynamic,$(LLAMA_LINK)),-Wl$(comma)-rpath$(comma)$$ORIGIN/../lib -Wl$(comma)-rpath$(comma)$(LLAMA_PREFIX)/lib) $(if $(and $(GPU),$(filter static,$(LLAMA_LINK))),-L$(CUDA_HOME)/lib64)
# Tests with real tokenizers read llama.cpp's vocab-only GGUFs from here;
# the peer benchmark's test runs this llama-server (make llama-server).
export VERDICT_LLAMA_SRC    := $(abspath $(LLAMA_DIR))/src
export VERDICT_LLAMA_SERVER := $(abspath $(LLAMA_DIR))/$(LLAMA_TREE)-$(CPU_TARGET)-server/bin/llama-server
# Full logs of the quiet steps (module downloads, llama.cpp's CMake).
LOG_DIR    := $(DATA)/logs

.DEFAULT_GOAL := help

## help: list the targets
.PHONY: help
help:
	@awk '/^## /{sub(/^## /, ""); n = index($$0, ": "); printf "  %-16s %s\n", substr($$0, 1, n - 1), substr($$0, n + 2)}' $(MAKEFILE_LIST)

## llama-src: fetch the pinned llama.cpp source (verified by tree hash) into LLAMA_DIR
.PHONY: llama-src
llama-src:
	@LLAMA_DIR=$(LLAMA_DIR) scripts/llama.cpp/source.sh >/dev/null

## llama-lib: build the pinned libllama + ggml with CMake (CPU_TARGET, LLAMA_LINK, GPU) into LLAMA_DIR; the default configuration is linked at .verdict/llama for plain go tools
.PHONY: llama-lib
llama-lib:
	@LLAMA_DIR=$(LLAMA_DIR) LLAMA_PREFIX=$(LLAMA_PREFIX) CPU_TARGET=$(CPU_TARGET) LINK=$(LLAMA_LINK) OPENMP=$(OPENMP) GPU=$(GPU) CUDA_ARCHS='$(CUDA_ARCHS)' scripts/llama.cpp/build.sh >/dev/null
	@if [ "$(LLAMA_CONFIG)" = "$(LLAMA_DEFAULT_CONFIG)" ]; then mkdir -p $(DATA) && ln -sfn $(LLAMA_PREFIX) $(DATA)/llama; fi

## build: build bin/verdict with the pinned llama.cpp (builds the library first when needed)
.PHONY: build
build: llama-lib
	@mkdir -p $(LOG_DIR)
	@echo "== building verdict ($(BIN)/verdict)"
	@$(GO) mod download >$(LOG_DIR)/go-mod-download.log 2>&1 || { cat $(LOG_DIR)/go-mod-download.log >&2; exit 1; }
	$(GO) build -o $(BIN)/verdict ./cmd/verdict

## jevbench: put JevBench-240 in .verdict/data/jevbench-240 (JEVBENCH=DIR copies a local one; otherwise a pinned git clone), checked
.PHONY: jevbench
jevbench:
	@DATA=$(DATA) scripts/jevbench.sh

## image-deps: the images' build-stage tools (CMake, Ninja, git, CA certificates); installs what is missing
.PHONY: image-deps
image-deps:
	@scripts/image/build-deps.sh

## dist: the images' files in DIST (bin/verdict, lib/ with libllama, ggml and its backend modules): LLAMA_LINK=dynamic, CPU_TARGET (x86-64-v3 in the images), GPU=cuda adds CUDA
DIST ?= dist
.PHONY: dist
dist:
	@$(MAKE) --no-print-directory dist/files LLAMA_LINK=dynamic

.PHONY: dist/files
dist/files: llama-lib
	@test "$(LLAMA_LINK)" = dynamic || { echo "dist: use make dist (dynamic link)" >&2; exit 2; }
	rm -rf $(DIST) && mkdir -p $(DIST)/bin $(DIST)/lib
	$(GO) build -trimpath -ldflags='-s -w' -o $(DIST)/bin/verdict ./cmd/verdict
	cp -a $(LLAMA_PREFIX)/lib/*.so* $(DIST)/lib/
	rm -f $(DIST)/lib/libverdict-llama.so
	@echo "dist: $(DIST) ($$(du -sh $(DIST) | cut -f1)): $$(cd $(DIST) && ls bin lib | tr '\n' ' ')"

## image-steps: every step of Dockerfile (IMAGE=cpu) or Dockerfile.gpu (IMAGE=gpu) that runs without Docker, then the SageMaker start check on the result (DIST)
IMAGE ?= cpu
.PHONY: image-steps
image-steps:
	scripts/image/steps.sh $(IMAGE)

## run: the main job — build, synthesize a model if none is given, score examples/
.PHONY: run
run: build
	@echo "== scoring the examples (scripts/run-examples.sh)"
	@./scripts/run-examples.sh

## test-deps: what the tests need beyond Go: llama.cpp and llama-server, the Lambda emulator, the TypeSafe JS SDK, Debian's chromium (the review page's browser test)
.PHONY: test-deps
test-deps: llama-lib llama-server/build conformance/js/node_modules
	@scripts/install-lambda-rie.sh
	@LOG_DIR=$(LOG_DIR) scripts/install-chromium.sh

## test: vet, every test, -race on the concurrent packages, then the CPU image's steps and its SageMaker start
.PHONY: test
test: test-deps
	@echo "== go vet"
	$(GO) vet ./...
	@echo "== go test"
	$(GO) test -count=1 -timeout 30m ./...
	@echo "== go test -race ($(RACE_PKGS))"
	$(GO) test -race -count=1 -timeout 30m $(RACE_PKGS)
	@echo "== image steps (Dockerfile)"
	$(MAKE) --no-print-directory image-steps IMAGE=cpu

## test/pkg: go test PKGS (default ./...); RUN=regexp picks tests
PKGS ?= ./...
RUN  ?= .
.PHONY: test/pkg
test/pkg: test-deps
	$(GO) test -count=1 -timeout 30m -run '$(RUN)' $(PKGS)

# The TypeSafe JS SDK that the conformance suite drives, pinned by the lockfile.
conformance/js/node_modules: conformance/js/package.json conformance/js/package-lock.json
	@mkdir -p $(LOG_DIR)
	@echo "== npm ci (conformance/js)"
	@npm ci --prefix conformance/js --no-audit --no-fund >$(LOG_DIR)/npm-ci.log 2>&1 || { cat $(LOG_DIR)/npm-ci.log >&2; exit 1; }
	@touch $@

## test/sdk: the TypeSafe JS SDK conformance suite alone
.PHONY: test/sdk
test/sdk: llama-lib conformance/js/node_modules
	$(GO) test -count=1 -run TestTypeSafeSDKConformance -v ./cmd/verdict

## chaos: the chaos suite (docs/chaos.md) — kill -9, 503 storms, bad and slow clients, SIGTERM under load; about 5 minutes, not part of make test; RUN=regexp picks checks
.PHONY: chaos
chaos: llama-lib
	$(GO) test -tags chaos -count=1 -timeout 40m -v -run '$(RUN)' ./internal/chaos/

## test/short: unit tests only, no llama.cpp needed
.PHONY: test/short
test/short:
	CGO_ENABLED=0 $(GO) test -short ./...

## bench: engine benchmark table (verdict bench)
.PHONY: bench
bench: build
	./$(BIN)/verdict bench $(BENCH_ARGS)

## gpu-bundle: what scripts/gpu-check.sh needs on a GPU machine without Go or network (.verdict/gpu-bundle)
.PHONY: gpu-bundle
gpu-bundle:
	./scripts/gpu-bundle.sh

## llama-server: build llama-server of the pinned llama.cpp (CPU_TARGET; SERVER_OPENMP=on, llama.cpp's default, or off) into LLAMA_DIR and print its path
.PHONY: llama-server
SERVER_OPENMP ?= on
llama-server:
	@echo "$$(LLAMA_DIR=$(LLAMA_DIR) CPU_TARGET=$(CPU_TARGET) TOOLS=server OPENMP=$(SERVER_OPENMP) scripts/llama.cpp/build.sh)/bin/llama-server"

# llama-server/build builds the peer benchmark test's llama-server quietly.
.PHONY: llama-server/build
llama-server/build:
	@LLAMA_DIR=$(LLAMA_DIR) CPU_TARGET=$(CPU_TARGET) TOOLS=server scripts/llama.cpp/build.sh >/dev/null

## bench-peer: verdict serve against llama-server of the pinned llama.cpp (as CMake builds it, and without OpenMP) on the same model, interleaved rounds (PEER_ARGS=...)
.PHONY: bench-peer
bench-peer: build
	./$(BIN)/verdict bench --peer llama-server --llama-server "$$($(MAKE) --no-print-directory -s llama-server)" \
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
	$(GO) test ./internal/server -run '^$$' -fuzz FuzzInvocations -fuzztime $(FUZZTIME)
	$(GO) test ./worker -run '^$$' -fuzz FuzzDecodeMessage -fuzztime $(FUZZTIME)
	$(GO) test ./lambda -run '^$$' -fuzz FuzzHandle -fuzztime $(FUZZTIME)

## lint: gofmt, go vet (with and without cgo) and go mod tidy -diff
.PHONY: lint
lint: llama-lib
	$(GO) mod tidy -diff
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	CGO_ENABLED=0 $(GO) vet ./...

## docs: regenerate docs/cli.md, the command-line reference, from the binary
.PHONY: docs
docs: build
	./$(BIN)/verdict help --markdown > $(BIN)/cli.md
	awk 'BEGIN{skip=0} /<!-- cli:start -->/{print; while ((getline l < "$(BIN)/cli.md") > 0) print l; skip=1; next} /<!-- cli:end -->/{skip=0} !skip{print}' docs/cli.md > $(BIN)/cli-doc.md
	mv $(BIN)/cli-doc.md docs/cli.md

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

## clean: remove build outputs and the local data directory (the llama.cpp cache in LLAMA_DIR stays)
.PHONY: clean
clean:
	rm -rf $(BIN) $(DATA)
