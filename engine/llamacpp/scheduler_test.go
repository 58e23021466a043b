//go:build llamacpp

package llamacpp

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/verdict-dev/verdict/decision"
)

// New refuses options out of range (a negative branch budget would spin
// the decode loop) before it loads anything.
func TestNewRefusesOptionsOutOfRange(t *testing.T) {
	_, err := New(Options{ModelPath: tinyPath, BranchBatchTokens: -1})
	require.ErrorContains(t, err, "BranchBatchTokens")
	_, err = New(Options{ModelPath: tinyPath, MaxSequences: 2})
	require.ErrorContains(t, err, "MaxSequences")
}

// A branch budget above the context's n_batch (llama.cpp caps n_batch at
// n_ctx) still scores a fan-out in one sub-round, without a failed decode
// and retry.
func TestBranchBudgetAboveNBatchStaysInOneSubRound(t *testing.T) {
	e := newEngine(t, Options{ContextSize: 256, FlashAttention: "on"})
	var ds []decision.Decision
	for i := 0; i < 12; i++ {
		d := routing(fmt.Sprint("q", i), "S.")
		d.Question = fmt.Sprint("Q", i, "?")
		d.Options = []decision.Option{{ID: "a"}, {ID: "b"}}
		ds = append(ds, d)
	}
	requireOneSubRound(t, e, ds)
}

// requireOneSubRound scores ds, decisions about one state, and requires
// every one scored in a single sub-round: one group, one acquire; more
// means the sub-round failed and was retried.
func requireOneSubRound(t *testing.T, e *Engine, ds []decision.Decision) {
	t.Helper()
	p, s, err := e.PromptTokens(ds[0])
	require.NoError(t, err)
	t.Logf("head %d tail %d branch %d n_batch %d n_ctx %d", p, s, e.opts.BranchBatchTokens, e.lctx.NBatch(), e.lctx.NCtx())
	rs, err := e.Score(context.Background(), ds)
	require.NoError(t, err)
	for i, r := range rs {
		require.Nil(t, r.Error, "%s: %+v", ds[i].ID, r.Error)
	}
	st := e.Stats()
	require.Equal(t, int64(1), st.PrefixHits+st.PrefixMisses, "the sub-round failed and was retried")
}

// Multi-token labels expand with only two branch sequences.
func TestMultiTokenLabelsWithTwoBranchSequences(t *testing.T) {
	e := newEngine(t, Options{MaxSequences: 3}) // one cache slot, two branch sequences
	d := withOptions(routing("m", "State."), 30)
	rs, err := e.Score(context.Background(), []decision.Decision{d})
	require.NoError(t, err)
	require.Nil(t, rs[0].Error, "%+v", rs[0].Error)
}

// Several multi-token decisions share three branch sequences: one keeps a
// sequence free for label branches, so none starves and no sub-round
// fails.
func TestMultiTokenDecisionsDoNotStarveForSequences(t *testing.T) {
	e := newEngine(t, Options{MaxSequences: 6, BranchBatchTokens: 1024}) // 3 cache slots, 3 branch seqs
	var ds []decision.Decision
	for i := 0; i < 4; i++ {
		d := withOptions(routing(fmt.Sprint("m", i), "State."), 27)
		d.Options = d.Options[:27]
		for j := range d.Options {
			d.Options[j].Description = ""
		}
		ds = append(ds, d)
	}
	requireOneSubRound(t, e, ds)
}

// With every cache slot taken, a state that shares a leading part with a
// cached one reuses that part: the slot freed for it is another entry's,
// never the one it copies from.
func TestPrefixCacheFullReusesTheBestMatch(t *testing.T) {
	e := newEngine(t, Options{PrefixCacheSlots: 2, PrefixCacheTokens: 10000})
	mk := func(text string) decision.Decision {
		d := routing("j", "x")
		d.State = decision.State{JSON: json.RawMessage(text)}
		return d
	}
	score1(t, e, mk(`{"customer":"acme","plan":"pro","text":"reset my password"}`))
	score1(t, e, routing("other", "Unrelated."))
	r := score1(t, e, mk(`{"customer":"acme","plan":"pro","text":"refund my invoice"}`))
	t.Logf("input %d prefix %d evaluated %d", r.Tokens.Input, r.Tokens.StatePrefix, r.Tokens.Evaluated)
	require.Less(t, r.Tokens.Evaluated, r.Tokens.Input-10, "common JSON prefix not reused")
}
