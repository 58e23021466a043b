package gguf

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The llama synth is pinned: engine tests and cached models rely on its
// bytes. Changing them is a decision, not an accident.
func TestLlamaSynthBytesArePinned(t *testing.T) {
	t.Parallel()
	p := filepath.Join(t.TempDir(), "tiny.gguf")
	require.NoError(t, Synth(p, SynthOptions{Shape: "tiny", Seed: 1}))
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	sum := sha256.Sum256(b)
	require.Equal(t, "34d5e6c3c1351bbf5de846de8b16a1f94ed8e46cdb022cdaa3aa816b39ed8455", hex.EncodeToString(sum[:]))
	// The explicit architecture writes the same file.
	q := filepath.Join(t.TempDir(), "tiny-llama.gguf")
	require.NoError(t, Synth(q, SynthOptions{Arch: ArchLlama, Shape: "tiny", Seed: 1}))
	bq, err := os.ReadFile(q)
	require.NoError(t, err)
	require.True(t, bytes.Equal(b, bq))
}

func TestQwen35SynthIsDeterministic(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a, b, c := filepath.Join(dir, "a.gguf"), filepath.Join(dir, "b.gguf"), filepath.Join(dir, "c.gguf")
	for p, seed := range map[string]uint64{a: 5, b: 5, c: 6} {
		require.NoError(t, Synth(p, SynthOptions{Arch: ArchQwen35, Shape: "tiny", Seed: seed}))
	}
	ba, _ := os.ReadFile(a)
	bb, _ := os.ReadFile(b)
	bc, _ := os.ReadFile(c)
	require.True(t, bytes.Equal(ba, bb), "same seed, same bytes")
	require.False(t, bytes.Equal(ba, bc), "another seed, other weights")
	require.Equal(t, len(ba), len(bc))
	entries, _ := os.ReadDir(dir)
	require.Len(t, entries, 3, "no temporary file is left beside the model")
}

// ggufTensors decodes a file's tensors: name → tensor, plus the data offset.
func ggufTensors(t *testing.T, path string) (map[string]ggufTensorInfo, uint64) {
	t.Helper()
	g, err := readGGUF(path)
	require.NoError(t, err)
	m := map[string]ggufTensorInfo{}
	for _, tt := range g.Tensors {
		m[tt.Name] = tt
	}
	return m, g.DataOffset
}

// f32Values reads an F32 tensor's values.
func f32Values(t *testing.T, path string, tt ggufTensorInfo, dataOffset uint64) []float32 {
	t.Helper()
	require.Equal(t, ggmlF32, tt.Type, "%s is F32", tt.Name)
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	buf := make([]byte, tt.Elements()*4)
	_, err = f.ReadAt(buf, int64(dataOffset+tt.Offset))
	require.NoError(t, err)
	out := make([]float32, tt.Elements())
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(buf[i*4:]))
	}
	return out
}

func TestQwen35TinyTensorsPerLayerKind(t *testing.T) {
	t.Parallel()
	p := filepath.Join(t.TempDir(), "q.gguf")
	require.NoError(t, Synth(p, SynthOptions{Arch: ArchQwen35, Shape: "tiny", Seed: 1}))
	ts, off := ggufTensors(t, p)

	// Written out by hand from llama.cpp's qwen35 loader for the tiny
	// numbers (embd 64, ff 128; attention: 4 heads, 2 KV heads, head dim 32;
	// linear attention: 2 key heads, 4 value heads, head dim 16, conv 4).
	recurrent := map[string][]uint64{
		"attn_norm.weight": {64}, "post_attention_norm.weight": {64},
		"attn_qkv.weight":   {64, 2*2*16 + 4*16},
		"attn_gate.weight":  {64, 4 * 16},
		"ssm_conv1d.weight": {4, 2*2*16 + 4*16},
		"ssm_dt.bias":       {4}, "ssm_a": {4},
		"ssm_beta.weight": {64, 4}, "ssm_alpha.weight": {64, 4},
		"ssm_norm.weight": {16},
		"ssm_out.weight":  {4 * 16, 64},
		"ffn_gate.weight": {64, 128}, "ffn_up.weight": {64, 128}, "ffn_down.weight": {128, 64},
	}
	attention := map[string][]uint64{
		"attn_norm.weight": {64}, "post_attention_norm.weight": {64},
		"attn_q.weight":      {64, 2 * 4 * 32}, // queries and gate
		"attn_k.weight":      {64, 2 * 32},
		"attn_v.weight":      {64, 2 * 32},
		"attn_output.weight": {4 * 32, 64},
		"attn_q_norm.weight": {32}, "attn_k_norm.weight": {32},
		"ffn_gate.weight": {64, 128}, "ffn_up.weight": {64, 128}, "ffn_down.weight": {128, 64},
	}
	want := map[string][]uint64{"token_embd.weight": {64, 1024}, "output_norm.weight": {64}}
	for il, kind := range []map[string][]uint64{recurrent, attention, recurrent, attention} {
		for n, s := range kind {
			want[fmt.Sprintf("blk.%d.%s", il, n)] = s
		}
	}
	got := map[string][]uint64{}
	for n, tt := range ts {
		got[n] = tt.Shape
		require.Equal(t, ggmlF32, tt.Type, "tiny is all F32: %s", n)
	}
	require.Equal(t, want, got)
	require.Equal(t, want, Qwen35Shapes["tiny"].TensorShapes(1024))

	// Values keep activations sane: norms are ones, decay rates negative,
	// dt biases positive, projections small; all finite.
	for n, tt := range ts {
		vals := f32Values(t, p, tt, off)
		for _, v := range vals {
			require.False(t, math.IsNaN(float64(v)) || math.IsInf(float64(v), 0), n)
		}
		switch {
		case strings.HasSuffix(n, "norm.weight"):
			for _, v := range vals {
				require.Equal(t, float32(1), v, n)
			}
		case strings.HasSuffix(n, ".ssm_a"):
			for _, v := range vals {
				require.True(t, v < -0.5 && v >= -4, "%s = %v", n, v)
			}
		case strings.HasSuffix(n, ".ssm_dt.bias"):
			for _, v := range vals {
				require.True(t, v > 0 && v < 2, "%s = %v", n, v)
			}
		default:
			bound := float32(math.Sqrt(3) / math.Sqrt(float64(tt.Shape[0])) * 1.0001)
			for _, v := range vals {
				require.True(t, v > -bound && v < bound, "%s = %v", n, v)
			}
		}
	}

	m, err := readGGUFMeta(p)
	require.NoError(t, err)
	u32 := func(v uint32) metaValue { return metaValue{Type: ggufUint32, Value: v} }
	f32 := func(v float32) metaValue { return metaValue{Type: ggufFloat32, Value: v} }
	for k, v := range map[string]metaValue{
		"general.architecture":                    {Type: ggufString, Value: "qwen35"},
		"general.name":                            {Type: ggufString, Value: "verdict-synth-qwen35-tiny"},
		"general.file_type":                       u32(0),
		"qwen35.context_length":                   u32(65536),
		"qwen35.embedding_length":                 u32(64),
		"qwen35.block_count":                      u32(4),
		"qwen35.feed_forward_length":              u32(128),
		"qwen35.full_attention_interval":          u32(2),
		"qwen35.attention.head_count":             u32(4),
		"qwen35.attention.head_count_kv":          u32(2),
		"qwen35.attention.key_length":             u32(32),
		"qwen35.attention.value_length":           u32(32),
		"qwen35.attention.layer_norm_rms_epsilon": f32(1e-6),
		"qwen35.rope.dimension_count":             u32(8),
		"qwen35.rope.dimension_sections":          {Type: ggufArray, Elem: ggufInt32, Value: []int32{2, 1, 1, 0}},
		"qwen35.rope.freq_base":                   f32(1e7),
		"qwen35.ssm.conv_kernel":                  u32(4),
		"qwen35.ssm.state_size":                   u32(16),
		"qwen35.ssm.group_count":                  u32(2),
		"qwen35.ssm.time_step_rank":               u32(4),
		"qwen35.ssm.inner_size":                   u32(64),
		"qwen35.vocab_size":                       u32(1024),
		"tokenizer.ggml.model":                    {Type: ggufString, Value: "llama"},
	} {
		require.Equal(t, v, m.Values[k], k)
	}
	require.NotContains(t, m.Values, "tokenizer.chat_template")
}

func TestQwen35ShapesMatchTheLoader(t *testing.T) {
	t.Parallel()
	// small is Qwen3.5-0.8B's text model: llama.cpp names n_layer 24 with
	// n_embd 1024 "0.8B".
	sm := Qwen35Shapes["small"]
	require.Equal(t, 1024, sm.Embd)
	require.Equal(t, 24, sm.Layers)
	require.Equal(t, 4, sm.FullAttnInterval)
	require.Equal(t, 3584, sm.FF)
	require.Equal(t, [3]int{8, 2, 256}, [3]int{sm.Heads, sm.KVHeads, sm.HeadDim})
	require.Equal(t, 64, sm.RopeDim, "partial rotary: a quarter of the head")
	require.Equal(t, [4]int32{11, 11, 10, 0}, sm.RopeSections)
	require.Equal(t, [4]int{16, 16, 128, 4}, [4]int{sm.LinKHeads, sm.LinVHeads, sm.LinHeadDim, sm.ConvKernel})
	require.True(t, sm.F16)

	for name, sh := range Qwen35Shapes {
		full := 0
		for il := 0; il < sh.Layers; il++ {
			if sh.IsFullAttention(il) {
				full++
			}
		}
		require.Equal(t, sh.Layers/sh.FullAttnInterval, full, name)
		require.Less(t, 0, full, "%s has full-attention layers", name)
		require.Less(t, full, sh.Layers, "%s has linear-attention layers", name)
		var sec int32
		for _, s := range sh.RopeSections {
			sec += s
		}
		require.Equal(t, int32(sh.RopeDim/2), sec, "%s: M-RoPE sections cover the rotary pairs", name)
		require.Zero(t, sh.LinVHeads%sh.LinKHeads, name)
	}

	// Parameter count and tensor types of small, without writing 1 GB.
	var params uint64
	f16 := 0
	for n, s := range sm.TensorShapes(32000) {
		e := uint64(1)
		for _, d := range s {
			e *= d
		}
		params += e
		if !qwen35F32(n, s) {
			f16++
		}
	}
	require.Equal(t, uint64(530881344), params)
	// F32 stay: 1-D tensors, norms, ssm_conv1d, ssm_a, ssm_dt.bias.
	require.True(t, qwen35F32("blk.0.ssm_conv1d.weight", []uint64{4, 6144}))
	require.True(t, qwen35F32("blk.0.ssm_a", []uint64{16}))
	require.True(t, qwen35F32("blk.3.attn_q_norm.weight", []uint64{256}))
	require.False(t, qwen35F32("blk.0.ssm_alpha.weight", []uint64{1024, 16}))
	require.False(t, qwen35F32("token_embd.weight", []uint64{1024, 32000}))
	// F16: the embedding; per linear-attention layer (18) qkv, gate, beta,
	// alpha, out and the 3 FFN matrices; per full-attention layer (6) q, k,
	// v, output and the 3 FFN matrices.
	require.Equal(t, 1+18*(5+3)+6*(4+3), f16)
}

func TestInspectQwen35(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := filepath.Join(dir, "q.gguf")
	require.NoError(t, Synth(p, SynthOptions{Arch: ArchQwen35, Shape: "tiny", Seed: 1, Chat: ChatChatML}))
	info, err := Inspect(p, true)
	require.NoError(t, err)
	require.Equal(t, "qwen35", info.Architecture)
	require.Equal(t, "verdict-synth-qwen35-tiny-chatml", info.Name)
	require.Equal(t, "F32", info.Quantization)
	require.Equal(t, 1024, info.VocabSize)
	require.Equal(t, uint64(65536), info.ContextLen)
	require.True(t, info.ChatTemplate)
	require.Len(t, info.SHA256, 64)
	var want uint64
	for _, s := range Qwen35Shapes["tiny"].TensorShapes(1024) {
		e := uint64(1)
		for _, d := range s {
			e *= d
		}
		want += e
	}
	require.Equal(t, want, info.Parameters)
}

func TestSynthRejectsBadQwen35Options(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	x := filepath.Join(dir, "x.gguf")
	require.ErrorContains(t, Synth(x, SynthOptions{Arch: "mamba"}), "unknown architecture")
	require.ErrorContains(t, Synth(x, SynthOptions{Arch: ArchQwen35, Shape: "medium"}), "unknown qwen35 shape")
	require.ErrorContains(t, Synth(x, SynthOptions{Arch: ArchQwen35, Chat: "vicuna"}), "unknown chat template")
	require.ErrorContains(t, Synth(x, SynthOptions{Arch: ArchQwen35, Vocab: filepath.Join(dir, "none.gguf")}), "vocab")
	require.Equal(t, []string{"small", "tiny"}, ShapeNamesFor(ArchQwen35))
	require.Equal(t, ShapeNames(), ShapeNamesFor(""))
	require.Nil(t, ShapeNamesFor("mamba"))
}

// writeRawGGUF writes a GGUF v3 file with the given metadata and no
// tensors; values are written in exactly the given GGUF types.
func writeRawGGUF(t *testing.T, path string, keys []string, vals map[string]metaValue) {
	t.Helper()
	var b bytes.Buffer
	le := binary.LittleEndian
	str := func(s string) {
		binary.Write(&b, le, uint64(len(s)))
		b.WriteString(s)
	}
	scalar := func(typ uint32, v any) {
		if typ == ggufString {
			str(v.(string))
			return
		}
		require.NoError(t, binary.Write(&b, le, v))
	}
	b.WriteString("GGUF")
	binary.Write(&b, le, uint32(3))
	binary.Write(&b, le, uint64(0))
	binary.Write(&b, le, uint64(len(keys)))
	for _, k := range keys {
		v := vals[k]
		str(k)
		binary.Write(&b, le, v.Type)
		if v.Type != ggufArray {
			scalar(v.Type, v.Value)
			continue
		}
		binary.Write(&b, le, v.Elem)
		switch a := v.Value.(type) {
		case []string:
			binary.Write(&b, le, uint64(len(a)))
			for _, s := range a {
				str(s)
			}
		case []uint8:
			binary.Write(&b, le, uint64(len(a)))
			b.Write(a)
		case []int32:
			binary.Write(&b, le, uint64(len(a)))
			binary.Write(&b, le, a)
		default:
			t.Fatalf("writeRawGGUF: %T", a)
		}
	}
	require.NoError(t, os.WriteFile(path, b.Bytes(), 0o644))
}

func TestReadGGUFMetaKeepsTypes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := filepath.Join(dir, "meta.gguf")
	// Through the writer verdict uses: every type it writes comes back as is.
	kv := map[string]any{
		"general.architecture": "llama",
		"general.u32":          uint32(7),
		"general.i32":          int32(-7),
		"general.u64":          uint64(1 << 40),
		"general.i64":          int64(-1 << 40),
		"general.f32":          float32(0.25),
		"general.bool":         true,
		"general.strs":         []string{"a", "", "ü"},
		"general.i32s":         []int32{1, -2},
		"general.u32s":         []uint32{3, 4},
		"general.i64s":         []int64{5},
		"general.f32s":         []float32{0.5},
		"general.bools":        []bool{true, false},
	}
	f, err := os.Create(p)
	require.NoError(t, err)
	require.NoError(t, writeGGUF(f, kv, nil))
	require.NoError(t, f.Close())
	m, err := readGGUFMeta(p)
	require.NoError(t, err)
	require.Equal(t, uint32(3), m.Version)
	require.True(t, sort.StringsAreSorted(m.Keys))
	want := map[string]metaValue{
		"general.architecture": {Type: ggufString, Value: "llama"},
		"general.u32":          {Type: ggufUint32, Value: uint32(7)},
		"general.i32":          {Type: ggufInt32, Value: int32(-7)},
		"general.u64":          {Type: ggufUint64, Value: uint64(1 << 40)},
		"general.i64":          {Type: ggufInt64, Value: int64(-1 << 40)},
		"general.f32":          {Type: ggufFloat32, Value: float32(0.25)},
		"general.bool":         {Type: ggufBool, Value: true},
		"general.strs":         {Type: ggufArray, Elem: ggufString, Value: []string{"a", "", "ü"}},
		"general.i32s":         {Type: ggufArray, Elem: ggufInt32, Value: []int32{1, -2}},
		"general.u32s":         {Type: ggufArray, Elem: ggufUint32, Value: []uint32{3, 4}},
		"general.i64s":         {Type: ggufArray, Elem: ggufInt64, Value: []int64{5}},
		"general.f32s":         {Type: ggufArray, Elem: ggufFloat32, Value: []float32{0.5}},
		"general.bools":        {Type: ggufArray, Elem: ggufBool, Value: []bool{true, false}},
	}
	require.Equal(t, want, m.Values)
	for k, v := range m.Values {
		require.True(t, v.writable(), k)
	}

	// Truncated and foreign files fail cleanly.
	b, _ := os.ReadFile(p)
	require.NoError(t, os.WriteFile(p, b[:len(b)-3], 0o644))
	_, err = readGGUFMeta(p)
	require.Error(t, err)
	require.NoError(t, os.WriteFile(p, []byte("GGML nope"), 0o644))
	_, err = readGGUFMeta(p)
	require.ErrorContains(t, err, "not a GGUF")
}

func TestLoadVocabRejectsWhatItCannotCopy(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tokens := metaValue{Type: ggufArray, Elem: ggufString, Value: []string{"<unk>", "a", "b"}}
	model := metaValue{Type: ggufString, Value: "llama"}

	p := filepath.Join(dir, "charsmap.gguf")
	writeRawGGUF(t, p, []string{"tokenizer.ggml.model", "tokenizer.ggml.tokens", "tokenizer.ggml.precompiled_charsmap"},
		map[string]metaValue{"tokenizer.ggml.model": model, "tokenizer.ggml.tokens": tokens,
			"tokenizer.ggml.precompiled_charsmap": {Type: ggufArray, Elem: ggufUint8, Value: []uint8{1, 2}}})
	_, err := LoadVocab(p)
	require.ErrorContains(t, err, "array of uint8")

	p = filepath.Join(dir, "notokens.gguf")
	writeRawGGUF(t, p, []string{"tokenizer.ggml.model"}, map[string]metaValue{"tokenizer.ggml.model": model})
	_, err = LoadVocab(p)
	require.ErrorContains(t, err, "no tokenizer.ggml.tokens")

	// A hand-made vocabulary works, only its tokenizer.* keys travel, and
	// its size sets the embedding.
	p = filepath.Join(dir, "ggml-vocab-mini.gguf")
	writeRawGGUF(t, p, []string{"general.architecture", "tokenizer.ggml.model", "tokenizer.ggml.tokens", "tokenizer.ggml.token_type", "tokenizer.ggml.bos_token_id"},
		map[string]metaValue{"general.architecture": {Type: ggufString, Value: "llama"}, "tokenizer.ggml.model": model, "tokenizer.ggml.tokens": tokens,
			"tokenizer.ggml.token_type":   {Type: ggufArray, Elem: ggufInt32, Value: []int32{2, 1, 1}},
			"tokenizer.ggml.bos_token_id": {Type: ggufInt32, Value: int32(1)}}) // an odd type, kept
	v, err := LoadVocab(p)
	require.NoError(t, err)
	require.Equal(t, "mini", v.Label)
	require.Equal(t, 3, v.Tokens)
	require.Equal(t, []string{"tokenizer.ggml.bos_token_id", "tokenizer.ggml.model", "tokenizer.ggml.token_type", "tokenizer.ggml.tokens"}, v.Keys())
	out := filepath.Join(dir, "q.gguf")
	require.NoError(t, Synth(out, SynthOptions{Arch: ArchQwen35, Vocab: p}))
	m, err := readGGUFMeta(out)
	require.NoError(t, err)
	require.Equal(t, metaValue{Type: ggufInt32, Value: int32(1)}, m.Values["tokenizer.ggml.bos_token_id"])
	requireSameTokenizer(t, p, m)
	ts, _ := ggufTensors(t, out)
	require.Equal(t, []uint64{64, 3}, ts["token_embd.weight"].Shape)
	require.ErrorContains(t, Synth(out, SynthOptions{Arch: ArchQwen35, Vocab: p, Chat: ChatChatML}), "no <|im_start|> token")
}

// requireSameTokenizer: out carries exactly the tokenizer.* keys of the
// vocabulary file, with the same types and values.
func requireSameTokenizer(t *testing.T, vocabPath string, out *ggufMeta) {
	t.Helper()
	src, err := readGGUFMeta(vocabPath)
	require.NoError(t, err)
	want, got := map[string]metaValue{}, map[string]metaValue{}
	for k, v := range src.Values {
		if strings.HasPrefix(k, "tokenizer.") {
			want[k] = v
		}
	}
	for k, v := range out.Values {
		if strings.HasPrefix(k, "tokenizer.") {
			got[k] = v
		}
	}
	require.NotEmpty(t, want)
	require.Equal(t, len(want), len(got), "tokenizer keys")
	for k, v := range want {
		require.Equal(t, v, got[k], k) // testify compares deeply, types included
	}
}

// llamaVocabDir is models/ in llama.cpp's source tree, or skips the test.
func llamaVocabDir(t *testing.T) string {
	t.Helper()
	src := LlamaSourceDir()
	if src == "" {
		t.Skip("no llama.cpp source tree (make llama-lib fetches the pinned one; or set VERDICT_LLAMA_SRC): its models/ggml-vocab-*.gguf are the real vocabularies these tests copy")
	}
	return filepath.Join(src, "models")
}

func TestSynthWithRealVocabularies(t *testing.T) {
	t.Parallel()
	dir := llamaVocabDir(t)
	cases := []struct {
		arch, vocab string
		tokens      int
		template    bool
	}{
		{ArchQwen35, "qwen35", 151936, true},
		{ArchQwen35, "gemma-4", 262144, true},
		{ArchLlama, "llama-bpe", 128256, false},
		{ArchLlama, "phi-3", 32064, true},
	}
	for _, c := range cases {
		t.Run(c.arch+"/"+c.vocab, func(t *testing.T) {
			t.Parallel()
			vp := filepath.Join(dir, "ggml-vocab-"+c.vocab+".gguf")
			if _, err := os.Stat(vp); err != nil {
				t.Skipf("%s is not in this llama.cpp tree", vp)
			}
			out := filepath.Join(t.TempDir(), "m.gguf")
			require.NoError(t, Synth(out, SynthOptions{Arch: c.arch, Shape: "tiny", Seed: 3, Vocab: vp}))
			m, err := readGGUFMeta(out)
			require.NoError(t, err)
			requireSameTokenizer(t, vp, m)

			info, err := Inspect(out, false)
			require.NoError(t, err)
			require.Equal(t, c.arch, info.Architecture)
			require.Equal(t, c.tokens, info.VocabSize)
			require.Equal(t, c.template, info.ChatTemplate)
			prefix := "verdict-synth-tiny"
			if c.arch == ArchQwen35 {
				prefix = "verdict-synth-qwen35-tiny"
			}
			require.Equal(t, prefix+"-vocab-"+c.vocab, info.Name)
			require.Contains(t, m.Values["general.description"].Value, "ggml-vocab-"+c.vocab+".gguf")
			require.Equal(t, metaValue{Type: ggufUint32, Value: uint32(c.tokens)}, m.Values[c.arch+".vocab_size"])

			ts, _ := ggufTensors(t, out)
			require.Equal(t, []uint64{64, uint64(c.tokens)}, ts["token_embd.weight"].Shape)
			if c.arch == ArchLlama {
				require.Equal(t, []uint64{64, uint64(c.tokens)}, ts["output.weight"].Shape)
			} else {
				require.NotContains(t, ts, "output.weight", "qwen35 ties its output to the embedding")
			}
		})
	}
}

func TestSynthVocabIsDeterministicAndChecksChat(t *testing.T) {
	t.Parallel()
	dir := llamaVocabDir(t)
	q, l := filepath.Join(dir, "ggml-vocab-qwen35.gguf"), filepath.Join(dir, "ggml-vocab-llama-bpe.gguf")
	for _, p := range []string{q, l} {
		if _, err := os.Stat(p); err != nil {
			t.Skipf("%s is not in this llama.cpp tree", p)
		}
	}
	tmp := t.TempDir()
	a, b := filepath.Join(tmp, "a.gguf"), filepath.Join(tmp, "b.gguf")
	require.NoError(t, Synth(a, SynthOptions{Arch: ArchQwen35, Seed: 9, Vocab: q}))
	require.NoError(t, Synth(b, SynthOptions{Arch: ArchQwen35, Seed: 9, Vocab: q}))
	require.Equal(t, fileSum(t, a), fileSum(t, b))

	// The qwen35 vocabulary has its own (ChatML) template: no second one.
	require.ErrorContains(t, Synth(a, SynthOptions{Arch: ArchQwen35, Vocab: q, Chat: ChatChatML}), "carries its own chat template")
	// Llama 3's has none; its markers are tokens, so verdict's llama3 template fits.
	require.NoError(t, Synth(a, SynthOptions{Vocab: l, Chat: ChatLlama3}))
	info, err := Inspect(a, false)
	require.NoError(t, err)
	require.True(t, info.ChatTemplate)
	require.Equal(t, "verdict-synth-tiny-vocab-llama-bpe-llama3", info.Name)
	// ChatML's markers are not Llama 3 tokens.
	require.ErrorContains(t, Synth(a, SynthOptions{Vocab: l, Chat: ChatChatML}), "no <|im_start|> token")

	// Bare names resolve in the source tree.
	p, err := ResolveVocab("qwen35")
	require.NoError(t, err)
	require.Equal(t, "ggml-vocab-qwen35.gguf", filepath.Base(p))
	_, err = ResolveVocab("no-such-vocab")
	require.ErrorContains(t, err, "neither a file nor a vocabulary")
	_, err = ResolveVocab(filepath.Join(tmp, "missing.gguf"))
	require.ErrorContains(t, err, "does not exist")
}

func fileSum(t *testing.T, p string) string {
	t.Helper()
	f, err := os.Open(p)
	require.NoError(t, err)
	defer f.Close()
	h := sha256.New()
	_, err = io.Copy(h, f)
	require.NoError(t, err)
	return hex.EncodeToString(h.Sum(nil))
}
