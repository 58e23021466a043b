package gguf

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// The synthetic models' bytes are those the GGUF writer verdict used
// before writeGGUF produced for the same options, recorded before the
// switch: engine tests and cached models rely on them.
func TestSynthBytesMatchTheEarlierWriter(t *testing.T) {
	t.Parallel()
	cases := []struct {
		o    SynthOptions
		want string
	}{
		{SynthOptions{Shape: "tiny", Seed: 1}, "34d5e6c3c1351bbf5de846de8b16a1f94ed8e46cdb022cdaa3aa816b39ed8455"},
		{SynthOptions{Shape: "tiny", Seed: 1, Chat: ChatChatML}, "552dc4823ad4ba3097d0a4ae19f54a1f7047e2ff5b7952d589efea77ccbd88dc"},
		{SynthOptions{Shape: "tiny", Seed: 7, Chat: ChatLlama3}, "160faca3164e124116f068b3598ac6a0e180874786bb48568d7c456c480c8bc5"},
		{SynthOptions{Arch: ArchQwen35, Shape: "tiny", Seed: 1}, "f1a430ae777d970a6b88b8d3f854689720c2c8ffda989656375bd57363fdb186"},
		{SynthOptions{Arch: ArchQwen35, Shape: "tiny", Seed: 5, Chat: ChatChatML}, "145057c558e59d651e22f6afcd8a809acdc1ededd1bc012865c7576489f534ee"},
	}
	dir := t.TempDir()
	for i, c := range cases {
		p := filepath.Join(dir, "m.gguf")
		require.NoError(t, Synth(p, c.o), "case %d", i)
		require.Equal(t, c.want, fileSum(t, p), "case %d: %+v", i, c.o)
	}
	if testing.Short() {
		return
	}
	// medium is F16 (64 MB): the F16 path and a larger data section.
	p := filepath.Join(dir, "medium.gguf")
	require.NoError(t, Synth(p, SynthOptions{Shape: "medium", Seed: 1}))
	require.Equal(t, "ee623eee0dde3ef0c49a2e6cfc0aa9979ca6379b4a79cb1c66030d982dcf7937", fileSum(t, p))
}

// rawTensor writes fixed bytes.
type rawTensor []byte

func (r rawTensor) WriteTo(w io.Writer) (int64, error) {
	n, err := w.Write(r)
	return int64(n), err
}

func ramp(n int) rawTensor {
	b := make(rawTensor, n)
	for i := range b {
		b[i] = byte(i*7 + n)
	}
	return b
}

// roundTripKV holds every value type writeGGUF writes.
func roundTripKV() map[string]any {
	return map[string]any{
		"general.architecture": "llama",
		"general.alignment":    uint32(64),
		"general.u32":          uint32(7),
		"general.i32":          int32(-7),
		"general.u64":          uint64(1 << 40),
		"general.i64":          int64(-1 << 40),
		"general.f32":          float32(0.25),
		"general.bool":         true,
		"general.false":        false,
		"general.empty":        "",
		"general.strs":         []string{"a", "", "ü"},
		"general.i32s":         []int32{1, -2},
		"general.u32s":         []uint32{3, 4},
		"general.i64s":         []int64{5, math.MinInt64},
		"general.f32s":         []float32{0.5, float32(math.Inf(-1))},
		"general.bools":        []bool{true, false},
		"general.none":         []string{},
	}
}

func roundTripTensors() []ggufTensor {
	return []ggufTensor{
		{Name: "output.weight", Type: ggmlF16, Shape: []uint64{3, 5}, Data: ramp(30)},
		{Name: "blk.10.ffn_up.weight", Type: ggmlF32, Shape: []uint64{2, 2}, Data: ramp(16)},
		{Name: "blk.2.attn_q.weight", Type: 8 /* Q8_0 */, Shape: []uint64{64}, Data: ramp(68)},
		{Name: "blk.2.attn_k.weight", Type: ggmlF32, Shape: []uint64{1}, Data: ramp(4)},
		{Name: "blk.2.empty", Type: ggmlF32, Shape: []uint64{0, 4}, Data: ramp(0)},
		{Name: "blk.x.odd", Type: ggmlF32, Shape: []uint64{3}, Data: ramp(12)},
		{Name: "token_embd.weight", Type: ggmlF32, Shape: []uint64{2, 3, 1, 1}, Data: ramp(24)},
	}
}

func TestGGUFRoundTrip(t *testing.T) {
	t.Parallel()
	kv := roundTripKV()
	var buf bytes.Buffer
	require.NoError(t, writeGGUF(&buf, kv, roundTripTensors()))
	b := buf.Bytes()

	// The file path (data written concurrently at its offsets) writes the
	// same bytes as the stream path.
	p := filepath.Join(t.TempDir(), "rt.gguf")
	f, err := os.Create(p)
	require.NoError(t, err)
	require.NoError(t, writeGGUF(f, kv, roundTripTensors()))
	pos, err := f.Seek(0, io.SeekCurrent)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	fb, err := os.ReadFile(p)
	require.NoError(t, err)
	require.Equal(t, b, fb)
	require.Equal(t, int64(len(b)), pos, "the file is left positioned at its end")

	g, err := decodeGGUF(bytes.NewReader(b), int64(len(b)), true)
	require.NoError(t, err)
	require.Equal(t, uint32(3), g.Version)
	require.Equal(t, uint64(64), g.Alignment)
	require.Len(t, g.Keys, len(kv))
	for i := 1; i < len(g.Keys); i++ {
		require.Less(t, g.Keys[i-1], g.Keys[i], "keys are sorted")
	}
	want := map[string]metaValue{}
	for k, v := range kv {
		typ, elem, ok := ggufValueType(v)
		require.True(t, ok, k)
		want[k] = metaValue{Type: typ, Elem: elem, Value: v}
	}
	require.Equal(t, want, g.Values)
	for k, v := range g.Values {
		require.True(t, v.writable(), k)
	}

	// Tensors come by layer number, then by name; the others last.
	var names []string
	for _, tt := range g.Tensors {
		names = append(names, tt.Name)
	}
	require.Equal(t, []string{
		"blk.2.attn_k.weight", "blk.2.attn_q.weight", "blk.2.empty", "blk.10.ffn_up.weight",
		"blk.x.odd", "output.weight", "token_embd.weight",
	}, names)
	require.Zero(t, g.DataOffset%64)
	byName := map[string]ggufTensor{}
	for _, tt := range roundTripTensors() {
		byName[tt.Name] = tt
	}
	var next uint64
	for _, tt := range g.Tensors {
		src := byName[tt.Name]
		require.Equal(t, src.Type, tt.Type, tt.Name)
		require.Equal(t, src.Shape, tt.Shape, tt.Name)
		require.Equal(t, next, tt.Offset, "%s follows the previous tensor, aligned", tt.Name)
		data := src.Data.(rawTensor)
		start := g.DataOffset + tt.Offset
		if len(data) > 0 {
			require.Equal(t, []byte(data), b[start:start+uint64(len(data))], tt.Name)
		}
		next = alignUp(tt.Offset+uint64(len(data)), 64)
	}
	last := g.Tensors[len(g.Tensors)-1]
	require.Equal(t, int(g.DataOffset+last.Offset+24), len(b), "the file ends with the last tensor's data")
	// Between the header and the data, and between tensors, only zeros.
	covered := make([]bool, len(b))
	for _, tt := range g.Tensors {
		for i := uint64(0); i < uint64(len(byName[tt.Name].Data.(rawTensor))); i++ {
			covered[g.DataOffset+tt.Offset+i] = true
		}
	}
	headerEnd := len(b)
	for i := len(b) - 1; i >= 0; i-- {
		if !covered[i] && b[i] != 0 {
			headerEnd = i + 1
			break
		}
	}
	require.LessOrEqual(t, uint64(headerEnd), g.DataOffset, "no stray bytes in the data section")
	require.Greater(t, uint64(headerEnd), g.DataOffset-64, "the header ends within one alignment of the data")

	// Metadata only.
	m, err := decodeGGUF(bytes.NewReader(b), int64(len(b)), false)
	require.NoError(t, err)
	require.Equal(t, g.ggufMeta, m.ggufMeta)
	require.Nil(t, m.Tensors)
}

func TestGGUFWithoutTensorsEndsAfterItsHeader(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	require.NoError(t, writeGGUF(&buf, map[string]any{"general.architecture": "x"}, nil))
	// magic, version, counts, then one key: 8+20 bytes, type, 8+1 bytes.
	require.Equal(t, 4+4+8+8+(8+20+4+8+1), buf.Len())
	g, err := decodeGGUF(bytes.NewReader(buf.Bytes()), int64(buf.Len()), true)
	require.NoError(t, err)
	require.Empty(t, g.Tensors)
	require.Equal(t, uint64(buf.Len()), g.DataOffset)
}

func TestWriteGGUFRejectsWhatItCannotWrite(t *testing.T) {
	t.Parallel()
	f32 := func(name string, n int) ggufTensor {
		return ggufTensor{Name: name, Type: ggmlF32, Shape: []uint64{uint64(n)}, Data: ramp(4 * n)}
	}
	for name, c := range map[string]struct {
		kv   map[string]any
		ts   []ggufTensor
		want string
	}{
		"uint8":         {kv: map[string]any{"a": uint8(1)}, want: "a uint8 cannot be written"},
		"float64":       {kv: map[string]any{"a": 1.5}, want: "a float64 cannot be written"},
		"uint64 array":  {kv: map[string]any{"a": []uint64{1}}, want: "a []uint64 cannot be written"},
		"int":           {kv: map[string]any{"a": 1}, want: "a int cannot be written"},
		"alignment":     {kv: map[string]any{"general.alignment": int32(32)}, want: "general.alignment"},
		"alignment 24":  {kv: map[string]any{"general.alignment": uint32(24)}, want: "power of 2"},
		"twice":         {ts: []ggufTensor{f32("a", 1), f32("a", 1)}, want: "tensor a appears twice"},
		"unknown type":  {ts: []ggufTensor{{Name: "a", Type: 4, Shape: []uint64{1}, Data: ramp(1)}}, want: "unknown ggml type 4"},
		"partial block": {ts: []ggufTensor{{Name: "a", Type: 8, Shape: []uint64{33}, Data: ramp(34)}}, want: "not whole blocks"},
		"5 dimensions":  {ts: []ggufTensor{{Name: "a", Type: ggmlF32, Shape: []uint64{1, 1, 1, 1, 1}, Data: ramp(4)}}, want: "5 dimensions"},
		"no data":       {ts: []ggufTensor{{Name: "a", Type: ggmlF32, Shape: []uint64{1}}}, want: "no data"},
		"short data":    {ts: []ggufTensor{{Name: "a", Type: ggmlF32, Shape: []uint64{2}, Data: ramp(4)}}, want: "4 of its 8 bytes"},
		"long data":     {ts: []ggufTensor{{Name: "a", Type: ggmlF32, Shape: []uint64{1}, Data: ramp(8)}}, want: "more bytes written than the tensor holds"},
	} {
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			require.ErrorContains(t, writeGGUF(&buf, c.kv, c.ts), c.want)
			p := filepath.Join(t.TempDir(), "x.gguf")
			f, err := os.Create(p)
			require.NoError(t, err)
			defer f.Close()
			require.ErrorContains(t, writeGGUF(f, c.kv, c.ts), c.want)
		})
	}
}

func TestLayerOf(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]int{
		"blk.0.attn_q.weight": 0, "blk.17.ffn_up.weight": 17, "blk.007.x": 7,
		"blk.x.y": math.MaxInt, "blk.3": math.MaxInt, "token_embd.weight": math.MaxInt,
		"blk..x": math.MaxInt, "blk.99999999999999999999.x": math.MaxInt,
	} {
		require.Equal(t, want, layerOf(name), name)
	}
}

func TestReadGGUFRejectsTruncatedFiles(t *testing.T) {
	t.Parallel()
	p := filepath.Join(t.TempDir(), "tiny.gguf")
	require.NoError(t, Synth(p, SynthOptions{Arch: ArchQwen35, Shape: "tiny", Seed: 1}))
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	g, err := decodeGGUF(bytes.NewReader(b), int64(len(b)), true)
	require.NoError(t, err)

	// Every cut inside the header, and some inside the data, is an error
	// that says the file is truncated.
	var cuts []int
	for n := 4; n < int(g.DataOffset); n += 1 + n/97 {
		cuts = append(cuts, n)
	}
	cuts = append(cuts, int(g.DataOffset)-1, int(g.DataOffset), len(b)/2, len(b)-1)
	for _, n := range cuts {
		_, err := decodeGGUF(bytes.NewReader(b[:n]), int64(n), true)
		require.ErrorIs(t, err, errGGUFTruncated, "cut at %d of %d", n, len(b))
	}
	// A reader that ends early although the size says otherwise.
	_, err = decodeGGUF(bytes.NewReader(b[:1000]), int64(len(b)), true)
	require.ErrorIs(t, err, errGGUFTruncated)

	// Through the file-level functions: Inspect refuses a file whose data
	// is cut; the metadata alone is still readable.
	cut := filepath.Join(t.TempDir(), "cut.gguf")
	require.NoError(t, os.WriteFile(cut, b[:len(b)-100], 0o644))
	_, err = Inspect(cut, false)
	require.ErrorContains(t, err, "not a readable GGUF")
	require.ErrorContains(t, err, "truncated")
	_, err = readGGUFMeta(cut)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(cut, b[:40], 0o644))
	_, err = Inspect(cut, false)
	require.ErrorContains(t, err, "truncated")
}

// ggufBytes builds raw GGUF bytes for malformed-input tests.
type ggufBytes struct{ bytes.Buffer }

func (g *ggufBytes) u32(v uint32) *ggufBytes {
	binary.Write(g, binary.LittleEndian, v)
	return g
}

func (g *ggufBytes) u64(v uint64) *ggufBytes {
	binary.Write(g, binary.LittleEndian, v)
	return g
}

func (g *ggufBytes) str(s string) *ggufBytes {
	g.u64(uint64(len(s)))
	g.WriteString(s)
	return g
}

func header(version uint32, tensors, keys uint64) *ggufBytes {
	g := &ggufBytes{}
	g.WriteString("GGUF")
	return g.u32(version).u64(tensors).u64(keys)
}

func TestReadGGUFRejectsMalformedFiles(t *testing.T) {
	t.Parallel()
	tensor := func(g *ggufBytes, name string, typ uint32, offset uint64, dims ...uint64) *ggufBytes {
		g.str(name).u32(uint32(len(dims)))
		for _, d := range dims {
			g.u64(d)
		}
		return g.u32(typ).u64(offset)
	}
	padded := func(g *ggufBytes, n int) []byte {
		for g.Len()%32 != 0 {
			g.WriteByte(0)
		}
		g.Write(make([]byte, n))
		return g.Bytes()
	}
	dup := header(3, 0, 2)
	dup.str("k").u32(ggufUint8).WriteByte(1)
	dup.str("k").u32(ggufUint8).WriteByte(2)
	cases := map[string]struct {
		b    []byte
		want string
	}{
		"key twice":      {dup.Bytes(), "metadata key k appears twice"},
		"magic":          {[]byte("GGML\x03\x00\x00\x00"), "not a GGUF file"},
		"empty":          {nil, "not a GGUF file"},
		"version":        {header(4, 0, 0).Bytes(), "GGUF version 4"},
		"many keys":      {header(3, 0, 1<<40).Bytes(), "metadata key count"},
		"keys past end":  {header(3, 0, 1000).Bytes(), "truncated"},
		"long key":       {header(3, 0, 1).u64(1 << 50).u64(0).Bytes(), "over the limit"},
		"key past end":   {header(3, 0, 1).u64(100).Bytes(), "truncated"},
		"value type":     {header(3, 0, 1).str("k").u32(13).Bytes(), "unknown value type 13"},
		"array type":     {header(3, 0, 1).str("k").u32(ggufArray).u32(ggufArray).u64(0).Bytes(), "array of array"},
		"huge array":     {header(3, 0, 1).str("k").u32(ggufArray).u32(ggufBool).u64(1 << 62).Bytes(), "over the limit"},
		"array past end": {header(3, 0, 1).str("k").u32(ggufArray).u32(ggufString).u64(1000).u64(0).Bytes(), "truncated"},
		"string in array past end": {header(3, 0, 1).str("k").u32(ggufArray).u32(ggufString).u64(1).u64(1 << 20).Bytes(),
			"truncated"},
		"tensor count":  {header(3, 1<<60, 0).Bytes(), "tensor infos do not fit"},
		"dimensions":    {tensor(header(3, 1, 0), "t", 0, 0, 1, 1, 1, 1, 1).Bytes(), "5 dimensions"},
		"elements":      {tensor(header(3, 1, 0), "t", 0, 0, 1<<32, 1<<32).Bytes(), "too many elements"},
		"negative dim":  {tensor(header(3, 1, 0), "t", 0, 0, 1<<63).Bytes(), "too many elements"},
		"partial block": {padded(tensor(header(3, 1, 0), "t", 8, 0, 33), 64), "not whole blocks"},
		"data past end": {padded(tensor(header(3, 1, 0), "t", 0, 0, 16), 63), "ends past the end of the file"},
		"offset overflow": {padded(tensor(header(3, 1, 0), "t", 0, math.MaxUint64-31, 1), 64),
			"ends past the end of the file"},
		"unaligned":      {padded(tensor(header(3, 1, 0), "t", 0, 4, 1), 64), "not a multiple of the alignment"},
		"tensor twice":   {padded(tensor(tensor(header(3, 2, 0), "t", 0, 0, 1), "t", 0, 32, 1), 64), "tensor t appears twice"},
		"alignment type": {header(3, 0, 1).str("general.alignment").u32(ggufInt32).u32(32).Bytes(), "general.alignment is a int32"},
		"alignment 0":    {header(3, 0, 1).str("general.alignment").u32(ggufUint32).u32(0).Bytes(), "not a power of 2"},
	}
	for name, c := range cases {
		_, err := decodeGGUF(bytes.NewReader(c.b), int64(len(c.b)), true)
		require.ErrorContains(t, err, c.want, name)
	}

	// A tensor of a type this package does not know is kept, unchecked.
	b := padded(tensor(header(3, 1, 0), "t", 99, 0, 7), 0)
	g, err := decodeGGUF(bytes.NewReader(b), int64(len(b)), true)
	require.NoError(t, err)
	require.Equal(t, "type 99", g.Tensors[0].Type.String())
}

func TestGGMLTypeNames(t *testing.T) {
	t.Parallel()
	for typ, want := range map[ggmlType]string{0: "F32", 1: "F16", 2: "Q4_0", 8: "Q8_0", 12: "Q4_K", 14: "Q6_K", 23: "IQ4_XS", 30: "BF16", 39: "MXFP4", 4: "type 4"} {
		require.Equal(t, want, typ.String())
	}
	for ft, want := range map[uint64]string{0: "F32", 1: "F16", 7: "Q8_0", 15: "Q4_K_M", 18: "Q6_K", 30: "IQ4_XS", 32: "BF16", 38: "MXFP4_MOE", 4: "", 1024: ""} {
		require.Equal(t, want, fileTypeName(ft), ft)
	}
	// Sizes: a Q4_K row of 512 values is two 144-byte blocks.
	n, err := ggmlType(12).bytes([]uint64{512, 3})
	require.NoError(t, err)
	require.Equal(t, uint64(2*144*3), n)
	_, err = ggmlType(12).bytes([]uint64{100})
	require.ErrorContains(t, err, "not whole blocks")
	_, err = ggmlType(5).bytes([]uint64{1})
	require.True(t, errors.Is(err, errUnknownGGMLType))
}

func FuzzReadGGUF(f *testing.F) {
	var buf bytes.Buffer
	if err := writeGGUF(&buf, roundTripKV(), roundTripTensors()); err != nil {
		f.Fatal(err)
	}
	b := buf.Bytes()
	f.Add(b)
	f.Add(b[:len(b)/2])
	f.Add(b[:100])
	buf.Reset()
	if err := writeGGUF(&buf, map[string]any{"general.architecture": "llama", "tokenizer.ggml.tokens": []string{"a", "b"}}, nil); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	f.Add(header(2, 0, 0).Bytes())
	f.Fuzz(func(t *testing.T, b []byte) {
		g, err := decodeGGUF(bytes.NewReader(b), int64(len(b)), true)
		m, merr := decodeGGUF(bytes.NewReader(b), int64(len(b)), false)
		if err != nil {
			if g != nil {
				t.Fatal("an error with a result")
			}
			return
		}
		if merr != nil {
			t.Fatalf("the tensors decode but the metadata alone does not: %v", merr)
		}
		if len(g.Keys) != len(m.Keys) || uint64(len(g.Tensors)) != g.TensorCount {
			t.Fatal("counts disagree")
		}
		if len(g.Tensors) > 0 && g.DataOffset%g.Alignment != 0 {
			t.Fatalf("data offset %d is not aligned to %d", g.DataOffset, g.Alignment)
		}
		for _, tt := range g.Tensors {
			n, err := tt.Type.bytes(tt.Shape)
			if err != nil {
				continue // unknown type
			}
			if g.DataOffset+tt.Offset+n > uint64(len(b)) {
				t.Fatalf("tensor %s lies past the end", tt.Name)
			}
		}
	})
}
