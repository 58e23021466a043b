//go:build cgo

package llamacpp

import (
	"fmt"

	"github.com/verdict-dev/verdict/engine/llamacpp/internal/llama"
)

// Quantize writes the GGUF at in to out with its weights quantized to typ
// (a QuantTypes name) on threads threads (0: the physical cores). The
// caller writes out to a temporary name and renames it: a failed run
// leaves no model behind.
func Quantize(in, out, typ string, threads int) error {
	ft, err := quantType(typ)
	if err != nil {
		return err
	}
	if threads == 0 {
		threads = physicalCores()
	}
	if threads < 1 {
		return fmt.Errorf("llamacpp: quantize threads must be >= 1, got %d", threads)
	}
	return llama.Quantize(in, out, ft, threads)
}
