package gguf

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSynthIsDeterministic(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a, b, c := filepath.Join(dir, "a.gguf"), filepath.Join(dir, "b.gguf"), filepath.Join(dir, "c.gguf")
	require.NoError(t, Synth(a, SynthOptions{Shape: "tiny", Seed: 5}))
	require.NoError(t, Synth(b, SynthOptions{Shape: "tiny", Seed: 5}))
	require.NoError(t, Synth(c, SynthOptions{Shape: "tiny", Seed: 6}))
	ba, _ := os.ReadFile(a)
	bb, _ := os.ReadFile(b)
	bc, _ := os.ReadFile(c)
	require.True(t, bytes.Equal(ba, bb), "same seed, same bytes")
	require.False(t, bytes.Equal(ba, bc), "another seed, other weights")
	require.Equal(t, len(ba), len(bc))
	// No temporary file is left beside the model.
	entries, _ := os.ReadDir(dir)
	require.Len(t, entries, 3)
}

func TestInspect(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := filepath.Join(dir, "chat.gguf")
	require.NoError(t, Synth(p, SynthOptions{Shape: "tiny", Seed: 1, Chat: ChatChatML}))
	info, err := Inspect(p, true)
	require.NoError(t, err)
	require.Equal(t, "llama", info.Architecture)
	require.Equal(t, "verdict-synth-tiny-chatml", info.Name)
	require.Equal(t, "F32", info.Quantization)
	require.Equal(t, 1024, info.VocabSize)
	require.True(t, info.ChatTemplate)
	require.Len(t, info.SHA256, 64)
	sh := Shapes["tiny"]
	// token_embd + output + per layer q, o (E×E), k, v (E×kv), gate, up, down (E×F), 3 norms.
	E, F, V, kv := uint64(sh.Embd), uint64(sh.FF), uint64(1024), uint64(sh.Embd/sh.Heads*sh.KVHeads)
	want := 2*E*V + E + uint64(sh.Layers)*(2*E*E+2*E*kv+3*E*F+2*E)
	require.Equal(t, want, info.Parameters)

	_, err = Inspect(filepath.Join(dir, "missing.gguf"), false)
	require.Error(t, err)
	junk := filepath.Join(dir, "junk.gguf")
	require.NoError(t, os.WriteFile(junk, []byte("not a gguf at all"), 0o644))
	_, err = Inspect(junk, false)
	require.ErrorContains(t, err, "not a readable GGUF")
}

func TestSynthRejectsUnknownShapeAndChat(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	require.ErrorContains(t, Synth(filepath.Join(dir, "x.gguf"), SynthOptions{Shape: "huge"}), "unknown shape")
	require.ErrorContains(t, Synth(filepath.Join(dir, "x.gguf"), SynthOptions{Chat: "vicuna"}), "unknown chat template")
	require.Error(t, Synth(filepath.Join(dir, "no-such-dir", "x.gguf"), SynthOptions{}))
}

func TestManifestPinsTheModel(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := filepath.Join(dir, "m.gguf")
	require.NoError(t, Synth(p, SynthOptions{Seed: 2}))
	got, err := ReadManifest(p)
	require.NoError(t, err)
	require.Equal(t, "", got, "no manifest, no pin")
	info, err := Verify(p, "")
	require.NoError(t, err)
	require.NoError(t, WriteManifest(p, info.SHA256))
	got, err = ReadManifest(p)
	require.NoError(t, err)
	require.Equal(t, info.SHA256, got)
	_, err = Verify(p, "")
	require.NoError(t, err)
	_, err = Verify(p, strings.Repeat("ab", 32))
	require.ErrorIs(t, err, ErrMismatch)
	// A manifest that disagrees with the file refuses it too.
	require.NoError(t, os.WriteFile(ManifestPath(p), []byte(strings.Repeat("0", 64)+"  m.gguf\n"), 0o644))
	_, err = Verify(p, "")
	require.ErrorIs(t, err, ErrMismatch)
	require.NoError(t, os.WriteFile(ManifestPath(p), []byte("nonsense"), 0o644))
	_, err = ReadManifest(p)
	require.ErrorContains(t, err, "64-digit")
}

func TestF32ToF16(t *testing.T) {
	t.Parallel()
	cases := map[float32]uint16{
		0: 0x0000, 1: 0x3c00, -2: 0xc000, 0.5: 0x3800, 65504: 0x7bff, 1e6: 0x7c00,
		float32(math.Inf(-1)): 0xfc00, 6e-8: 0x0001, 1e-9: 0x0000, 0.1: 0x2e66,
	}
	for in, want := range cases {
		require.Equal(t, want, f32ToF16(in), "f32ToF16(%v)", in)
	}
	require.Equal(t, uint16(0x7e00), f32ToF16(float32(math.NaN()))&0x7e00)
}

func TestVocabularyReachesLabels(t *testing.T) {
	t.Parallel()
	toks, _, types := buildVocab(1024, []string{"<|im_start|>"})
	index := map[string]int{}
	for i, tk := range toks {
		index[tk] = i
	}
	for c := 'A'; c <= 'Z'; c++ {
		require.Contains(t, index, "▁"+string(c))
		require.Contains(t, index, string(c))
	}
	require.Equal(t, int32(3), types[index["<|im_start|>"]])
	// Every word piece's prefixes are pieces too (SentencePiece merges pairwise).
	for _, tk := range toks {
		if strings.HasPrefix(tk, "▁") && len([]rune(tk)) > 2 {
			r := []rune(tk)
			require.Contains(t, index, string(r[:len(r)-1]), tk)
		}
	}
	require.Len(t, toks, 1024)
}
