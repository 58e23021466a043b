// Package llama is verdict's cgo binding to llama.cpp: loading, tokenizing,
// batches, decode, logits and KV-sequence operations. It is the only
// package with C in it, and it is internal to engine/llamacpp: nothing
// else in verdict reaches llama.cpp but through the engine. C types never
// leave it; every id and range is checked in Go before a call that would
// otherwise hit a GGML_ASSERT and abort the process.
//
// It links the llama.cpp release pinned in scripts/llama.cpp/pin, built
// with CMake by scripts/llama.cpp/build.sh, and finds it through a link in
// the module root: .verdict/llama points at the build's prefix (make
// llama-lib makes both). The #cgo directives in binding.go name its
// include/ and lib/ relative to this folder, so plain go build, go test,
// go vet and gopls need no CGO_* settings; make puts the prefix of its own
// configuration first through CGO_CPPFLAGS and CGO_LDFLAGS. The prefix's
// lib/libverdict-llama.so is a linker script naming the libraries of its
// configuration (static or shared, CUDA, OpenMP). Where the library is not
// built, notbuilt/ ends both search paths: its llama.h stops the compile,
// and its libverdict-llama.so stops a link whose objects Go's build cache
// still held (after make clean), each with a line that says how to build
// it. The cgo files need cgo; this file and token.go build everywhere.
//
// Files, by what they wrap:
//
//   - binding.go: the #cgo directives, the backends (initBackend,
//     SystemInfo, Devices), llama.cpp's log routed into slog, and the
//     sentinel errors that llama.cpp's return codes become.
//   - model.go: Model, loading a GGUF, tokenizing and the vocabulary.
//   - context.go: Context, its thread pool, Decode, Logits and the
//     KV-sequence operations (copy, remove, save, restore).
//   - batch.go: Batch, the reusable llama_batch.
//   - quantize.go, version.go, pin.go: quantizing, and the pinned release.
//
// Each cgo file has its own preamble (cgo compiles static C helpers per
// file); the compile and link flags are in binding.go only, and apply to
// the whole package. Helpers that several files need are in shim.h.
package llama
