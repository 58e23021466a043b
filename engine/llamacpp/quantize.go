package llamacpp

import (
	"fmt"
	"sort"
	"strings"
)

// QuantTypes are the weight types `verdict model quantize` writes: Q8_0
// (8-bit, near-lossless) and Q4_K_M (4-bit k-quants, the reference
// deployment's type), with llama.cpp's file-type numbers.
var QuantTypes = map[string]int{"Q8_0": 7, "Q4_K_M": 15}

// QuantTypeNames lists QuantTypes' names, sorted.
func QuantTypeNames() []string {
	out := make([]string, 0, len(QuantTypes))
	for n := range QuantTypes {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// quantType checks a type name (case-insensitive) and returns its
// llama.cpp file type.
func quantType(name string) (int, error) {
	for n, ft := range QuantTypes {
		if strings.EqualFold(n, name) {
			return ft, nil
		}
	}
	return 0, fmt.Errorf("unknown quantization type %q (known: %s)", name, strings.Join(QuantTypeNames(), ", "))
}
