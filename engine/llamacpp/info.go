//go:build cgo

package llamacpp

import (
	"github.com/verdict-dev/verdict/engine/llamacpp/internal/llama"
	"github.com/verdict-dev/verdict/internal/hugepages"
)

// Available reports whether this binary embeds llama.cpp.
const Available = true

// Info initialises the backends (loading extra ones from
// VERDICT_GGML_LIB_PATH) and describes the build.
func Info() BuildInfo {
	bi := BuildInfo{LlamaCpp: llama.Version(), CPUFeatures: llama.SystemInfo()}
	for _, d := range llama.Devices() {
		bi.Devices = append(bi.Devices, Device{Name: d.Name, Description: d.Description, Kind: d.Kind})
	}
	return bi
}

// GlibcHugePagesTunable reports whether the C library honours
// glibc.malloc.hugetlb (glibc 2.35 and later; hugepages.Reexec sets it).
func GlibcHugePagesTunable() bool { return llama.GlibcAtLeast(2, 35) }

// hugeMalloc reports whether glibc puts this process's large allocations
// on transparent huge pages.
func hugeMalloc() bool { return hugepages.Malloc() && GlibcHugePagesTunable() }
