//go:build cgo

package bench

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/engine/llamacpp"
	"github.com/verdict-dev/verdict/internal/gguf"
)

// TestRunSmallConfig runs every workload on the tiny model with small
// sizes: the table and the ratios must be there and make sense. Speed is
// not asserted (that is what the bench is for).
func TestRunSmallConfig(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tiny.gguf")
	require.NoError(t, gguf.Synth(path, gguf.SynthOptions{Shape: "tiny", Seed: 1}))
	jev := "" // without JevBench-240, W2 is reported as skipped
	if dir := os.Getenv("JEVBENCH"); dir != "" {
		jev = filepath.Join(dir, "cases.jsonl")
	}
	rep, err := Run(context.Background(), Config{
		Model: path, PrefillModel: path, PrefillThreads: []int{1}, Threads: 1,
		States: 1, Questions: 3, StateTokens: 120, SuffixTokens: 90,
		JevBench: jev, JevLimit: 1, Independent: 4, Clients: []int{2, 4}, IndependentTokens: 30, Rounds: 2,
	})
	require.NoError(t, err)
	byName := map[string]Row{}
	for _, r := range rep.Rows {
		byName[r.Workload+"/"+r.Mode] = r
		require.Greater(t, r.DecisionsPerSec, 0.0, r.Workload)
		require.Greater(t, r.DecodeShare, 0.0, r.Workload)
		require.LessOrEqual(t, r.TokensEvaluated, r.TokensSubmitted, r.Workload+"/"+r.Mode)
		require.Equal(t, 2, r.Rounds, r.Workload+"/"+r.Mode)
		require.LessOrEqual(t, r.DecisionsPerSecMin, r.DecisionsPerSec, r.Workload+"/"+r.Mode)
		require.LessOrEqual(t, r.DecisionsPerSec, r.DecisionsPerSecMax, r.Workload+"/"+r.Mode)
		if r.SpeedupVsFresh > 0 {
			require.LessOrEqual(t, r.SpeedupMin, r.SpeedupVsFresh, r.Workload+"/"+r.Mode)
			require.LessOrEqual(t, r.SpeedupVsFresh, r.SpeedupMax, r.Workload+"/"+r.Mode)
		}
	}
	require.Contains(t, byName, "W0 prefill/fresh")
	w1 := byName["W1 shape-777/parallel"]
	require.Greater(t, w1.TokenBound, 1.0)
	require.Less(t, w1.TokensEvaluated, byName["W1 shape-777/fresh"].TokensEvaluated)
	require.InDelta(t, 90, w1.AvgSuffix, 20)
	require.Contains(t, byName, "W3 independent/fresh")
	require.Contains(t, byName, "W3 independent/parallel x2")
	require.Contains(t, byName, "W3 independent/parallel x4")
	require.Contains(t, byName, "W1 shape-777/interleaved x4")
	if jev != "" {
		require.Contains(t, byName, "W2 jevbench-240/parallel")
		require.Contains(t, byName, "W2 jevbench-240/interleaved x4")
	}
	var buf bytes.Buffer
	rep.WriteTable(&buf)
	require.True(t, strings.Contains(buf.String(), "W1 shape-777"))
	require.Contains(t, buf.String(), "prefill")
	require.Contains(t, buf.String(), "2 rounds, modes interleaved")
	require.Contains(t, buf.String(), "p95/p50")
	// One together-vs-alone note per grouped workload and per caller count.
	require.Contains(t, buf.String(), "W1 shape-777: a state's questions in one call (parallel) vs one at a time (serial): ")
	require.Contains(t, buf.String(), "W1 shape-777: 4 states' questions taking turns (interleaved) vs state by state (serial): ")
	require.Contains(t, buf.String(), "W3 2 callers at once vs one at a time: ")
	require.Contains(t, buf.String(), "W3 4 callers at once vs one at a time: ")
}

// Shape777Requests: System One requests that parse, one per state, each
// question's suffix at least the asked length and the state about its
// length in the model's tokens; the same requests every time.
func TestShape777Requests(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	require.NoError(t, gguf.Synth(path, gguf.SynthOptions{Shape: "tiny", Seed: 1}))
	e, err := llamacpp.New(llamacpp.Options{ModelPath: path, Threads: 1})
	require.NoError(t, err)
	defer e.Close()
	bodies, err := Shape777Requests(e, 2, 3, 200, 60)
	require.NoError(t, err)
	require.Len(t, bodies, 2)
	again, err := Shape777Requests(e, 2, 3, 200, 60)
	require.NoError(t, err)
	require.Equal(t, bodies, again, "deterministic")
	for _, b := range bodies {
		req, err := decision.ParseSystemOne(b, decision.Limits{})
		require.NoError(t, err)
		ds := req.Decisions()
		require.Len(t, ds, 3)
		n, err := e.TokenCount(ds[0].State.Text)
		require.NoError(t, err)
		require.GreaterOrEqual(t, n, 200)
		require.Less(t, n, 260)
		for _, d := range ds {
			require.Len(t, d.Options, 4)
			_, suffix, err := e.PromptTokens(d)
			require.NoError(t, err)
			require.GreaterOrEqual(t, suffix, 60)
			require.Less(t, suffix, 80)
		}
	}
}
