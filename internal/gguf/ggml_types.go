package gguf

import (
	"errors"
	"fmt"
	"math/bits"
)

// ggmlType is a tensor's element type, numbered as ggml's enum ggml_type.
type ggmlType uint32

const (
	ggmlF32 ggmlType = 0
	ggmlF16 ggmlType = 1
)

// ggmlTypeInfo: a type's name, the values in one block and the bytes a
// block takes (from ggml's type traits; numbers 4, 5, 31–33 and 36–38 are
// retired and absent here).
type ggmlTypeInfo struct {
	name  string
	block uint64
	size  uint64
}

var ggmlTypes = map[ggmlType]ggmlTypeInfo{
	0:  {"F32", 1, 4},
	1:  {"F16", 1, 2},
	2:  {"Q4_0", 32, 18},
	3:  {"Q4_1", 32, 20},
	6:  {"Q5_0", 32, 22},
	7:  {"Q5_1", 32, 24},
	8:  {"Q8_0", 32, 34},
	9:  {"Q8_1", 32, 36},
	10: {"Q2_K", 256, 84},
	11: {"Q3_K", 256, 110},
	12: {"Q4_K", 256, 144},
	13: {"Q5_K", 256, 176},
	14: {"Q6_K", 256, 210},
	15: {"Q8_K", 256, 292},
	16: {"IQ2_XXS", 256, 66},
	17: {"IQ2_XS", 256, 74},
	18: {"IQ3_XXS", 256, 98},
	19: {"IQ1_S", 256, 50},
	20: {"IQ4_NL", 32, 18},
	21: {"IQ3_S", 256, 110},
	22: {"IQ2_S", 256, 82},
	23: {"IQ4_XS", 256, 136},
	24: {"I8", 1, 1},
	25: {"I16", 1, 2},
	26: {"I32", 1, 4},
	27: {"I64", 1, 8},
	28: {"F64", 1, 8},
	29: {"IQ1_M", 256, 56},
	30: {"BF16", 1, 2},
	34: {"TQ1_0", 256, 54},
	35: {"TQ2_0", 256, 66},
	39: {"MXFP4", 32, 17},
	40: {"NVFP4", 64, 36},
	41: {"Q1_0", 128, 18},
	42: {"Q2_0", 64, 18},
}

// String is ggml's name of the type in capitals ("F32", "Q4_K", …), or
// "type N" for a type this table does not know.
func (t ggmlType) String() string {
	if info, ok := ggmlTypes[t]; ok {
		return info.name
	}
	return fmt.Sprintf("type %d", uint32(t))
}

var errUnknownGGMLType = errors.New("unknown ggml type")

// bytes is the data size of a tensor of type t and the given shape. Rows
// (the first dimension) must hold whole blocks.
func (t ggmlType) bytes(shape []uint64) (uint64, error) {
	info, ok := ggmlTypes[t]
	if !ok {
		return 0, fmt.Errorf("%w %d", errUnknownGGMLType, uint32(t))
	}
	n := uint64(1)
	for _, d := range shape {
		hi, lo := bits.Mul64(n, d)
		if hi != 0 {
			return 0, fmt.Errorf("shape %v has too many elements", shape)
		}
		n = lo
	}
	if len(shape) > 0 && shape[0]%info.block != 0 {
		return 0, fmt.Errorf("rows of %d %s values are not whole blocks of %d", shape[0], info.name, info.block)
	}
	hi, lo := bits.Mul64(n/info.block, info.size)
	if hi != 0 {
		return 0, fmt.Errorf("shape %v has too many bytes", shape)
	}
	return lo, nil
}

// llamaFileTypes name general.file_type values, llama.cpp's enum
// llama_ftype without its LLAMA_FTYPE_[MOSTLY_] prefix (numbers 4–6 and
// 33–35 are retired).
var llamaFileTypes = map[uint64]string{
	0:  "F32",
	1:  "F16",
	2:  "Q4_0",
	3:  "Q4_1",
	7:  "Q8_0",
	8:  "Q5_0",
	9:  "Q5_1",
	10: "Q2_K",
	11: "Q3_K_S",
	12: "Q3_K_M",
	13: "Q3_K_L",
	14: "Q4_K_S",
	15: "Q4_K_M",
	16: "Q5_K_S",
	17: "Q5_K_M",
	18: "Q6_K",
	19: "IQ2_XXS",
	20: "IQ2_XS",
	21: "Q2_K_S",
	22: "IQ3_XS",
	23: "IQ3_XXS",
	24: "IQ1_S",
	25: "IQ4_NL",
	26: "IQ3_S",
	27: "IQ3_M",
	28: "IQ2_S",
	29: "IQ2_M",
	30: "IQ4_XS",
	31: "IQ1_M",
	32: "BF16",
	36: "TQ1_0",
	37: "TQ2_0",
	38: "MXFP4_MOE",
	39: "NVFP4",
	40: "Q1_0",
	41: "Q2_0",
}

// fileTypeName names a general.file_type value, "" for an unknown one.
func fileTypeName(ft uint64) string { return llamaFileTypes[ft] }
