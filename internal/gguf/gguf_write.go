package gguf

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// ggufTensor is a tensor to write: name, ggml type, shape (first dimension
// first) and Data, which writes exactly the tensor's bytes.
type ggufTensor struct {
	Name  string
	Type  ggmlType
	Shape []uint64
	Data  io.WriterTo
}

// ggufValueType is the GGUF type writeGGUF gives a Go value (elem is the
// element type of an array), and whether it writes that value at all.
func ggufValueType(v any) (typ, elem uint32, ok bool) {
	switch v.(type) {
	case int32:
		return ggufInt32, 0, true
	case uint32:
		return ggufUint32, 0, true
	case int64:
		return ggufInt64, 0, true
	case uint64:
		return ggufUint64, 0, true
	case float32:
		return ggufFloat32, 0, true
	case bool:
		return ggufBool, 0, true
	case string:
		return ggufString, 0, true
	case []int32:
		return ggufArray, ggufInt32, true
	case []uint32:
		return ggufArray, ggufUint32, true
	case []int64:
		return ggufArray, ggufInt64, true
	case []float32:
		return ggufArray, ggufFloat32, true
	case []bool:
		return ggufArray, ggufBool, true
	case []string:
		return ggufArray, ggufString, true
	}
	return 0, 0, false
}

// writeGGUF writes a GGUF v3 file: the metadata kv, keys sorted bytewise,
// each value with the GGUF type of its Go type (ggufValueType), then the
// tensors, ordered by layer ("blk.N." names by N, the others after them)
// and by name within a layer, each one's data aligned to general.alignment
// (a uint32, 32 when absent). Zero padding is written only before data
// (the file ends with the last tensor's bytes). Keys are written as they
// are, so they must carry their prefixes (general., tokenizer., <arch>.).
//
// When w is an *os.File, the tensors' data is written concurrently at
// their offsets (the file must be empty from its current position on);
// otherwise it is written in order.
func writeGGUF(w io.Writer, kv map[string]any, ts []ggufTensor) error {
	l, err := layoutGGUF(kv, ts)
	if err != nil {
		return err
	}
	if f, ok := w.(*os.File); ok {
		return l.writeFile(f)
	}
	return l.writeStream(w)
}

// ggufLayout is a file about to be written: its header bytes (without the
// padding before the data) and its tensors with their data offsets.
type ggufLayout struct {
	header    []byte
	dataStart uint64 // header length rounded up to the alignment
	tensors   []laidOutTensor
}

type laidOutTensor struct {
	ggufTensor
	offset, size uint64
}

func layoutGGUF(kv map[string]any, ts []ggufTensor) (*ggufLayout, error) {
	align := uint64(ggufDefaultAlignment)
	if v, ok := kv["general.alignment"]; ok {
		a, isU32 := v.(uint32)
		if !isU32 || a == 0 || a&(a-1) != 0 {
			return nil, fmt.Errorf("gguf: general.alignment must be a uint32 power of 2, not %T %v", v, v)
		}
		align = uint64(a)
	}

	l := &ggufLayout{tensors: make([]laidOutTensor, len(ts))}
	for i, t := range ts {
		l.tensors[i].ggufTensor = t
	}
	sort.SliceStable(l.tensors, func(i, j int) bool {
		a, b := l.tensors[i].Name, l.tensors[j].Name
		if la, lb := layerOf(a), layerOf(b); la != lb {
			return la < lb
		}
		return a < b
	})
	var off uint64
	for i := range l.tensors {
		t := &l.tensors[i]
		if i > 0 && t.Name == l.tensors[i-1].Name {
			return nil, fmt.Errorf("gguf: tensor %s appears twice", t.Name)
		}
		if len(t.Shape) > ggmlMaxDims {
			return nil, fmt.Errorf("gguf: tensor %s has %d dimensions, at most %d allowed", t.Name, len(t.Shape), ggmlMaxDims)
		}
		size, err := t.Type.bytes(t.Shape)
		if err != nil {
			return nil, fmt.Errorf("gguf: tensor %s: %w", t.Name, err)
		}
		if t.Data == nil {
			return nil, fmt.Errorf("gguf: tensor %s has no data", t.Name)
		}
		t.offset, t.size = off, size
		off = alignUp(off+size, align)
	}

	var e ggufEncoder
	e.raw([]byte("GGUF"))
	e.u32(3)
	e.u64(uint64(len(l.tensors)))
	e.u64(uint64(len(kv)))
	keys := make([]string, 0, len(kv))
	for k := range kv {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		e.str(k)
		if err := e.value(kv[k]); err != nil {
			return nil, fmt.Errorf("gguf: metadata %s: %w", k, err)
		}
	}
	for _, t := range l.tensors {
		e.str(t.Name)
		e.u32(uint32(len(t.Shape)))
		for _, d := range t.Shape {
			e.u64(d)
		}
		e.u32(uint32(t.Type))
		e.u64(t.offset)
	}
	l.header = e.buf.Bytes()
	l.dataStart = alignUp(uint64(len(l.header)), align)
	return l, nil
}

// layerOf is N for a tensor named "blk.N.…", and math.MaxInt (after every
// layer) for any other name.
func layerOf(name string) int {
	rest, ok := strings.CutPrefix(name, "blk.")
	if !ok {
		return math.MaxInt
	}
	num, _, ok := strings.Cut(rest, ".")
	if !ok {
		return math.MaxInt
	}
	n, err := strconv.Atoi(num)
	if err != nil {
		return math.MaxInt
	}
	return n
}

// end is where the file ends: after the last tensor bytes, or after the
// header when no tensor has any.
func (l *ggufLayout) end() uint64 {
	end := uint64(len(l.header))
	for _, t := range l.tensors {
		if t.size > 0 {
			end = max(end, l.dataStart+t.offset+t.size)
		}
	}
	return end
}

func (l *ggufLayout) writeStream(w io.Writer) error {
	bw := bufio.NewWriterSize(w, 1<<20)
	if _, err := bw.Write(l.header); err != nil {
		return err
	}
	pos := uint64(len(l.header))
	for _, t := range l.tensors {
		if t.size > 0 {
			if err := writeZeros(bw, l.dataStart+t.offset-pos); err != nil {
				return err
			}
			pos = l.dataStart + t.offset + t.size
		}
		if err := t.writeData(bw); err != nil {
			return err
		}
	}
	return bw.Flush()
}

func (l *ggufLayout) writeFile(f *os.File) error {
	base, err := f.Seek(0, io.SeekCurrent)
	if err != nil { // a pipe, say
		return l.writeStream(f)
	}
	if _, err := f.Write(l.header); err != nil {
		return err
	}
	// The padding is left as holes, which read as zeros.
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	failed := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return firstErr != nil
	}
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	for _, t := range l.tensors {
		sem <- struct{}{}
		if failed() {
			<-sem
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := t.writeData(io.NewOffsetWriter(f, base+int64(l.dataStart+t.offset))); err != nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	_, err = f.Seek(base+int64(l.end()), io.SeekStart)
	return err
}

// writeData writes the tensor's data to w, failing when Data writes more
// or fewer bytes than the tensor holds.
func (t *laidOutTensor) writeData(w io.Writer) error {
	ew := &exactWriter{w: w, left: t.size}
	if _, err := t.Data.WriteTo(ew); err != nil {
		return fmt.Errorf("gguf: tensor %s: %w", t.Name, err)
	}
	if ew.left != 0 {
		return fmt.Errorf("gguf: tensor %s: %d of its %d bytes were written", t.Name, t.size-ew.left, t.size)
	}
	return nil
}

var errTensorOverrun = errors.New("more bytes written than the tensor holds")

// exactWriter passes on at most left bytes.
type exactWriter struct {
	w    io.Writer
	left uint64
}

func (e *exactWriter) Write(p []byte) (int, error) {
	if uint64(len(p)) > e.left {
		return 0, errTensorOverrun
	}
	n, err := e.w.Write(p)
	e.left -= uint64(n)
	return n, err
}

func writeZeros(w io.Writer, n uint64) error {
	var zeros [64]byte
	for n > 0 {
		k := min(n, uint64(len(zeros)))
		if _, err := w.Write(zeros[:k]); err != nil {
			return err
		}
		n -= k
	}
	return nil
}

// ggufEncoder builds GGUF header bytes in memory.
type ggufEncoder struct {
	buf bytes.Buffer
	tmp [8]byte
}

func (e *ggufEncoder) raw(b []byte) { e.buf.Write(b) }

func (e *ggufEncoder) u8(v uint8) { e.buf.WriteByte(v) }

func (e *ggufEncoder) u32(v uint32) {
	binary.LittleEndian.PutUint32(e.tmp[:4], v)
	e.buf.Write(e.tmp[:4])
}

func (e *ggufEncoder) u64(v uint64) {
	binary.LittleEndian.PutUint64(e.tmp[:8], v)
	e.buf.Write(e.tmp[:8])
}

func (e *ggufEncoder) str(s string) {
	e.u64(uint64(len(s)))
	e.buf.WriteString(s)
}

func (e *ggufEncoder) boolean(b bool) {
	if b {
		e.u8(1)
	} else {
		e.u8(0)
	}
}

// value writes a value's type and encoding.
func (e *ggufEncoder) value(v any) error {
	typ, elem, ok := ggufValueType(v)
	if !ok {
		return fmt.Errorf("a %T cannot be written", v)
	}
	e.u32(typ)
	if typ == ggufArray {
		e.u32(elem)
	}
	switch v := v.(type) {
	case int32:
		e.u32(uint32(v))
	case uint32:
		e.u32(v)
	case int64:
		e.u64(uint64(v))
	case uint64:
		e.u64(v)
	case float32:
		e.u32(math.Float32bits(v))
	case bool:
		e.boolean(v)
	case string:
		e.str(v)
	case []int32:
		e.u64(uint64(len(v)))
		for _, x := range v {
			e.u32(uint32(x))
		}
	case []uint32:
		e.u64(uint64(len(v)))
		for _, x := range v {
			e.u32(x)
		}
	case []int64:
		e.u64(uint64(len(v)))
		for _, x := range v {
			e.u64(uint64(x))
		}
	case []float32:
		e.u64(uint64(len(v)))
		for _, x := range v {
			e.u32(math.Float32bits(x))
		}
	case []bool:
		e.u64(uint64(len(v)))
		for _, x := range v {
			e.boolean(x)
		}
	case []string:
		e.u64(uint64(len(v)))
		for _, x := range v {
			e.str(x)
		}
	}
	return nil
}
