//go:build llamacpp && upstream

package llamacpp

import "github.com/verdict-dev/verdict/engine/llamacpp/internal/llama"

// The upstream route: the pinned llama.cpp release (scripts/llama.cpp/pin)
// built with CMake (internal/llama links it).

// Route names the llama.cpp this binary links.
const Route = RouteUpstream

func llamaVersion() string { return llama.UpstreamVersion() }
