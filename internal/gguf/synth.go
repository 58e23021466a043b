package gguf

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Shape is the size of a synthetic model.
type Shape struct {
	Name       string
	Embd       int // embedding length
	Layers     int // transformer blocks
	FF         int // feed-forward length
	Heads      int // attention heads
	KVHeads    int // key/value heads
	ContextLen int // trained context length written to the file
	Vocab      int // vocabulary size
	F16        bool
}

// Shapes are the synthetic shapes verdict knows. tiny is for unit tests
// (≈0.6 MB, loads in milliseconds); small has the shape of a 0.5 B instruct
// model (F16, ≈0.8 GB) for benchmarks; medium sits between for quick
// benchmarks.
var Shapes = map[string]Shape{
	"tiny":   {Name: "tiny", Embd: 64, Layers: 2, FF: 128, Heads: 4, KVHeads: 2, ContextLen: 65536, Vocab: 1024},
	"medium": {Name: "medium", Embd: 512, Layers: 8, FF: 1536, Heads: 8, KVHeads: 2, ContextLen: 32768, Vocab: 8192, F16: true},
	"small":  {Name: "small", Embd: 896, Layers: 24, FF: 4864, Heads: 14, KVHeads: 2, ContextLen: 32768, Vocab: 32000, F16: true},
}

// ShapeNames lists the known shapes, sorted.
func ShapeNames() []string {
	names := make([]string, 0, len(Shapes))
	for n := range Shapes {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Chat templates a synthetic model can carry.
const (
	ChatNone   = ""
	ChatChatML = "chatml"
	ChatLlama3 = "llama3"
)

// chatTemplates are minimal Jinja templates of each family: enough for a
// reader to recognise the family by its markers.
var chatTemplates = map[string]string{
	ChatChatML: "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}",
	ChatLlama3: "{{ bos_token }}{% for message in messages %}{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' }}{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}",
}

var chatSpecials = map[string][]string{
	ChatChatML: {"<|im_start|>", "<|im_end|>"},
	ChatLlama3: {"<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"},
}

// SynthOptions say what to synthesize.
type SynthOptions struct {
	// Shape is a key of Shapes. Defaults to "tiny".
	Shape string
	// Seed makes the weights; the same seed gives the same bytes.
	Seed uint64
	// Chat is "", "chatml" or "llama3": the chat template to embed. With
	// Vocab it is allowed only when the vocabulary has no template of its
	// own, and its markers must be tokens of that vocabulary.
	Chat string
	// Arch is the architecture: "llama" (the default) or "qwen35".
	Arch string
	// Vocab, when set, is a GGUF file (e.g. llama.cpp's
	// models/ggml-vocab-qwen35.gguf) whose tokenizer the model carries
	// instead of verdict's own: every tokenizer.* key, chat template
	// included. Its size sets the embedding and output sizes.
	Vocab string
}

// Architectures a synthetic model can have.
const (
	ArchLlama  = "llama"
	ArchQwen35 = "qwen35"
)

// ArchNames lists the architectures Synth writes.
func ArchNames() []string { return []string{ArchLlama, ArchQwen35} }

// ShapeNamesFor lists the shapes of an architecture, sorted (nil for an
// unknown one).
func ShapeNamesFor(arch string) []string {
	switch arch {
	case "", ArchLlama:
		return ShapeNames()
	case ArchQwen35:
		return qwen35ShapeNames()
	}
	return nil
}

// Synth writes a deterministic GGUF to path: the llama architecture by
// default, or Qwen3.5's hybrid one (o.Arch "qwen35", see Qwen35Shapes),
// with verdict's own vocabulary or a real one (o.Vocab). The same options
// give the same bytes. The file is written beside path and renamed into
// place, so a reader never sees half a model.
func Synth(path string, o SynthOptions) error {
	if o.Shape == "" {
		o.Shape = "tiny"
	}
	switch o.Arch {
	case "", ArchLlama:
	case ArchQwen35:
		return synthQwen35(path, o)
	default:
		return fmt.Errorf("model: unknown architecture %q (known: %s)", o.Arch, strings.Join(ArchNames(), ", "))
	}
	sh, ok := Shapes[o.Shape]
	if !ok {
		return fmt.Errorf("model: unknown shape %q (known: %s)", o.Shape, strings.Join(ShapeNames(), ", "))
	}
	if _, ok := chatTemplates[o.Chat]; !ok && o.Chat != ChatNone {
		return fmt.Errorf("model: unknown chat template %q (known: chatml, llama3, or empty)", o.Chat)
	}
	var vocab *Vocab
	if o.Vocab != "" {
		var err error
		if vocab, err = loadVocabFor(o); err != nil {
			return err
		}
	}
	tokens, scores, types := buildVocab(sh.Vocab, chatSpecials[o.Chat])
	nVocab := len(tokens)
	if vocab != nil {
		nVocab = vocab.Tokens
	}
	headDim := sh.Embd / sh.Heads
	fileType := uint32(0)
	if sh.F16 {
		fileType = 1
	}
	name := "verdict-synth-" + sh.Name
	if vocab != nil {
		name += "-vocab-" + vocab.Label
	}
	if o.Chat != "" {
		name += "-" + o.Chat
	}
	kv := map[string]any{
		"general.architecture":                   "llama",
		"general.name":                           name,
		"general.file_type":                      fileType,
		"general.alignment":                      uint32(32),
		"llama.context_length":                   uint32(sh.ContextLen),
		"llama.embedding_length":                 uint32(sh.Embd),
		"llama.block_count":                      uint32(sh.Layers),
		"llama.feed_forward_length":              uint32(sh.FF),
		"llama.attention.head_count":             uint32(sh.Heads),
		"llama.attention.head_count_kv":          uint32(sh.KVHeads),
		"llama.attention.layer_norm_rms_epsilon": float32(1e-5),
		"llama.rope.dimension_count":             uint32(headDim),
		"llama.rope.freq_base":                   float32(10000),
		"llama.vocab_size":                       uint32(nVocab),
	}
	for k, v := range ownTokenizerKV(tokens, scores, types) {
		kv[k] = v
	}
	if vocab != nil {
		vocab.apply(kv)
		kv["general.description"] = vocabDescription(vocab)
	}
	if o.Chat != "" {
		kv["tokenizer.chat_template"] = chatTemplates[o.Chat]
	}

	E, V, F, KVd := uint64(sh.Embd), uint64(nVocab), uint64(sh.FF), uint64(headDim*sh.KVHeads)
	var ts tensorList
	add := func(name string, shape []uint64, std float32, f16 bool) {
		ts.add(o.Seed, name, shape, std, f16)
	}
	add("token_embd.weight", []uint64{E, V}, 1, sh.F16)
	add("output_norm.weight", []uint64{E}, 0, false)
	add("output.weight", []uint64{E, V}, inv(E), sh.F16)
	for i := 0; i < sh.Layers; i++ {
		b := fmt.Sprintf("blk.%d.", i)
		add(b+"attn_norm.weight", []uint64{E}, 0, false)
		add(b+"attn_q.weight", []uint64{E, E}, inv(E), sh.F16)
		add(b+"attn_k.weight", []uint64{E, KVd}, inv(E), sh.F16)
		add(b+"attn_v.weight", []uint64{E, KVd}, inv(E), sh.F16)
		add(b+"attn_output.weight", []uint64{E, E}, inv(E), sh.F16)
		add(b+"ffn_norm.weight", []uint64{E}, 0, false)
		add(b+"ffn_gate.weight", []uint64{E, F}, inv(E), sh.F16)
		add(b+"ffn_up.weight", []uint64{E, F}, inv(E), sh.F16)
		add(b+"ffn_down.weight", []uint64{F, E}, inv(F), sh.F16)
	}

	return writeGGUFFile(path, kv, ts)
}

// tensorList collects the tensors of a synthetic model.
type tensorList []ggufTensor

// add appends a tensor of deterministic values with standard deviation
// std (0: all ones), F16 or F32.
func (ts *tensorList) add(seed uint64, name string, shape []uint64, std float32, f16 bool) {
	ts.addFill(name, shape, f16, &randomTensor{f16: f16, std: std, seed: seed, name: name})
}

// addFill appends a tensor written by r, whose element count it sets.
func (ts *tensorList) addFill(name string, shape []uint64, f16 bool, r *randomTensor) {
	typ := ggmlF32
	if f16 {
		typ = ggmlF16
	}
	n := uint64(1)
	for _, d := range shape {
		n *= d
	}
	r.n = n
	*ts = append(*ts, ggufTensor{Name: name, Type: typ, Shape: shape, Data: r})
}

// inv is 1/√fan, the scale that keeps a projection's outputs near unit size.
func inv(fan uint64) float32 { return float32(1 / math.Sqrt(float64(fan))) }

// writeGGUFFile writes a GGUF beside path and renames it into place, so a
// reader never sees half a model.
func writeGGUFFile(path string, kv map[string]any, ts []ggufTensor) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, ".synth-*.gguf")
	if err != nil {
		return fmt.Errorf("model: synth: %w", err)
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	if err := writeGGUF(tmp, kv, ts); err != nil {
		tmp.Close()
		return fmt.Errorf("model: synth: write %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("model: synth: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("model: synth: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("model: synth: %w", err)
	}
	return nil
}

// randomTensor writes n deterministic values drawn uniformly with standard
// deviation std (std 0 means all ones, for norm weights). The stream
// depends only on the seed and the tensor's name, not on write order.
type randomTensor struct {
	n    uint64
	f16  bool
	std  float32
	seed uint64
	name string
	// lo < hi draws U(lo, hi) instead (e.g. negative decay rates).
	lo, hi float32
}

func (t *randomTensor) WriteTo(w io.Writer) (int64, error) {
	h := fnv.New64a()
	h.Write([]byte(t.name))
	rng := rand.New(rand.NewPCG(t.seed, h.Sum64()))
	a := t.std * float32(math.Sqrt(3)) // U(-a, a) has standard deviation std
	const chunk = 1 << 15
	width := 4
	if t.f16 {
		width = 2
	}
	buf := make([]byte, chunk*width)
	var written int64
	for left := t.n; left > 0; {
		k := uint64(chunk)
		if left < k {
			k = left
		}
		for i := uint64(0); i < k; i++ {
			v := float32(1)
			switch {
			case t.lo < t.hi:
				// The conversion rounds the product, so no platform fuses
				// it into a multiply-add and the bytes stay the same.
				v = t.lo + float32(rng.Float32()*(t.hi-t.lo))
			case t.std != 0:
				v = (rng.Float32()*2 - 1) * a
			}
			if t.f16 {
				binary.LittleEndian.PutUint16(buf[i*2:], f32ToF16(v))
			} else {
				binary.LittleEndian.PutUint32(buf[i*4:], math.Float32bits(v))
			}
		}
		n, err := w.Write(buf[:k*uint64(width)])
		written += int64(n)
		if err != nil {
			return written, err
		}
		left -= k
	}
	return written, nil
}

// commonWords seed the vocabulary with whole words so that English-like
// text tokenizes into fewer pieces, as in a real model.
var commonWords = strings.Fields(`the of and to in is it that for on with as was be by this are or
from at an not have has but which what when who will can all one there their if would about
out up so no yes do does did answer question option options state choose best letter reply
single read below customer account access password reset email billing payment sales support
refund request issue ticket team product feature failing deadline plan enterprise pro free
urgent critical high medium low user users data export error log service queue route order
true false score level change changed working work works workaround problem help need please
time day week month year new old number more most less least other same only also very after
before because should could may must any each every some many few first last next`)

// buildVocab returns a SentencePiece vocabulary of exactly size tokens
// (or more when the fixed part is larger): <unk> <s> </s>, chat specials,
// 256 byte tokens, ▁, printable ASCII, ▁+ASCII, then ▁-words with all
// their prefixes, then generated pieces to fill.
func buildVocab(size int, specials []string) (tokens []string, scores []float32, types []int32) {
	seen := map[string]bool{}
	push := func(tok string, typ int32) {
		if seen[tok] {
			return
		}
		seen[tok] = true
		tokens = append(tokens, tok)
		types = append(types, typ)
		scores = append(scores, -float32(len(tokens)))
	}
	push("<unk>", 2)
	push("<s>", 3)
	push("</s>", 3)
	for _, s := range specials {
		push(s, 3)
	}
	for b := 0; b < 256; b++ {
		push(fmt.Sprintf("<0x%02X>", b), 6)
	}
	push("▁", 1)
	for c := byte(0x21); c < 0x7f; c++ {
		push(string(c), 1)
	}
	for c := byte(0x21); c < 0x7f; c++ {
		push("▁"+string(c), 1)
	}
	word := func(w string) {
		rs := []rune("▁" + w)
		for i := 2; i <= len(rs); i++ {
			if len(tokens) >= size {
				return
			}
			push(string(rs[:i]), 1)
		}
	}
	for _, w := range commonWords {
		word(w)
	}
	for _, w := range commonWords { // capitalised forms
		word(strings.ToUpper(w[:1]) + w[1:])
	}
	// Fill with generated lowercase pieces: ▁ab…, then ab… (word-inner).
	letters := "etaoinshrdlcumwfgypbvkjxqz"
	for _, a := range letters {
		for _, b := range letters {
			if len(tokens) >= size {
				return
			}
			push("▁"+string(a)+string(b), 1)
		}
	}
	for _, a := range letters {
		for _, b := range letters {
			if len(tokens) >= size {
				return
			}
			push(string(a)+string(b), 1)
		}
	}
	for _, a := range letters {
		for _, b := range letters {
			for _, c := range letters {
				if len(tokens) >= size {
					return
				}
				push("▁"+string(a)+string(b)+string(c), 1)
			}
		}
	}
	for _, a := range letters {
		for _, b := range letters {
			for _, c := range letters {
				if len(tokens) >= size {
					return
				}
				push(string(a)+string(b)+string(c), 1)
			}
		}
	}
	return tokens, scores, types
}

// ownTokenizerKV are the tokenizer keys of verdict's own SentencePiece
// vocabulary (see buildVocab).
func ownTokenizerKV(tokens []string, scores []float32, types []int32) map[string]any {
	return map[string]any{
		"tokenizer.ggml.model":            "llama",
		"tokenizer.ggml.tokens":           tokens,
		"tokenizer.ggml.scores":           scores,
		"tokenizer.ggml.token_type":       types,
		"tokenizer.ggml.bos_token_id":     uint32(1),
		"tokenizer.ggml.eos_token_id":     uint32(2),
		"tokenizer.ggml.unknown_token_id": uint32(0),
		"tokenizer.ggml.add_bos_token":    true,
		"tokenizer.ggml.add_eos_token":    false,
	}
}
