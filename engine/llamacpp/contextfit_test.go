//go:build cgo

package llamacpp

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/verdict-dev/verdict/decision"
)

// A decision that fits the context alone is scored even when earlier
// states fill the prefix cache: the per-decision fallback runs it on a
// clean cache.
func TestFitsAloneAfterOtherStatesFilledTheCache(t *testing.T) {
	e := newEngine(t, Options{ContextSize: 512})
	var big decision.Decision
	var p, s int
	var err error
	for n := 30; n >= 3; n-- {
		big = withOptions(routing("big", "abc"), n)
		big.Question = "Pick"
		if p, s, err = e.PromptTokens(big); err == nil {
			break
		}
	}
	require.NoError(t, err)
	t.Logf("big: head %d tail %d n_ctx %d cache budget %d", p, s, e.lctx.NCtx(), e.opts.PrefixCacheTokens)
	// alone, on a fresh engine
	score1(t, newEngine(t, Options{ContextSize: 512}), big)
	// after other states filled the prefix cache
	for i := 0; i < 4; i++ {
		score1(t, e, routing(fmt.Sprint("o", i), fmt.Sprintf("Other state number %d with some words in it.", i)))
	}
	t.Logf("cache entries %d", len(e.cache.entries))
	rs, err := e.Score(context.Background(), []decision.Decision{big})
	require.NoError(t, err)
	require.Nil(t, rs[0].Error, "%+v", rs[0].Error)
}

// A decision that fits the context alone is scored in one call with a few
// decisions about other states, not answered too_large.
func TestFitsAloneInCompanyOfOtherStates(t *testing.T) {
	e := newEngine(t, Options{ContextSize: 512})
	var big decision.Decision
	for n := 30; n >= 3; n-- {
		big = withOptions(routing("big", "abc"), n)
		big.Question = "Pick"
		if _, _, err := e.PromptTokens(big); err == nil {
			break
		}
	}
	score1(t, newEngine(t, Options{ContextSize: 512}), big) // fits alone
	var ds []decision.Decision
	for i := 0; i < 3; i++ {
		ds = append(ds, routing(fmt.Sprint("o", i), fmt.Sprintf("Other state number %d with some words in it.", i)))
	}
	ds = append(ds, big)
	rs, err := e.Score(context.Background(), ds)
	require.NoError(t, err)
	for i, r := range rs {
		require.Nil(t, r.Error, "%s: %+v", ds[i].ID, r.Error)
	}
}
