//go:build cgo

package llamacpp

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/engine/llamacpp/internal/llama"
)

// scoreAll scores ds in one call and returns each result's option logits.
func scoreAll(t *testing.T, e *Engine, ds []decision.Decision) [][]float64 {
	t.Helper()
	rs, err := e.Score(context.Background(), ds)
	require.NoError(t, err)
	out := make([][]float64, len(rs))
	for i, r := range rs {
		require.Nil(t, r.Error, "decision %d: %+v", i, r.Error)
		out[i] = r.OptionLogits
	}
	return out
}

// batchesOf is the number of decode calls fn makes.
func batchesOf(e *Engine, fn func()) int64 {
	before := e.Stats().Batches
	fn()
	return e.Stats().Batches - before
}

// A fresh state's questions are decoded in the same call as the end of
// the state: their branches are fused into its prefill, not copied from
// it afterwards. They score as the whole prompt decoded alone does, and as
// the same questions do when the state is cached and only the tails are
// decoded (from branches copied off the cache).
func TestTailsAreDecodedWithTheirState(t *testing.T) {
	t.Parallel()
	// Room for all tails in one call whatever the options (without flash
	// attention the default branch budget is smaller).
	e := newEngine(t, Options{BranchBatchTokens: 2048})
	state := "A customer cannot log in after the password reset; the reset email arrived twice."
	ds := fanOut("f", state, 3)
	for _, d := range ds {
		require.False(t, e.prepare(&d, map[string][]llama.Token{}).multi, "single-token labels expected")
	}
	var fused, cached [][]float64
	require.Equal(t, int64(1), batchesOf(e, func() { fused = scoreAll(t, e, ds) }), "decode calls for a fresh state and its three questions")
	require.Equal(t, int64(1), batchesOf(e, func() { cached = scoreAll(t, e, ds) }), "decode calls for three tails on a cached state")
	for i, d := range ds {
		ref := reference(t, e, d)
		requireClose(t, ref, fused[i], logitTol(1e-3), fmt.Sprintf("fused %d vs alone", i))
		requireClose(t, ref, cached[i], logitTol(1e-3), fmt.Sprintf("from the cache %d vs alone", i))
	}
	requireBranchesReturned(t, e)

	// A state that starts like the cached one: its members' branches get
	// the cached part by copy and the rest with the prefill.
	longer := fanOut("g", state+" The customer also asks for a refund of the last invoice.", 2)
	var got [][]float64
	hits := e.Stats().PrefixHits
	require.Equal(t, int64(1), batchesOf(e, func() { got = scoreAll(t, e, longer) }), "decode calls for a state that extends a cached one")
	require.Equal(t, hits+1, e.Stats().PrefixHits, "the longer state reuses the cached one")
	for i, d := range longer {
		requireClose(t, reference(t, e, d), got[i], logitTol(1e-3), fmt.Sprintf("extending %d vs alone", i))
	}
	requireBranchesReturned(t, e)
}

// More members than a head's tokens can carry: the first maxFused are
// fused, the rest branch by copy after the prefill; a multi-token
// decision among them keeps its reserve. All score as alone.
func TestFusionBeyondItsBoundAndWithMultiTokenLabels(t *testing.T) {
	t.Parallel()
	e := newEngine(t, Options{})
	state := "The nightly export fails with a timeout since the schema migration."
	ds := fanOut("m", state, maxFused+6)
	ds[1] = withOptions(ds[1], 40)
	require.True(t, e.prepare(&ds[1], map[string][]llama.Token{}).multi)
	got := scoreAll(t, e, ds)
	for _, i := range []int{0, 1, 2, maxFused - 1, maxFused, len(ds) - 1} {
		tol := logitTol(1e-3)
		if i == 1 {
			tol = labelTol(2e-3)
		}
		requireClose(t, reference(t, e, ds[i]), got[i], tol, fmt.Sprintf("decision %d of %d", i, len(ds)))
	}
	requireBranchesReturned(t, e)
}

// A caller that gives up while its state is still being prefilled (the
// state takes several batches) costs no further decode call; the branches
// fused with the state go back to the pool, and what was cached of the
// state is sound.
func TestCancelDuringAFusedPrefill(t *testing.T) {
	t.Parallel()
	e := newEngine(t, Options{BatchSize: 64, UBatchSize: 64, MaxSequences: 32})
	done := jobsDone(e)
	state := strings.Repeat("The customer reports duplicated invoices after the plan change. ", 12)
	ds := fanOut("x", state, 4)
	require.Greater(t, len(e.prepare(&ds[0], map[string][]llama.Token{}).head), 2*64, "a state of several batches")
	ctx, cancel := context.WithCancel(context.Background())
	after := stopAtDecode(e, 1, cancel)
	_, err := e.Score(ctx, ds)
	require.ErrorIs(t, err, context.Canceled)
	<-done // the loop has finished the cancelled job
	requireBranchesReturned(t, e)
	require.Zero(t, after.Load(), "decode calls after the one during which the caller cancelled")

	e.beforeDecodeFunc = nil
	d := routing("after", state)
	requireClose(t, reference(t, e, d), score1(t, e, d).OptionLogits, logitTol(1e-3), "after a cancelled prefill")
	requireBranchesReturned(t, e)
}
