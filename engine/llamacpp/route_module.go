//go:build llamacpp && !upstream

package llamacpp

// The module route: llama.cpp as the Go module github.com/ollama/ollama
// v0.17.4 vendors it (internal/llama compiles it). Its llama.h has no
// llama_version, so the version is named here.

// Route names the llama.cpp this binary links.
const Route = RouteModule

func llamaVersion() string { return ModuleLlamaCppVersion }
