//go:build cgo

package llama

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// decodeChunks decodes toks in seq 0 from position 0, chunk tokens per
// call, and returns a copy of the last token's logits.
func decodeChunks(t testing.TB, c *Context, m *Model, toks []Token, chunk int) []float32 {
	t.Helper()
	b, err := NewBatch(chunk, 1)
	require.NoError(t, err)
	defer b.Free()
	for at := 0; at < len(toks); at += chunk {
		b.Clear()
		end := min(at+chunk, len(toks))
		for i := at; i < end; i++ {
			require.NoError(t, b.Add(toks[i], i, []int{0}, i == len(toks)-1))
		}
		require.NoError(t, c.Decode(b))
	}
	row, err := c.Logits(b.Len()-1, m.VocabSize())
	require.NoError(t, err)
	return append([]float32(nil), row...)
}

func testTokens(m *Model, n int) []Token {
	toks := make([]Token, n)
	for i := range toks {
		toks[i] = Token(3 + (i*37)%(m.VocabSize()-3))
	}
	return toks
}

// A context keeps one CPU thread pool for its life; the pool changes
// where the threads come from, never the numbers.
func TestContextsKeepAThreadPool(t *testing.T) {
	t.Parallel()
	m, err := LoadModel(tinyPath, ModelParams{UseMmap: true})
	require.NoError(t, err)
	defer m.Free()
	params := ContextParams{NCtx: 512, NBatch: 64, NUBatch: 32, NSeqMax: 2, Threads: 2, KVUnified: true, FlashAttention: 1}
	pooled, err := NewContext(m, params)
	require.NoError(t, err)
	require.True(t, pooled.ThreadPool(), "a CPU context must attach a persistent thread pool")
	params.PerGraphThreads = true
	perGraph, err := NewContext(m, params)
	require.NoError(t, err)
	require.False(t, perGraph.ThreadPool())
	defer perGraph.Free()

	toks := testTokens(m, 200)
	want := decodeChunks(t, perGraph, m, toks, 64)
	for range 3 { // the same pool serves graph after graph
		require.NoError(t, pooled.SeqRemove(0, -1, -1))
		require.Equal(t, want, decodeChunks(t, pooled, m, toks, 64))
	}
	// A second pooled context of the same model has its own pool, and
	// freeing one leaves the other working.
	other, err := NewContext(m, ContextParams{NCtx: 512, NBatch: 64, NUBatch: 32, NSeqMax: 2, Threads: 1, KVUnified: true, FlashAttention: 1})
	require.NoError(t, err)
	require.True(t, other.ThreadPool())
	pooled.Free()
	pooled.Free() // twice is safe
	require.False(t, pooled.ThreadPool())
	require.NotEmpty(t, decodeChunks(t, other, m, toks[:50], 64))
	other.Free()
}

// BenchmarkSmallDecodes decodes a 64-token prompt in micro-batches of 16
// with and without the persistent thread pool: per-graph threads cost
// every micro-batch (go test -bench SmallDecodes -count 5).
func BenchmarkSmallDecodes(b *testing.B) {
	m, err := LoadModel(tinyPath, ModelParams{UseMmap: true})
	require.NoError(b, err)
	defer m.Free()
	toks := testTokens(m, 64)
	for _, perGraph := range []bool{false, true} {
		b.Run(fmt.Sprintf("per-graph-threads=%v", perGraph), func(b *testing.B) {
			c, err := NewContext(m, ContextParams{NCtx: 512, NBatch: 64, NUBatch: 16, NSeqMax: 2, Threads: 2, KVUnified: true, FlashAttention: 1, PerGraphThreads: perGraph})
			require.NoError(b, err)
			defer c.Free()
			for b.Loop() {
				require.NoError(b, c.SeqRemove(0, -1, -1))
				decodeChunks(b, c, m, toks, 16)
			}
		})
	}
}
