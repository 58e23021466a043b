package llamacpp

import (
	"errors"
	"fmt"
	"slices"
)

// The two ways a verdict binary links llama.cpp (see the Makefile's LLAMA).
const (
	// RouteModule is the llama.cpp vendored by the Go module
	// github.com/ollama/ollama v0.17.4, compiled by cgo: `make build`.
	RouteModule = "module"
	// RouteUpstream is the release pinned in scripts/llama.cpp/pin, built
	// with CMake: `make build LLAMA=upstream`.
	RouteUpstream = "upstream"

	// ModuleLlamaCppVersion names the module route's llama.cpp.
	ModuleLlamaCppVersion = "llama.cpp ec98e2002 (ollama v0.17.4)"
	// UpstreamLlamaCppVersion names the upstream route's pinned release.
	UpstreamLlamaCppVersion = "llama.cpp " + upstreamPin
)

// Device is a ggml compute device registered in this process.
type Device struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Kind        string `json:"kind"` // cpu, gpu, accel or other
}

// BuildInfo says what llama.cpp a binary links and what it can run on
// (Info returns it; empty in a build without llama.cpp).
type BuildInfo struct {
	Route    string   `json:"route"`     // module or upstream
	LlamaCpp string   `json:"llama_cpp"` // version of the linked llama.cpp
	Devices  []Device `json:"devices"`
	// CPUFeatures is llama.cpp's system info line: the SIMD features the
	// CPU backend was compiled with (AVX2 = 1 | …).
	CPUFeatures string `json:"cpu_features"`
}

// ErrUnknownArchitecture: the model's architecture is not one this build's
// llama.cpp can load.
var ErrUnknownArchitecture = errors.New("llamacpp: unknown model architecture")

// RouteArchitectures lists the architectures a route loads, sorted.
func RouteArchitectures(route string) []string {
	switch route {
	case RouteModule:
		return slices.Clone(moduleArchs)
	case RouteUpstream:
		return slices.Clone(upstreamArchs)
	}
	return nil
}

// CheckArchitecture returns nil when route loads arch, and otherwise one
// line naming the architecture and the build that loads it.
func CheckArchitecture(route, arch string) error {
	if slices.Contains(RouteArchitectures(route), arch) {
		return nil
	}
	other, otherName, how := RouteUpstream, UpstreamLlamaCppVersion, "make build LLAMA=upstream"
	this := ModuleLlamaCppVersion
	if route == RouteUpstream {
		other, otherName, how = RouteModule, ModuleLlamaCppVersion, "make build"
		this = UpstreamLlamaCppVersion
	}
	if slices.Contains(RouteArchitectures(other), arch) {
		return fmt.Errorf("%w: %q is not known to this build (%s route, %s); the %s route (%s) loads it: %s",
			ErrUnknownArchitecture, arch, route, this, other, otherName, how)
	}
	return fmt.Errorf("%w: %q is not known to this build (%s route, %s) nor to the %s route (%s)",
		ErrUnknownArchitecture, arch, route, this, other, otherName)
}
