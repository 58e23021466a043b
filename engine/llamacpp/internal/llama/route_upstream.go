//go:build llamacpp && upstream

package llama

// The upstream route: the pinned llama.cpp release (scripts/llama.cpp/pin)
// built with CMake into a prefix; the Makefile passes its include and
// library paths through CGO_CPPFLAGS and CGO_LDFLAGS (LLAMA=upstream).

/*
#cgo CPPFLAGS: -DVERDICT_LLAMA_UPSTREAM
#include "llama.h"
#include "verdict-pin.h"
*/
import "C"

// UpstreamVersion names the linked release: llama_version(), and the pin
// (tag and tree) the library was built from.
func UpstreamVersion() string {
	return "llama.cpp " + C.GoString(C.llama_version()) + ", pinned " + C.VERDICT_LLAMA_PIN_TAG + " tree " + C.VERDICT_LLAMA_PIN_TREE[:12]
}
