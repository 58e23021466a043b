package gguf

// GGUF is llama.cpp's model file format. All numbers are little-endian:
//
//	"GGUF", u32 version, u64 tensor count, u64 metadata key count
//	per key:    string key, u32 value type, value
//	per tensor: string name, u32 dimension count, u64 per dimension
//	            (first dimension first), u32 ggml type, u64 data offset
//	zero padding to general.alignment (32 when absent), tensor data
//
// A string is a u64 byte count and the bytes; an array value is a u32
// element type, a u64 element count and the elements. A tensor's offset
// counts from the start of the data section and is a multiple of the
// alignment. This file reads versions 2 and 3; gguf_write.go writes 3.

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
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

// ggufWidth is the encoded size of a scalar of type t; for a string, the
// size of its length prefix (its smallest encoding). 0 for an unknown type.
func ggufWidth(t uint32) int {
	switch t {
	case ggufUint8, ggufInt8, ggufBool:
		return 1
	case ggufUint16, ggufInt16:
		return 2
	case ggufUint32, ggufInt32, ggufFloat32:
		return 4
	case ggufUint64, ggufInt64, ggufFloat64, ggufString:
		return 8
	}
	return 0
}

// ggufDefaultAlignment applies when a file has no general.alignment.
const ggufDefaultAlignment = 32

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
	Version     uint32
	TensorCount uint64
	Keys        []string
	Values      map[string]metaValue
}

// ggufTensorInfo describes one tensor of a GGUF file.
type ggufTensorInfo struct {
	Name  string
	Type  ggmlType
	Shape []uint64 // first dimension first
	// Offset is where the data starts, from the start of the data section.
	Offset uint64
}

// Elements is the number of values in the tensor.
func (t ggufTensorInfo) Elements() uint64 {
	n := uint64(1)
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// ggufFile is a GGUF file's header: metadata and tensor infos.
type ggufFile struct {
	ggufMeta
	Tensors   []ggufTensorInfo // in file order
	Alignment uint64
	// DataOffset is where the data section starts in the file.
	DataOffset uint64
}

// readGGUFMeta reads the header and metadata of a GGUF file (versions 2
// and 3), without its tensors.
func readGGUFMeta(path string) (*ggufMeta, error) {
	g, err := readGGUFFile(path, false)
	if err != nil {
		return nil, err
	}
	return &g.ggufMeta, nil
}

// readGGUF reads a GGUF file's metadata and tensor infos.
func readGGUF(path string) (*ggufFile, error) { return readGGUFFile(path, true) }

func readGGUFFile(path string, tensors bool) (*ggufFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	g, err := decodeGGUF(f, st.Size(), tensors)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return g, nil
}

// errGGUFTruncated: the input ends before what its header announces.
var errGGUFTruncated = errors.New("truncated GGUF file")

// ggufReader reads GGUF fields from r, which holds size bytes. Every count
// and length is checked against the bytes left before anything is
// allocated, so a corrupt header cannot ask for more memory than the file
// could fill.
type ggufReader struct {
	r    *bufio.Reader
	pos  int64 // bytes consumed
	size int64
	buf  [8]byte
}

func (r *ggufReader) left() int64 { return r.size - r.pos }

func (r *ggufReader) truncated(need uint64) error {
	return fmt.Errorf("%w: %d more bytes needed at offset %d of %d", errGGUFTruncated, need, r.pos, r.size)
}

func (r *ggufReader) read(b []byte) error {
	if int64(len(b)) > r.left() {
		return r.truncated(uint64(len(b)))
	}
	if _, err := io.ReadFull(r.r, b); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return r.truncated(uint64(len(b)))
		}
		return err
	}
	r.pos += int64(len(b))
	return nil
}

func (r *ggufReader) fixed(n int) ([]byte, error) {
	if err := r.read(r.buf[:n]); err != nil {
		return nil, err
	}
	return r.buf[:n], nil
}

func (r *ggufReader) u32() (uint32, error) {
	b, err := r.fixed(4)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(b), nil
}

func (r *ggufReader) u64() (uint64, error) {
	b, err := r.fixed(8)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b), nil
}

// count reads an element count and checks that n elements of at least
// minSize bytes each fit in what is left, and that n is at most limit.
func (r *ggufReader) count(what string, minSize, limit uint64) (uint64, error) {
	n, err := r.u64()
	if err != nil {
		return 0, err
	}
	if n > limit {
		return 0, fmt.Errorf("%s count %d is over the limit of %d", what, n, limit)
	}
	if hi, lo := bits.Mul64(n, minSize); hi != 0 || lo > uint64(r.left()) {
		return 0, fmt.Errorf("%w: %d %ss do not fit in the %d bytes left at offset %d", errGGUFTruncated, n, what, r.left(), r.pos)
	}
	return n, nil
}

// maxMetaString bounds one string (a chat template is a few tens of kB).
const maxMetaString = 64 << 20

func (r *ggufReader) str() (string, error) {
	n, err := r.count("string byte", 1, maxMetaString)
	if err != nil {
		return "", err
	}
	b := make([]byte, n)
	if err := r.read(b); err != nil {
		return "", err
	}
	return string(b), nil
}

func (r *ggufReader) scalar(t uint32) (any, error) {
	if t == ggufString {
		return r.str()
	}
	width := ggufWidth(t)
	if width == 0 {
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

func readArray[T any](r *ggufReader, n uint64, t uint32) ([]T, error) {
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

func (r *ggufReader) array() (metaValue, error) {
	et, err := r.u32()
	if err != nil {
		return metaValue{}, err
	}
	width := ggufWidth(et)
	if width == 0 {
		return metaValue{}, fmt.Errorf("array of %s is not supported", ggufTypeName(et))
	}
	n, err := r.count("array element", uint64(width), maxMetaArray)
	if err != nil {
		return metaValue{}, err
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
	default: // ggufFloat64
		mv.Value, err = readArray[float64](r, n, et)
	}
	return mv, err
}

// ggmlMaxDims is the most dimensions a ggml tensor has.
const ggmlMaxDims = 4

// Smallest encodings, for bounding counts by the bytes left: a key is an
// empty string, a type and a 1-byte value; a tensor info an empty name, no
// dimensions, a type and an offset.
const (
	minKVSize         = 8 + 4 + 1
	minTensorInfoSize = 8 + 4 + 4 + 8
)

// decodeGGUF reads a GGUF header from r, which holds size bytes: the
// metadata, and with tensors also the tensor infos, which it checks (shape,
// type, data within the file). A tensor of a type it does not know is kept
// unchecked, so that files of newer ggml types can still be inspected.
func decodeGGUF(in io.Reader, size int64, tensors bool) (*ggufFile, error) {
	r := &ggufReader{r: bufio.NewReaderSize(in, 1<<16), size: size}
	magic := make([]byte, 4)
	if err := r.read(magic); err != nil || string(magic) != "GGUF" {
		return nil, errors.New("not a GGUF file")
	}
	g := &ggufFile{ggufMeta: ggufMeta{Values: map[string]metaValue{}}}
	var err error
	if g.Version, err = r.u32(); err != nil {
		return nil, err
	}
	if g.Version != 2 && g.Version != 3 {
		return nil, fmt.Errorf("GGUF version %d is not supported (want 2 or 3)", g.Version)
	}
	if g.TensorCount, err = r.u64(); err != nil {
		return nil, err
	}
	nkv, err := r.count("metadata key", minKVSize, 1<<20)
	if err != nil {
		return nil, err
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
		if _, dup := g.Values[key]; dup {
			return nil, fmt.Errorf("metadata key %s appears twice", key)
		}
		g.Keys = append(g.Keys, key)
		g.Values[key] = mv
	}
	if !tensors {
		return g, nil
	}

	g.Alignment = ggufDefaultAlignment
	if v, ok := g.Values["general.alignment"]; ok {
		a, isU32 := v.Value.(uint32)
		if v.Type != ggufUint32 || !isU32 {
			return nil, fmt.Errorf("general.alignment is a %s, want uint32", v.typeString())
		}
		if a == 0 || a&(a-1) != 0 {
			return nil, fmt.Errorf("general.alignment %d is not a power of 2", a)
		}
		g.Alignment = uint64(a)
	}

	// The count is checked against the bytes left before it sizes anything.
	if hi, lo := bits.Mul64(g.TensorCount, minTensorInfoSize); hi != 0 || lo > uint64(r.left()) {
		return nil, fmt.Errorf("%w: %d tensor infos do not fit in the %d bytes left at offset %d", errGGUFTruncated, g.TensorCount, r.left(), r.pos)
	}
	g.Tensors = make([]ggufTensorInfo, 0, g.TensorCount)
	names := make(map[string]bool, g.TensorCount)
	for i := uint64(0); i < g.TensorCount; i++ {
		t, err := r.tensorInfo()
		if err != nil {
			return nil, fmt.Errorf("tensor %d: %w", i, err)
		}
		if names[t.Name] {
			return nil, fmt.Errorf("tensor %s appears twice", t.Name)
		}
		names[t.Name] = true
		g.Tensors = append(g.Tensors, t)
	}
	g.DataOffset = uint64(r.pos)
	if len(g.Tensors) > 0 {
		g.DataOffset = alignUp(g.DataOffset, g.Alignment)
	}
	for _, t := range g.Tensors {
		if err := g.checkData(t, uint64(size)); err != nil {
			return nil, fmt.Errorf("tensor %s: %w", t.Name, err)
		}
	}
	return g, nil
}

func (r *ggufReader) tensorInfo() (ggufTensorInfo, error) {
	var t ggufTensorInfo
	var err error
	if t.Name, err = r.str(); err != nil {
		return t, err
	}
	nd, err := r.u32()
	if err != nil {
		return t, fmt.Errorf("%s: %w", t.Name, err)
	}
	if nd > ggmlMaxDims {
		return t, fmt.Errorf("%s: %d dimensions, at most %d allowed", t.Name, nd, ggmlMaxDims)
	}
	t.Shape = make([]uint64, nd)
	elems := uint64(1)
	for j := range t.Shape {
		if t.Shape[j], err = r.u64(); err != nil {
			return t, fmt.Errorf("%s: %w", t.Name, err)
		}
		hi, lo := bits.Mul64(elems, t.Shape[j])
		if t.Shape[j] > math.MaxInt64 || hi != 0 || lo > math.MaxInt64 {
			return t, fmt.Errorf("%s: shape %v has too many elements", t.Name, t.Shape[:j+1])
		}
		elems = lo
	}
	typ, err := r.u32()
	if err != nil {
		return t, fmt.Errorf("%s: %w", t.Name, err)
	}
	t.Type = ggmlType(typ)
	if t.Offset, err = r.u64(); err != nil {
		return t, fmt.Errorf("%s: %w", t.Name, err)
	}
	return t, nil
}

// checkData checks that a tensor of a known type has a whole number of
// blocks per row and aligned data that lies within a file of size bytes.
func (g *ggufFile) checkData(t ggufTensorInfo, size uint64) error {
	nbytes, err := t.Type.bytes(t.Shape)
	if errors.Is(err, errUnknownGGMLType) {
		return nil
	}
	if err != nil {
		return err
	}
	if t.Offset%g.Alignment != 0 {
		return fmt.Errorf("data offset %d is not a multiple of the alignment %d", t.Offset, g.Alignment)
	}
	start, c1 := bits.Add64(g.DataOffset, t.Offset, 0)
	end, c2 := bits.Add64(start, nbytes, 0)
	if c1 != 0 || c2 != 0 || end > size {
		return fmt.Errorf("%w: its data (%d bytes at offset %d of the data section at %d) ends past the end of the file (%d bytes)",
			errGGUFTruncated, nbytes, t.Offset, g.DataOffset, size)
	}
	return nil
}

// alignUp rounds n up to a multiple of align (a power of two).
func alignUp(n, align uint64) uint64 {
	return (n + align - 1) &^ (align - 1)
}

// stringValue returns a string value, "" when key is absent or not a string.
func (m *ggufMeta) stringValue(key string) string {
	s, _ := m.Values[key].Value.(string)
	return s
}

// stringsValue returns a string array, nil when key is absent or not one.
func (m *ggufMeta) stringsValue(key string) []string {
	s, _ := m.Values[key].Value.([]string)
	return s
}

// uintValue returns an unsigned integer value (uint32 or another width), and
// whether key holds one.
func (m *ggufMeta) uintValue(key string) (uint64, bool) {
	switch v := m.Values[key].Value.(type) {
	case uint8:
		return uint64(v), true
	case uint16:
		return uint64(v), true
	case uint32:
		return uint64(v), true
	case uint64:
		return v, true
	}
	return 0, false
}

// writable reports whether writeGGUF writes v with the same GGUF type it
// was read with: int32, uint32, int64, uint64, float32, bool and string
// scalars and arrays of int32, uint32, int64, float32, bool and string;
// not 8- or 16-bit integers, float64, or uint64 arrays.
func (v metaValue) writable() bool {
	t, elem, ok := ggufValueType(v.Value)
	if !ok || t != v.Type {
		return false
	}
	return t != ggufArray || elem == v.Elem
}

func (v metaValue) typeString() string {
	if v.Type == ggufArray {
		return "array of " + ggufTypeName(v.Elem)
	}
	return ggufTypeName(v.Type)
}
