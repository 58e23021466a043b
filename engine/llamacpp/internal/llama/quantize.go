//go:build cgo

package llama

/*
#include <stdlib.h>
#include "llama.h"

static uint32_t verdict_quantize(const char *in, const char *out, int ftype, int nthread) {
	struct llama_model_quantize_params p = llama_model_quantize_default_params();
	p.ftype = (enum llama_ftype)ftype;
	p.nthread = nthread;
	return llama_model_quantize(in, out, &p);
}
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// Quantize reads the GGUF at in and writes it to out with its weights in
// ftype (a llama_ftype value), using threads threads; tensors
// whose shape the type cannot hold keep a fallback type, as llama.cpp
// decides.
func Quantize(in, out string, ftype, threads int) error {
	initBackend()
	cin, cout := C.CString(in), C.CString(out)
	defer C.free(unsafe.Pointer(cin))
	defer C.free(unsafe.Pointer(cout))
	if rc := C.verdict_quantize(cin, cout, C.int(ftype), C.int(threads)); rc != 0 {
		return fmt.Errorf("llama: quantizing %s failed (llama_model_quantize returned %d; see the llama.cpp log at debug level)", in, uint32(rc))
	}
	return nil
}
