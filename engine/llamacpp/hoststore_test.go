//go:build cgo

package llamacpp

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/verdict-dev/verdict/decision"
)

// kvCells is the number of cells the engine's KV memory holds, summed over
// sequences (a cell in two sequences counts twice).
func kvCells(t *testing.T, e *Engine) int {
	t.Helper()
	n := 0
	for s := 0; s < e.lctx.NSeqMax(); s++ {
		p, err := e.lctx.SeqPosMax(s)
		require.NoError(t, err)
		n += p + 1
	}
	return n
}

// With the host store the KV memory is empty between sub-rounds, and a
// later request about a cached state decodes only its question: the
// state comes back from host memory, with the same scores as the KV store
// gives and as the whole prompt decoded alone.
func TestHostStoreRestoresCachedStates(t *testing.T) {
	host := newEngine(t, Options{PrefixCacheStore: "host", Threads: 2})
	kv := newEngine(t, Options{PrefixCacheStore: "kv", Threads: 2})
	state := func(i int) string {
		return fmt.Sprintf("Case %d. ", i) + strings.Repeat("The customer writes about an invoice and a locked account. ", 6)
	}
	ask := func(e *Engine, i int, q string) decision.Result {
		d := routing(fmt.Sprint("s", i, q), state(i))
		d.Question = q
		return score1(t, e, d)
	}
	for _, e := range []*Engine{host, kv} {
		for i := 0; i < 3; i++ {
			ask(e, i, "Which queue?")
		}
	}
	requireIdle(t, host)
	require.Zero(t, kvCells(t, host), "host store: nothing resident between sub-rounds")
	require.Positive(t, kvCells(t, kv), "kv store: the cached states stay resident")
	st := host.Stats()
	require.Positive(t, st.CacheHostBytes)
	require.Positive(t, st.CacheMoveNanos)

	for _, e := range []*Engine{host, kv} {
		before := e.Stats()
		r := ask(e, 1, "Who should answer first?") // state 1 again, another question
		after := e.Stats()
		require.Equal(t, before.PrefixHits+1, after.PrefixHits, "a cached state is a hit")
		require.Less(t, r.Tokens.Evaluated, r.Tokens.StatePrefix, "only the question is decoded")
		d := routing("ref", state(1))
		d.Question = "Who should answer first?"
		require.Less(t, maxAbsDiff(reference(t, e, d), r.OptionLogits), logitTol(1e-4))
	}
	requireIdle(t, host)
	require.Zero(t, kvCells(t, host))
}

// A fan-out on a cached state rides along with a fresh state's prefill
// with the host store too: the cached one is restored for that sub-round.
func TestHostStoreRideAlong(t *testing.T) {
	e := newEngine(t, Options{PrefixCacheStore: "host", Threads: 2})
	cached := routing("c0", strings.Repeat("A cached state about billing. ", 8))
	score1(t, e, cached)
	var ds []decision.Decision
	for i := 0; i < 3; i++ {
		d := cached
		d.ID, d.Question = fmt.Sprint("c", i+1), fmt.Sprintf("Question %d?", i)
		ds = append(ds, d)
	}
	fresh := routing("f", strings.Repeat("A fresh state about sales. ", 8))
	ds = append(ds, fresh)
	rs, err := e.Score(context.Background(), ds)
	require.NoError(t, err)
	for i, r := range rs {
		require.Nil(t, r.Error)
		require.Less(t, maxAbsDiff(reference(t, e, ds[i]), r.OptionLogits), logitTol(1e-4), ds[i].ID)
	}
	requireIdle(t, e)
	require.Zero(t, kvCells(t, e))
}

// A new state that shares only its start with a cached one (here a long
// common opening; in practice the chat preamble every state shares)
// copies that start from the cached entry, which then leaves the KV
// memory again before anything is decoded: no decode of the new state
// attends over the rest of the old state's cells.
func TestHostStoreLenderLeavesAtOnce(t *testing.T) {
	e := newEngine(t, Options{PrefixCacheStore: "host", Threads: 2})
	opening := strings.Repeat("The customer writes about an invoice and a locked account. ", 4)
	a := routing("a", opening+strings.Repeat("They also mention a refund for March. ", 4))
	score1(t, e, a)
	requireIdle(t, e)
	require.Len(t, e.cache.entries, 1)
	lender := e.cache.entries[0].seq
	var decodes, lenderCells int
	e.beforeDecodeFunc = func() error { // runs in the decode loop
		decodes++
		if p, err := e.lctx.SeqPosMax(lender); err != nil || p >= 0 {
			lenderCells++
		}
		return nil
	}
	b := routing("b", opening+strings.Repeat("Nothing about money, only a new laptop. ", 4))
	r := score1(t, e, b)
	requireIdle(t, e)
	e.beforeDecodeFunc = nil
	require.Positive(t, decodes)
	require.Zero(t, lenderCells, "the lender's cells were resident in %d of %d decodes", lenderCells, decodes)
	require.Less(t, r.Tokens.Evaluated, r.Tokens.Input-20, "the common opening is reused")
	require.Less(t, maxAbsDiff(reference(t, e, b), r.OptionLogits), logitTol(1e-4))
	require.Zero(t, kvCells(t, e))
}
