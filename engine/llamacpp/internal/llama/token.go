// Package llama is verdict's cgo binding to llama.cpp: loading, tokenizing,
// batches, decode, logits and KV-sequence operations. It is the only
// package with C in it, and it is internal to engine/llamacpp: nothing
// else in verdict reaches llama.cpp but through the engine. C types never
// leave it; every id and range is checked in Go before a call that would
// otherwise hit a GGML_ASSERT and abort the process.
//
// The binding compiles only with the "llamacpp" build tag (with "upstream"
// too for the pinned upstream release built by CMake); this file, without
// cgo, builds everywhere.
package llama

// Token is a vocabulary id.
type Token int32
