//go:build cgo

package llamacpp

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// errInjected is the decode failure the retry tests inject.
var errInjected = errors.New("injected decode failure")

// failDecodes makes the decode calls numbered in fail (from 1) fail
// without running.
func failDecodes(e *Engine, fail ...int64) {
	var calls atomic.Int64
	e.beforeDecodeFunc = func() error {
		n := calls.Add(1)
		for _, f := range fail {
			if n == f {
				return errInjected
			}
		}
		return nil
	}
}

// A sub-round whose decode fails is retried from scratch on a clean KV
// memory: the retry keeps nothing of the failed try (tail cursors, branch
// sequences, logits read, decisions scored, tokens counted), so every
// decision is scored and counted as in a clean run, wherever the first
// try failed.
func TestRetryStartsFromScratch(t *testing.T) {
	t.Parallel()
	opts := Options{BranchBatchTokens: 16}
	ds := fanOut("r", "The customer was charged twice and now cannot log in.", 6)
	clean := newEngine(t, opts)
	want, err := clean.Score(context.Background(), ds)
	require.NoError(t, err)
	calls := clean.Stats().Batches
	require.Greater(t, calls, int64(3), "the sub-round takes several decode calls")
	for _, failAt := range []int64{1, 2, calls / 2, calls - 1, calls} {
		t.Run(fmt.Sprint("fail call ", failAt), func(t *testing.T) {
			t.Parallel()
			e := newEngine(t, opts)
			failDecodes(e, failAt)
			got, err := e.Score(context.Background(), ds)
			require.NoError(t, err)
			st := e.Stats()
			require.Equal(t, int64(2), st.PrefixHits+st.PrefixMisses, "one try, then one retry")
			for i := range ds {
				require.Nil(t, got[i].Error, "%s: %+v", ds[i].ID, got[i].Error)
				require.Equal(t, want[i].Tokens.Evaluated, got[i].Tokens.Evaluated, "%s: tokens counted", ds[i].ID)
				requireClose(t, want[i].OptionLogits, got[i].OptionLogits, logitTol(1e-6), ds[i].ID)
			}
			requireBranchesReturned(t, e)
		})
	}
}

// When the retry fails too, every decision is scored alone on an empty
// KV memory, again from scratch: each decodes its whole prompt once.
func TestSecondFailureScoresEachDecisionAlone(t *testing.T) {
	t.Parallel()
	e := newEngine(t, Options{BranchBatchTokens: 16})
	ds := fanOut("s", "The nightly export wrote an empty file to the bucket.", 4)
	failDecodes(e, 3, 4) // the third call of the first try, the first of the retry
	got, err := e.Score(context.Background(), ds)
	require.NoError(t, err)
	e.beforeDecodeFunc = nil
	for i, d := range ds {
		require.Nil(t, got[i].Error, "%s: %+v", d.ID, got[i].Error)
		require.Equal(t, got[i].Tokens.Input, got[i].Tokens.Evaluated, "%s: alone, every token once", d.ID)
		requireClose(t, reference(t, e, d), got[i].OptionLogits, logitTol(1e-3), d.ID)
	}
	requireBranchesReturned(t, e)
}
