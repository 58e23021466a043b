//go:build cgo

package llama

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/verdict-dev/verdict/internal/gguf"
)

// tinyPath is a synthetic model written once for the package.
var tinyPath string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "verdict-llama-test")
	if err != nil {
		panic(err)
	}
	tinyPath = filepath.Join(dir, "tiny.gguf")
	if err := gguf.Synth(tinyPath, gguf.SynthOptions{Shape: "tiny", Seed: 7}); err != nil {
		panic(err)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func TestBindingRefusesInvalidSequences(t *testing.T) {
	t.Parallel()
	m, err := LoadModel(tinyPath, ModelParams{UseMmap: true})
	require.NoError(t, err)
	defer m.Free()
	// A split (non-unified) cache: cpp asserts on out-of-range ids
	// and partial copies there; the binding must refuse them first.
	c, err := NewContext(m, ContextParams{NCtx: 512, NBatch: 64, NUBatch: 64, NSeqMax: 4, Threads: 1})
	require.NoError(t, err)
	defer c.Free()
	require.ErrorIs(t, c.SeqCopy(0, 4, -1, -1), ErrInvalidSeq)
	require.ErrorIs(t, c.SeqCopy(-1, 1, -1, -1), ErrInvalidSeq)
	require.ErrorIs(t, c.SeqCopy(1, 1, -1, -1), ErrInvalidSeq)
	require.ErrorIs(t, c.SeqCopy(0, 1, 0, 5), ErrInvalidSeq)
	require.ErrorIs(t, c.SeqCopy(0, 1, 5, 2), ErrInvalidSeq)
	require.ErrorIs(t, c.SeqRemove(9, -1, -1), ErrInvalidSeq)
	_, err = c.SeqPosMax(4)
	require.ErrorIs(t, err, ErrInvalidSeq)
	_, err = NewContext(m, ContextParams{NCtx: 512, NBatch: 64, NUBatch: 64, NSeqMax: 0, Threads: 1})
	require.Error(t, err)

	b, err := NewBatch(4, 1)
	require.NoError(t, err)
	defer b.Free()
	require.ErrorIs(t, b.Add(1, 0, []int{300}, false), ErrInvalidSeq)
	require.ErrorIs(t, b.Add(1, 0, []int{0, 1}, false), ErrInvalidSeq)
	require.ErrorIs(t, b.Add(1, -1, []int{0}, false), ErrInvalidBatch)
	require.ErrorIs(t, c.Decode(b), ErrInvalidBatch) // empty
	require.NoError(t, b.Add(1, 0, []int{3}, false))
	require.NoError(t, b.Add(5, 1, []int{3}, true))
	require.NoError(t, b.Add(6, 2, []int{3}, false))
	require.NoError(t, b.Add(7, 3, []int{3}, false))
	require.ErrorIs(t, b.Add(8, 4, []int{3}, false), ErrBatchFull)
	require.NoError(t, c.Decode(b))
	_, err = c.Logits(0, m.VocabSize())
	require.ErrorIs(t, err, ErrNoLogits)
	_, err = c.Logits(7, m.VocabSize())
	require.ErrorIs(t, err, ErrNoLogits)
	row, err := c.Logits(1, m.VocabSize())
	require.NoError(t, err)
	require.Len(t, row, m.VocabSize())
	pos, err := c.SeqPosMax(3)
	require.NoError(t, err)
	require.Equal(t, 3, pos)
	// A sequence id beyond the context's is refused before decode.
	b.Clear()
	b2, err := NewBatch(2, 1)
	require.NoError(t, err)
	defer b2.Free()
	require.NoError(t, b2.Add(1, 0, []int{10}, true))
	require.ErrorIs(t, c.Decode(b2), ErrInvalidSeq)
	// Whole-sequence copy and removal work on the split cache.
	require.NoError(t, c.SeqCopy(3, 2, -1, -1))
	require.NoError(t, c.SeqRemove(2, -1, -1))
	// Use after free is an error, not a crash.
	b.Free()
	require.ErrorIs(t, b.Add(1, 0, []int{0}, false), ErrFreed)
}

func TestTokenizeAndPieces(t *testing.T) {
	t.Parallel()
	m, err := LoadModel(tinyPath, ModelParams{UseMmap: true})
	require.NoError(t, err)
	defer m.Free()
	require.Equal(t, 1024, m.VocabSize())
	toks, err := m.Tokenize("Answer: A", true, false)
	require.NoError(t, err)
	require.Equal(t, Token(1), toks[0]) // BOS
	var text strings.Builder
	for _, tok := range toks[1:] {
		p, err := m.Piece(tok, false)
		require.NoError(t, err)
		text.WriteString(p)
	}
	require.Equal(t, " Answer: A", text.String())
	_, err = m.Piece(Token(m.VocabSize()), false)
	require.Error(t, err)
	arch, ok := m.Meta("general.architecture")
	require.True(t, ok)
	require.Equal(t, "llama", arch)
	_, ok = m.Meta("no.such.key")
	require.False(t, ok)
	require.Equal(t, "", m.ChatTemplate())
	require.NotEmpty(t, m.Description())
}

// Models loaded from several goroutines at once (verdict up loads a model
// per pool; tests start engines in parallel): llama.cpp's loader is not
// safe to run concurrently, and the binding serializes it.
func TestConcurrentLoads(t *testing.T) {
	for round := 0; round < 20; round++ {
		var wg sync.WaitGroup
		errs := make([]error, 6)
		models := make([]*Model, 6)
		for i := range models {
			wg.Add(1)
			go func() {
				defer wg.Done()
				models[i], errs[i] = LoadModel(tinyPath, ModelParams{UseMmap: i%2 == 0})
			}()
		}
		wg.Wait()
		for i, m := range models {
			require.NoError(t, errs[i])
			require.Positive(t, m.VocabSize())
			m.Free()
		}
	}
}

// SystemInfo may be called from many goroutines at once (engines opened
// in parallel): llama.cpp builds the line in a static buffer, which two
// calls at once corrupted (an abort in free()).
func TestSystemInfoConcurrent(t *testing.T) {
	want := SystemInfo()
	require.NotEmpty(t, want)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for range 50 {
				if got := SystemInfo(); got != want {
					t.Errorf("SystemInfo() = %q, want %q", got, want)
				}
			}
		})
	}
	wg.Wait()
}
