//go:build cgo

package llama

/*
#include "llama.h"
#include "verdict-pin.h"
*/
import "C"

import "fmt"

// Version names the linked llama.cpp: llama_version(), the pin (tag and
// tree) and configuration the library was built from.
func Version() string {
	return "llama.cpp " + C.GoString(C.llama_version()) + ", pinned " + C.VERDICT_LLAMA_PIN_TAG + " tree " +
		C.VERDICT_LLAMA_PIN_TREE[:12] + " (" + C.VERDICT_LLAMA_CONFIG + ")"
}

// CheckPin returns nil when the linked library was built from the tree
// this source pins (pin.go), and otherwise says how to rebuild it.
func CheckPin() error {
	if got := C.VERDICT_LLAMA_PIN_TREE; got != PinTree {
		return fmt.Errorf("llama: the linked llama.cpp was built from tree %.12s, this source pins %s (tree %.12s): run make llama-lib to build the pinned release, then rebuild verdict",
			got, PinTag, PinTree)
	}
	return nil
}
