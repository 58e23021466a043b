package model

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
)

// GGUF metadata value types (the GGUF specification's numbering).
const (
	ggufUint8   uint32 = 0
	ggufInt8    uint32 = 1
	ggufUint16  uint32 = 2
	ggufInt16   uint32 = 3
	ggufUint32  uint32 = 4
	ggufInt32   uint32 = 5
	ggufFloat32 uint32 = 6
	ggufBool    uint32 = 7
	ggufString  uint32 = 8
	ggufArray   uint32 = 9
	ggufUint64  uint32 = 10
	ggufInt64   uint32 = 11
	ggufFloat64 uint32 = 12
)

var ggufTypeNames = map[uint32]string{
	ggufUint8: "uint8", ggufInt8: "int8", ggufUint16: "uint16", ggufInt16: "int16",
	ggufUint32: "uint32", ggufInt32: "int32", ggufFloat32: "float32", ggufBool: "bool",
	ggufString: "string", ggufArray: "array", ggufUint64: "uint64", ggufInt64: "int64",
	ggufFloat64: "float64",
}

func ggufTypeName(t uint32) string {
	if s, ok := ggufTypeNames[t]; ok {
		return s
	}
	return fmt.Sprintf("type %d", t)
}

// metaValue is one metadata value with its exact GGUF type. Value holds a
// Go value of the matching width: uint8, int8, …, float64, bool, string,
// or a slice of one of those for an array (Elem is then the element type).
// llama.cpp checks types strictly (a uint32 key written as int32 is "not
// found"), so values are kept as they were read.
type metaValue struct {
	Type  uint32
	Elem  uint32
	Value any
}

// ggufMeta is the metadata section of a GGUF file, in file order.
type ggufMeta struct {
	Version uint32
	Tensors uint64
	Keys    []string
	Values  map[string]metaValue
}

// readGGUFMeta reads the header and metadata of a GGUF file (versions 2
// and 3), without its tensors.
func readGGUFMeta(path string) (*ggufMeta, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	m, err := decodeGGUFMeta(bufio.NewReaderSize(f, 1<<16))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

type metaReader struct {
	r   *bufio.Reader
	buf [8]byte
}

func (r *metaReader) fixed(n int) ([]byte, error) {
	if _, err := io.ReadFull(r.r, r.buf[:n]); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return r.buf[:n], nil
}

func (r *metaReader) u32() (uint32, error) {
	b, err := r.fixed(4)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(b), nil
}

func (r *metaReader) u64() (uint64, error) {
	b, err := r.fixed(8)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b), nil
}

// maxMetaString bounds one string (a chat template is a few tens of kB).
const maxMetaString = 64 << 20

func (r *metaReader) str() (string, error) {
	n, err := r.u64()
	if err != nil {
		return "", err
	}
	if n > maxMetaString {
		return "", fmt.Errorf("string of %d bytes", n)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r.r, b); err != nil {
		return "", io.ErrUnexpectedEOF
	}
	return string(b), nil
}

func (r *metaReader) scalar(t uint32) (any, error) {
	var width int
	switch t {
	case ggufUint8, ggufInt8, ggufBool:
		width = 1
	case ggufUint16, ggufInt16:
		width = 2
	case ggufUint32, ggufInt32, ggufFloat32:
		width = 4
	case ggufUint64, ggufInt64, ggufFloat64:
		width = 8
	case ggufString:
		return r.str()
	default:
		return nil, fmt.Errorf("unknown value type %d", t)
	}
	b, err := r.fixed(width)
	if err != nil {
		return nil, err
	}
	le := binary.LittleEndian
	switch t {
	case ggufUint8:
		return b[0], nil
	case ggufInt8:
		return int8(b[0]), nil
	case ggufBool:
		return b[0] != 0, nil
	case ggufUint16:
		return le.Uint16(b), nil
	case ggufInt16:
		return int16(le.Uint16(b)), nil
	case ggufUint32:
		return le.Uint32(b), nil
	case ggufInt32:
		return int32(le.Uint32(b)), nil
	case ggufFloat32:
		return math.Float32frombits(le.Uint32(b)), nil
	case ggufUint64:
		return le.Uint64(b), nil
	case ggufInt64:
		return int64(le.Uint64(b)), nil
	default: // ggufFloat64
		return math.Float64frombits(le.Uint64(b)), nil
	}
}

// maxMetaArray bounds one array (vocabularies hold a few hundred
// thousand tokens).
const maxMetaArray = 1 << 24

func readArray[T any](r *metaReader, n uint64, t uint32) ([]T, error) {
	out := make([]T, n)
	for i := range out {
		v, err := r.scalar(t)
		if err != nil {
			return nil, err
		}
		out[i] = v.(T)
	}
	return out, nil
}

func (r *metaReader) array() (metaValue, error) {
	et, err := r.u32()
	if err != nil {
		return metaValue{}, err
	}
	n, err := r.u64()
	if err != nil {
		return metaValue{}, err
	}
	if n > maxMetaArray {
		return metaValue{}, fmt.Errorf("array of %d elements", n)
	}
	mv := metaValue{Type: ggufArray, Elem: et}
	switch et {
	case ggufUint8:
		mv.Value, err = readArray[uint8](r, n, et)
	case ggufInt8:
		mv.Value, err = readArray[int8](r, n, et)
	case ggufUint16:
		mv.Value, err = readArray[uint16](r, n, et)
	case ggufInt16:
		mv.Value, err = readArray[int16](r, n, et)
	case ggufUint32:
		mv.Value, err = readArray[uint32](r, n, et)
	case ggufInt32:
		mv.Value, err = readArray[int32](r, n, et)
	case ggufFloat32:
		mv.Value, err = readArray[float32](r, n, et)
	case ggufBool:
		mv.Value, err = readArray[bool](r, n, et)
	case ggufString:
		mv.Value, err = readArray[string](r, n, et)
	case ggufUint64:
		mv.Value, err = readArray[uint64](r, n, et)
	case ggufInt64:
		mv.Value, err = readArray[int64](r, n, et)
	case ggufFloat64:
		mv.Value, err = readArray[float64](r, n, et)
	default:
		return metaValue{}, fmt.Errorf("array of %s is not supported", ggufTypeName(et))
	}
	return mv, err
}

func decodeGGUFMeta(br *bufio.Reader) (*ggufMeta, error) {
	r := &metaReader{r: br}
	magic, err := r.fixed(4)
	if err != nil || string(magic) != "GGUF" {
		return nil, errors.New("not a GGUF file")
	}
	m := &ggufMeta{Values: map[string]metaValue{}}
	if m.Version, err = r.u32(); err != nil {
		return nil, err
	}
	if m.Version != 2 && m.Version != 3 {
		return nil, fmt.Errorf("GGUF version %d is not supported (want 2 or 3)", m.Version)
	}
	if m.Tensors, err = r.u64(); err != nil {
		return nil, err
	}
	nkv, err := r.u64()
	if err != nil {
		return nil, err
	}
	if nkv > 1<<20 {
		return nil, fmt.Errorf("%d metadata keys", nkv)
	}
	for i := uint64(0); i < nkv; i++ {
		key, err := r.str()
		if err != nil {
			return nil, fmt.Errorf("metadata key %d: %w", i, err)
		}
		t, err := r.u32()
		if err != nil {
			return nil, fmt.Errorf("metadata %s: %w", key, err)
		}
		var mv metaValue
		if t == ggufArray {
			mv, err = r.array()
		} else {
			var v any
			v, err = r.scalar(t)
			mv = metaValue{Type: t, Value: v}
		}
		if err != nil {
			return nil, fmt.Errorf("metadata %s: %w", key, err)
		}
		if _, dup := m.Values[key]; dup {
			return nil, fmt.Errorf("metadata key %s appears twice", key)
		}
		m.Keys = append(m.Keys, key)
		m.Values[key] = mv
	}
	return m, nil
}

// writable reports whether ggml.WriteGGUF writes v with the same GGUF type
// it was read with. It writes int32, uint32, int64, uint64, float32, bool
// and string scalars and arrays of int32, uint32, int64, float32, bool and
// string; not 8- or 16-bit integers, float64, or uint64 arrays.
func (v metaValue) writable() bool {
	switch v.Type {
	case ggufInt32, ggufUint32, ggufInt64, ggufUint64, ggufFloat32, ggufBool, ggufString:
		return true
	case ggufArray:
		switch v.Elem {
		case ggufInt32, ggufUint32, ggufInt64, ggufFloat32, ggufBool, ggufString:
			return true
		}
	}
	return false
}

func (v metaValue) typeString() string {
	if v.Type == ggufArray {
		return "array of " + ggufTypeName(v.Elem)
	}
	return ggufTypeName(v.Type)
}
