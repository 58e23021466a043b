//go:build llamacpp

package llama

import (
	"os"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// BenchmarkPromptLayouts decodes one 450-token prompt in the layouts an
// engine can give it, interleaved within every iteration (a noisy machine
// slows them alike), and reports each one's median milliseconds per
// decode: in a one-sequence context (llama-server's one slot); in
// verdict's context (128 sequences, unified KV) as one sequence; there
// with the state's tokens in two sequences (cache and branch) and the
// tail in the branch, as verdict fuses a single decision; and the same
// after 1,024 resident cells of another sequence (a prefix cache kept in
// the KV memory). The model is VERDICT_BENCH_MODEL (a `small` synthetic
// model shows the costs; the default tiny one only checks the code runs):
//
//	VERDICT_BENCH_MODEL=.verdict/models/verdict-synth-small-seed1.gguf \
//	  go test -tags llamacpp -run '^$' -bench PromptLayouts -benchtime 5x ./engine/llamacpp/internal/llama
func BenchmarkPromptLayouts(b *testing.B) {
	path := os.Getenv("VERDICT_BENCH_MODEL")
	if path == "" {
		path = tinyPath
	}
	m, err := LoadModel(path, ModelParams{UseMmap: true})
	require.NoError(b, err)
	defer m.Free()
	const n, state = 450, 380
	prompt := func(it int) []Token { // a different prompt every iteration
		out := make([]Token, n)
		for i := range out {
			out[i] = Token(300 + (i*7919+it*13)%min(20000, m.VocabSize()-300))
		}
		return out
	}
	add := func(bt *Batch, toks []Token, fused bool) {
		for i, tk := range toks {
			seqs := []int{0}
			switch {
			case fused && i < state:
				seqs = []int{0, 16}
			case fused:
				seqs = []int{16}
			}
			require.NoError(b, bt.Add(tk, i, seqs, i == len(toks)-1))
		}
	}
	one := ContextParams{NCtx: 8192, NBatch: 2048, NUBatch: 512, NSeqMax: 1, Threads: 2, FlashAttention: 1}
	verdict := ContextParams{NCtx: 8192, NBatch: 2048, NUBatch: 512, NSeqMax: 128, Threads: 2, KVUnified: true, FlashAttention: 1}
	layouts := []struct {
		name     string
		p        ContextParams
		fused    bool
		resident int
	}{
		{"one-sequence-context", one, false, 0},
		{"verdict-context", verdict, false, 0},
		{"verdict-fused", verdict, true, 0},
		{"verdict-fused-1024-resident", verdict, true, 1024},
	}
	ctxs := make([]*Context, len(layouts))
	for i, l := range layouts {
		c, err := NewContext(m, l.p)
		require.NoError(b, err)
		defer c.Free()
		ctxs[i] = c
	}
	bt, err := NewBatch(2048, 2)
	require.NoError(b, err)
	defer bt.Free()
	ms := make([][]float64, len(layouts))
	it := 0
	for b.Loop() {
		for i, l := range layouts {
			c := ctxs[i]
			c.Clear()
			for done := 0; done < l.resident; done += 512 {
				bt.Clear()
				for k := 0; k < 512; k++ {
					require.NoError(b, bt.Add(Token(400+k), done+k, []int{5}, false))
				}
				require.NoError(b, c.Decode(bt))
			}
			bt.Clear()
			add(bt, prompt(it), l.fused)
			t0 := time.Now()
			require.NoError(b, c.Decode(bt))
			ms[i] = append(ms[i], float64(time.Since(t0).Microseconds())/1000)
		}
		it++
	}
	for i, l := range layouts {
		slices.Sort(ms[i])
		b.ReportMetric(ms[i][(len(ms[i])-1)/2], "ms/"+l.name)
	}
}
