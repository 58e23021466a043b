package gguf

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"
)

// Qwen35Shape is the size of a synthetic Qwen3.5 hybrid model (llama.cpp
// architecture "qwen35"): Gated-DeltaNet (linear attention, recurrent)
// layers, with a full-attention layer every FullAttnInterval-th layer
// (layers i with (i+1) % FullAttnInterval == 0).
type Qwen35Shape struct {
	Name             string
	Embd             int // hidden size
	Layers           int
	FF               int // feed-forward length (every layer is dense)
	FullAttnInterval int
	// Full-attention layers: gated queries (attn_q is 2·Heads·HeadDim wide),
	// per-head q/k RMS norms, partial rotary (RopeDim of HeadDim) with
	// interleaved M-RoPE sections.
	Heads, KVHeads, HeadDim int
	RopeDim                 int
	RopeSections            [4]int32
	RopeFreqBase            float32
	// Linear-attention layers: LinKHeads key heads (ssm.group_count),
	// LinVHeads value heads (ssm.time_step_rank), both LinHeadDim wide
	// (ssm.state_size), causal conv of ConvKernel taps.
	LinKHeads, LinVHeads, LinHeadDim int
	ConvKernel                       int
	ContextLen                       int
	Vocab                            int // size of verdict's own vocabulary (without --vocab)
	F16                              bool
}

// Qwen35Shapes are the synthetic Qwen3.5 shapes. tiny is for unit tests
// (both layer kinds, F32, loads in milliseconds); small has the shape of
// Qwen3.5-0.8B (F16, tied embeddings) for benchmarks.
var Qwen35Shapes = map[string]Qwen35Shape{
	"tiny": {
		Name: "tiny", Embd: 64, Layers: 4, FF: 128, FullAttnInterval: 2,
		Heads: 4, KVHeads: 2, HeadDim: 32, RopeDim: 8, RopeSections: [4]int32{2, 1, 1, 0}, RopeFreqBase: 1e7,
		LinKHeads: 2, LinVHeads: 4, LinHeadDim: 16, ConvKernel: 4,
		ContextLen: 65536, Vocab: 1024,
	},
	"small": {
		Name: "small", Embd: 1024, Layers: 24, FF: 3584, FullAttnInterval: 4,
		Heads: 8, KVHeads: 2, HeadDim: 256, RopeDim: 64, RopeSections: [4]int32{11, 11, 10, 0}, RopeFreqBase: 1e7,
		LinKHeads: 16, LinVHeads: 16, LinHeadDim: 128, ConvKernel: 4,
		ContextLen: 262144, Vocab: 32000, F16: true,
	},
}

func qwen35ShapeNames() []string {
	names := make([]string, 0, len(Qwen35Shapes))
	for n := range Qwen35Shapes {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// IsFullAttention reports whether layer il is a full-attention layer (the
// others are linear-attention ones), as llama.cpp derives it from
// full_attention_interval.
func (sh Qwen35Shape) IsFullAttention(il int) bool {
	return (il+1)%sh.FullAttnInterval == 0
}

// TensorShapes lists every tensor of the shape with a vocabulary of
// nVocab tokens: name → dimensions, ggml order (first dimension first).
// Embeddings are tied (no output.weight), as in Qwen3.5's small models.
func (sh Qwen35Shape) TensorShapes(nVocab int) map[string][]uint64 {
	E, V, F := uint64(sh.Embd), uint64(nVocab), uint64(sh.FF)
	hd, qd, kvd := uint64(sh.HeadDim), uint64(sh.Heads*sh.HeadDim), uint64(sh.KVHeads*sh.HeadDim)
	keyDim := uint64(sh.LinKHeads * sh.LinHeadDim)
	valDim := uint64(sh.LinVHeads * sh.LinHeadDim)
	convDim := 2*keyDim + valDim
	m := map[string][]uint64{
		"token_embd.weight":  {E, V},
		"output_norm.weight": {E},
	}
	for il := 0; il < sh.Layers; il++ {
		b := fmt.Sprintf("blk.%d.", il)
		m[b+"attn_norm.weight"] = []uint64{E}
		m[b+"post_attention_norm.weight"] = []uint64{E}
		if sh.IsFullAttention(il) {
			m[b+"attn_q.weight"] = []uint64{E, 2 * qd} // queries and their gate
			m[b+"attn_k.weight"] = []uint64{E, kvd}
			m[b+"attn_v.weight"] = []uint64{E, kvd}
			m[b+"attn_output.weight"] = []uint64{qd, E}
			m[b+"attn_q_norm.weight"] = []uint64{hd}
			m[b+"attn_k_norm.weight"] = []uint64{hd}
		} else {
			m[b+"attn_qkv.weight"] = []uint64{E, convDim}
			m[b+"attn_gate.weight"] = []uint64{E, valDim}
			m[b+"ssm_conv1d.weight"] = []uint64{uint64(sh.ConvKernel), convDim}
			m[b+"ssm_dt.bias"] = []uint64{uint64(sh.LinVHeads)}
			m[b+"ssm_a"] = []uint64{uint64(sh.LinVHeads)}
			m[b+"ssm_beta.weight"] = []uint64{E, uint64(sh.LinVHeads)}
			m[b+"ssm_alpha.weight"] = []uint64{E, uint64(sh.LinVHeads)}
			m[b+"ssm_norm.weight"] = []uint64{uint64(sh.LinHeadDim)}
			m[b+"ssm_out.weight"] = []uint64{valDim, E}
		}
		m[b+"ffn_gate.weight"] = []uint64{E, F}
		m[b+"ffn_up.weight"] = []uint64{E, F}
		m[b+"ffn_down.weight"] = []uint64{F, E}
	}
	return m
}

// qwen35F32 reports whether a tensor stays F32 in an F16 model, as
// llama.cpp's converter keeps them: 1-D tensors, norms, the conv kernel
// (ggml's ssm_conv needs F32) and tensors not named *.weight.
func qwen35F32(name string, shape []uint64) bool {
	return len(shape) == 1 || strings.HasSuffix(name, "_norm.weight") ||
		strings.HasSuffix(name, ".ssm_conv1d.weight") || !strings.HasSuffix(name, ".weight")
}

func synthQwen35(path string, o SynthOptions) error {
	sh, ok := Qwen35Shapes[o.Shape]
	if !ok {
		return fmt.Errorf("model: unknown qwen35 shape %q (known: %s)", o.Shape, strings.Join(qwen35ShapeNames(), ", "))
	}
	if _, ok := chatTemplates[o.Chat]; !ok && o.Chat != ChatNone {
		return fmt.Errorf("model: unknown chat template %q (known: chatml, llama3, or empty)", o.Chat)
	}
	if sh.HeadDim%2 != 0 || sh.RopeDim > sh.HeadDim || sh.LinVHeads%sh.LinKHeads != 0 || sh.FullAttnInterval < 1 {
		return fmt.Errorf("model: qwen35 shape %s is inconsistent", sh.Name)
	}

	name := "verdict-synth-qwen35-" + sh.Name
	fileType := uint32(0)
	if sh.F16 {
		fileType = 1
	}
	kv := map[string]any{}
	var nVocab int
	if o.Vocab != "" {
		vocab, err := loadVocabFor(o)
		if err != nil {
			return err
		}
		vocab.apply(kv)
		nVocab = vocab.Tokens
		name += "-vocab-" + vocab.Label
		kv["general.description"] = vocabDescription(vocab)
	} else {
		tokens, scores, types := buildVocab(sh.Vocab, chatSpecials[o.Chat])
		nVocab = len(tokens)
		for k, v := range ownTokenizerKV(tokens, scores, types) {
			kv[k] = v
		}
		kv["general.description"] = "verdict synthetic model with random weights and verdict's own SentencePiece vocabulary"
	}
	if o.Chat != "" {
		kv["tokenizer.chat_template"] = chatTemplates[o.Chat]
		name += "-" + o.Chat
	}

	const a = "qwen35."
	for k, v := range map[string]any{
		"general.architecture":                 ArchQwen35,
		"general.name":                         name,
		"general.file_type":                    fileType,
		"general.alignment":                    uint32(32),
		a + "context_length":                   uint32(sh.ContextLen),
		a + "embedding_length":                 uint32(sh.Embd),
		a + "block_count":                      uint32(sh.Layers),
		a + "feed_forward_length":              uint32(sh.FF),
		a + "attention.head_count":             uint32(sh.Heads),
		a + "attention.head_count_kv":          uint32(sh.KVHeads),
		a + "attention.key_length":             uint32(sh.HeadDim),
		a + "attention.value_length":           uint32(sh.HeadDim),
		a + "attention.layer_norm_rms_epsilon": float32(1e-6),
		a + "rope.dimension_count":             uint32(sh.RopeDim),
		a + "rope.dimension_sections":          sh.RopeSections[:],
		a + "rope.freq_base":                   sh.RopeFreqBase,
		a + "full_attention_interval":          uint32(sh.FullAttnInterval),
		a + "ssm.conv_kernel":                  uint32(sh.ConvKernel),
		a + "ssm.state_size":                   uint32(sh.LinHeadDim),
		a + "ssm.group_count":                  uint32(sh.LinKHeads),
		a + "ssm.time_step_rank":               uint32(sh.LinVHeads),
		a + "ssm.inner_size":                   uint32(sh.LinVHeads * sh.LinHeadDim),
		a + "vocab_size":                       uint32(nVocab),
	} {
		kv[k] = v
	}

	shapes := sh.TensorShapes(nVocab)
	names := make([]string, 0, len(shapes))
	for n := range shapes {
		names = append(names, n)
	}
	sort.Strings(names)
	var ts tensorList
	for _, n := range names {
		shape := shapes[n]
		f16 := sh.F16 && !qwen35F32(n, shape)
		r := &randomTensor{f16: f16, seed: o.Seed, name: n}
		switch {
		case strings.HasSuffix(n, "_norm.weight"):
			// all ones (std 0)
		case strings.HasSuffix(n, ".ssm_a"):
			// A = -exp(A_log) < 0: every state decays.
			r.lo, r.hi = -4, -1
		case strings.HasSuffix(n, ".ssm_dt.bias"):
			r.lo, r.hi = 0.5, 1.5
		default:
			// Projections (and the conv kernel, whose first dimension is its
			// taps): 1/√fan-in keeps activations near unit size. The
			// embedding is tied with the output, so unit-size states give
			// unit-size logits.
			r.std = inv(shape[0])
		}
		ts.addFill(n, shape, f16, r)
	}
	return writeGGUFFile(path, kv, ts)
}

// loadVocabFor reads o.Vocab and checks that o.Chat fits it.
func loadVocabFor(o SynthOptions) (*Vocab, error) {
	v, err := LoadVocab(o.Vocab)
	if err != nil {
		return nil, err
	}
	if o.Chat != "" {
		if v.ChatTemplate != "" {
			return nil, fmt.Errorf("model: vocab %s carries its own chat template; drop the %s one", o.Vocab, o.Chat)
		}
		for _, s := range chatSpecials[o.Chat] {
			if !v.HasToken(s) {
				return nil, fmt.Errorf("model: vocab %s has no %s token, which the %s template needs", o.Vocab, s, o.Chat)
			}
		}
	}
	return v, nil
}

func vocabDescription(v *Vocab) string {
	return fmt.Sprintf("verdict synthetic model with random weights; tokenizer (%s, %d tokens) from %s, sha256 %s",
		v.Model, v.Tokens, filepath.Base(v.Path), v.SHA256)
}
