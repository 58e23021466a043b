package llamacpp

import (
	"errors"
	"fmt"
	"slices"

	"github.com/verdict-dev/verdict/engine/llamacpp/internal/llama"
)

// LlamaCppVersion names the one llama.cpp verdict links: the release
// pinned in scripts/llama.cpp/pin, built with CMake.
var LlamaCppVersion = "llama.cpp " + llama.PinTag + " (tree " + llama.PinTree[:12] + ")"

// Device is a ggml compute device registered in this process.
type Device struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Kind        string `json:"kind"` // cpu, gpu, accel or other
}

// BuildInfo says what llama.cpp a binary links and what it can run on
// (Info returns it; empty in a build without cgo, which links none).
type BuildInfo struct {
	// LlamaCpp is the linked llama.cpp: llama_version(), the pinned tag
	// and tree, and the build's configuration (CPU target, link mode).
	LlamaCpp string   `json:"llama_cpp"`
	Devices  []Device `json:"devices"`
	// CPUFeatures is llama.cpp's system info line: the SIMD features the
	// CPU backend was compiled with (AVX2 = 1 | …).
	CPUFeatures string `json:"cpu_features"`
}

// ErrUnknownArchitecture: the model's architecture is not one the linked
// llama.cpp can load.
var ErrUnknownArchitecture = errors.New("llamacpp: unknown model architecture")

// Architectures lists the model architectures the pinned llama.cpp
// loads, sorted.
func Architectures() []string { return slices.Clone(architectures) }

// CheckArchitecture returns nil when the pinned llama.cpp loads arch, and
// otherwise one line naming the architecture and the release.
func CheckArchitecture(arch string) error {
	if slices.Contains(architectures, arch) {
		return nil
	}
	return fmt.Errorf("%w: %q is not known to %s, the llama.cpp verdict links (verdict version --archs lists what it loads)",
		ErrUnknownArchitecture, arch, LlamaCppVersion)
}
