//go:build cgo

package worker_test

import (
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/engine/llamacpp"
	"github.com/verdict-dev/verdict/internal/gguf"
	"github.com/verdict-dev/verdict/internal/sink"
	"github.com/verdict-dev/verdict/worker"
)

// TestRealEngineEndToEnd runs the worker with the real llama.cpp engine on
// a synthetic tiny model: local queue in, local results store out.
func TestRealEngineEndToEnd(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	require.NoError(t, gguf.Synth(path, gguf.SynthOptions{Shape: "tiny", Seed: 1}))
	eng, err := llamacpp.New(llamacpp.Options{ModelPath: path, ContextSize: 2048})
	require.NoError(t, err)
	defer eng.Close()

	b := setup(t, "local", bundleOpts{})
	b.send(t,
		envelope("r1", mkDecision("a", "The customer cannot log in.", "Is this about access?"), mkDecision("b", "The customer cannot log in.", "Is this urgent?")),
		envelope("r2", mkDecision("c", "The customer cannot log in.", "Is this billing?")),
		envelope("r3", mkDecision("d", "An invoice was charged twice.", "Is this billing?")),
	)
	start(t, worker.Config{Queue: b.q, Scorer: eng, Sinks: []sink.Sink{b.sink},
		PrefixStatsFunc: func() (int64, int64) { s := eng.Stats(); return s.PrefixHits, s.PrefixMisses }})
	got := b.waitResults(t, 4, 60*time.Second)
	for _, key := range []string{"r1/a", "r1/b", "r2/c", "r3/d"} {
		rec := decode(t, got[key][0])
		require.Equal(t, decision.StatusDecided, rec.Status, key)
		require.Nil(t, rec.Result.Error)
		require.Len(t, rec.Result.Probabilities, 2)
		sum := rec.Result.Probabilities[0] + rec.Result.Probabilities[1]
		require.InDelta(t, 1, sum, 1e-9)
		require.False(t, math.IsNaN(sum))
		require.NotNil(t, rec.Result.Model)
		require.NotEmpty(t, rec.Result.PromptSHA256)
		require.Contains(t, []string{"yes", "no"}, rec.Result.Chosen)
	}
}
