//go:build llamacpp

package llamacpp

import "github.com/verdict-dev/verdict/engine/llamacpp/internal/llama"

// Available reports whether this binary embeds llama.cpp.
const Available = true

// Info initialises the backends (loading extra ones from
// VERDICT_GGML_LIB_PATH) and describes the build.
func Info() BuildInfo {
	bi := BuildInfo{Route: Route, LlamaCpp: llamaVersion(), CPUFeatures: llama.SystemInfo()}
	for _, d := range llama.Devices() {
		bi.Devices = append(bi.Devices, Device{Name: d.Name, Description: d.Description, Kind: d.Kind})
	}
	return bi
}
