//go:build llamacpp && !upstream

package llama

// The module route: llama.cpp and ggml as the Go module
// github.com/ollama/ollama v0.17.4 vendors them, compiled by cgo. Its
// llama.h has no llama_version.

import (
	_ "github.com/ollama/ollama/llama/llama.cpp/src" // compiles llama.cpp, ggml and the CPU backend
)
