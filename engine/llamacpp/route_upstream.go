//go:build llamacpp && upstream

package llamacpp

// The upstream route: the pinned llama.cpp release (scripts/llama.cpp/pin)
// built with CMake into a prefix; the Makefile passes its include and
// library paths through CGO_CPPFLAGS and CGO_LDFLAGS (LLAMA=upstream).

/*
#cgo CPPFLAGS: -DVERDICT_LLAMA_UPSTREAM
#include "llama.h"
#include "verdict-pin.h"
*/
import "C"

// Route names the llama.cpp this binary links.
const Route = RouteUpstream

func llamaVersion() string {
	return "llama.cpp " + C.GoString(C.llama_version()) + ", pinned " + C.VERDICT_LLAMA_PIN_TAG + " tree " + C.VERDICT_LLAMA_PIN_TREE[:12]
}
