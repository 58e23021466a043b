# verdict — run `make help` for the targets.

GO         ?= go
# CPU_TARGET is the -march for llama.cpp and ggml: native for local builds,
# x86-64-v3 (AVX2/FMA/F16C) for portable images. Never build without it:
# the engine is ~33x slower without SIMD.
CPU_TARGET ?= native
TAGS       ?= llamacpp
BIN        ?= bin
DATA       ?= .verdict
# Packages with concurrency, also tested under the race detector.
RACE_PKGS  ?= ./engine/... ./worker/... ./queue/... ./sink/... ./router/... ./server/... ./lambda/...

OLLAMA_DIR := $(shell $(GO) mod download github.com/ollama/ollama >/dev/null 2>&1; $(GO) list -m -f '{{.Dir}}' github.com/ollama/ollama 2>/dev/null)
export CGO_ENABLED  := 1
export CGO_CPPFLAGS := -I$(OLLAMA_DIR)/llama/llama.cpp/include -I$(OLLAMA_DIR)/ml/backend/ggml/ggml/include
export CGO_CFLAGS   := -O3 -march=$(CPU_TARGET)
export CGO_CXXFLAGS := -O3 -march=$(CPU_TARGET)

.DEFAULT_GOAL := help

## help: list the targets
.PHONY: help
help:
	@grep -E '^## ' $(MAKEFILE_LIST) | sed -e 's/^## /  /' | column -t -s ':'

## build: build bin/verdict with embedded llama.cpp (CPU_TARGET=native)
.PHONY: build
build:
	$(GO) build -tags $(TAGS) -o $(BIN)/verdict ./cmd/verdict

## run: the main job — build, synthesize a model if none is given, score examples/
.PHONY: run
run: build
	./scripts/run-examples.sh

## test: every test with real llama.cpp, then the race detector on concurrent packages
.PHONY: test
test:
	$(GO) vet -tags $(TAGS) ./...
	$(GO) test -tags $(TAGS) -count=1 -timeout 30m ./...
	$(GO) test -race -tags $(TAGS) -count=1 -timeout 30m $(RACE_PKGS)

## test/sdk: the TypeSafe JS SDK conformance suite alone (npm ci --prefix conformance/js first)
.PHONY: test/sdk
test/sdk:
	$(GO) test -tags $(TAGS) -count=1 -run TestTypeSafeSDKConformance -v ./cmd/verdict

## test/short: unit tests only, no llama.cpp build
.PHONY: test/short
test/short:
	$(GO) test -short ./...

## bench: engine benchmark table (verdict bench)
.PHONY: bench
bench: build
	./$(BIN)/verdict bench $(BENCH_ARGS)

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

## lint: gofmt and go vet (with and without the llamacpp tag)
.PHONY: lint
lint:
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
