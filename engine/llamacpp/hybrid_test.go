//go:build cgo

package llamacpp

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/engine/llamacpp/internal/llama"
	"github.com/verdict-dev/verdict/internal/gguf"
)

// Hybrid models (qwen35: Gated-DeltaNet layers with a full-attention layer
// every few) keep one recurrent state per sequence that exists only at the
// sequence's last position. These tests hold the engine to the same
// guarantees as for attention-only models: alone, in a fan-out, batched
// with unrelated decisions, from a cached prefix or fresh, the same
// probabilities within hybridTol.

// hybridTol bounds |Δp| between schedules. Measured on the tiny qwen35
// model: see the t.Logf lines (≈1e-7); recurrent layers sum in another
// order when ubatches are split differently.
const hybridTol = 1e-4

var (
	qwenOnce sync.Once
	qwenPath string
)

func qwen35Tiny(t *testing.T) string {
	t.Helper()
	qwenOnce.Do(func() {
		qwenPath = strings.TrimSuffix(tinyPath, "tiny.gguf") + "qwen35-tiny.gguf"
		if err := gguf.Synth(qwenPath, gguf.SynthOptions{Arch: "qwen35", Shape: "tiny", Seed: 5, Chat: gguf.ChatChatML}); err != nil {
			panic(err)
		}
	})
	return qwenPath
}

// hybridReference scores d with nothing shared: a fresh one-sequence
// context decodes the whole prompt (and, for multi-token labels, each
// label prefix from scratch: a recurrent state cannot be rolled back).
func hybridReference(t *testing.T, e *Engine, d decision.Decision) []float64 {
	t.Helper()
	it := e.prepare(&d, map[string][]llama.Token{})
	require.NoError(t, it.err)
	prompt := append(append([]llama.Token(nil), it.head...), it.tail...)
	rowAfter := func(extra []llama.Token) []float32 {
		c, err := llama.NewContext(e.model, llama.ContextParams{NCtx: 4096, NBatch: 4096, NUBatch: 512, NSeqMax: 1, Threads: 2})
		require.NoError(t, err)
		defer c.Free()
		b, err := llama.NewBatch(4096, 1)
		require.NoError(t, err)
		defer b.Free()
		all := append(append([]llama.Token(nil), prompt...), extra...)
		for i, tok := range all {
			require.NoError(t, b.Add(tok, i, []int{0}, i == len(all)-1))
		}
		require.NoError(t, c.Decode(b))
		row, err := c.Logits(len(all)-1, e.model.VocabSize())
		require.NoError(t, err)
		return append([]float32(nil), row...)
	}
	return labelScores(it, rowAfter(nil), rowAfter)
}

func TestHybridModelIsRecognised(t *testing.T) {
	t.Parallel()
	e := newEngine(t, Options{ModelPath: qwen35Tiny(t)})
	require.True(t, e.recurrent)
	require.True(t, e.model.IsHybrid())
	id := e.Identity()
	require.Equal(t, "qwen35", id.Architecture)
	require.Equal(t, "hybrid", id.Memory)
	require.Contains(t, id.LlamaCpp, "v0.5.0")
	require.Equal(t, "CPU", id.Backend)
	// n_seq_max was sized from the measured per-sequence state.
	require.GreaterOrEqual(t, e.lctx.NSeqMax(), 8)
}

func TestHybridSequencesSizedFromStateMemory(t *testing.T) {
	t.Parallel()
	// A budget of three states' worth gives the floor of 8 sequences; a
	// large one the ceiling of 128; an explicit MaxSequences wins.
	probe := newEngine(t, Options{ModelPath: qwen35Tiny(t), MaxSequences: 8})
	m, err := measureSeqState(probe.model, probe.opts)
	require.NoError(t, err)
	require.Greater(t, m, 0)
	t.Logf("qwen35 tiny: %d bytes of state per sequence", m)
	small := newEngine(t, Options{ModelPath: qwen35Tiny(t), RecurrentMemory: int64(3 * m)})
	require.Equal(t, 8, small.lctx.NSeqMax())
	mid := newEngine(t, Options{ModelPath: qwen35Tiny(t), RecurrentMemory: int64(20 * m)})
	require.Equal(t, 20, mid.lctx.NSeqMax())
	big := newEngine(t, Options{ModelPath: qwen35Tiny(t), RecurrentMemory: 1 << 40})
	require.Equal(t, 128, big.lctx.NSeqMax())
	require.Equal(t, 8, probe.lctx.NSeqMax())
}

func hybridFan(state string, n int) []decision.Decision {
	var ds []decision.Decision
	for i := 0; i < n; i++ {
		d := routing(fmt.Sprint("q", i), state)
		d.Question = fmt.Sprintf("Question %d: which team should own this ticket?", i)
		ds = append(ds, d)
	}
	return ds
}

func TestHybridFanOutBatchAndCacheMatchAlone(t *testing.T) {
	t.Parallel()
	path := qwen35Tiny(t)
	fresh := newEngine(t, Options{ModelPath: path, NoPrefixCache: true})
	state := "Subject: export failing. Our nightly export has failed 8 times; 60 users are affected and there is no workaround."
	fan := hybridFan(state, 6)
	alone := make([]decision.Result, len(fan))
	for i, d := range fan {
		alone[i] = score1(t, fresh, d)
		requireClose(t, hybridReference(t, fresh, d), alone[i].OptionLogits, logitTol(1e-3), "alone vs reference "+d.ID)
	}

	e := newEngine(t, Options{ModelPath: path})
	worst := 0.0
	check := func(what string, got []decision.Result) {
		t.Helper()
		for i := range fan {
			require.Nil(t, got[i].Error, "%s %s: %+v", what, fan[i].ID, got[i].Error)
			require.Equal(t, alone[i].Chosen, got[i].Chosen, "%s %s", what, fan[i].ID)
			d := maxAbsDiff(alone[i].Probabilities, got[i].Probabilities)
			worst = max(worst, d)
			require.Less(t, d, probTol(hybridTol), "%s %s", what, fan[i].ID)
		}
	}
	// Fan-out: one prefill, six branches.
	rs, err := e.Score(context.Background(), fan)
	require.NoError(t, err)
	check("fan-out", rs)
	st := e.Stats()
	require.Equal(t, int64(1), st.PrefixMisses)
	require.Equal(t, rs[0].Tokens.Input, rs[0].Tokens.Evaluated, "the first branch carries the prefill")
	for _, r := range rs[1:] {
		require.Equal(t, r.Tokens.Input-r.Tokens.StatePrefix, r.Tokens.Evaluated)
	}
	// Cache hit: the same state again evaluates only the suffixes.
	rs, err = e.Score(context.Background(), fan)
	require.NoError(t, err)
	check("cache hit", rs)
	require.Equal(t, st.PrefixHits+1, e.Stats().PrefixHits)
	require.Equal(t, rs[0].Tokens.Input-rs[0].Tokens.StatePrefix, rs[0].Tokens.Evaluated)
	// Batched among unrelated decisions on other states.
	var mixed []decision.Decision
	for i := 0; i < 10; i++ {
		mixed = append(mixed, routing(fmt.Sprint("other", i), fmt.Sprintf("Unrelated ticket %d about plan %d and %d seats.", i, i%3, 7*i)))
		if i < len(fan) {
			mixed = append(mixed, fan[i])
		}
	}
	out, err := newEngine(t, Options{ModelPath: path}).Score(context.Background(), mixed)
	require.NoError(t, err)
	var got []decision.Result
	for i, r := range out {
		if strings.HasPrefix(mixed[i].ID, "q") {
			got = append(got, r)
		} else {
			require.Nil(t, r.Error)
		}
	}
	check("batched with unrelated", got)
	t.Logf("hybrid: max |Δp| over fan-out, cache hit and mixed batch = %.3g", worst)
}

// A cached entry whose state is only partly shared with a new one cannot
// be cut back (its recurrent state sits at its last token), so the new
// state is prefilled whole; an entry that the new state extends is
// continued in place. Both must match a fresh computation.
func TestHybridPrefixCacheReusesOnlyWholeEntries(t *testing.T) {
	t.Parallel()
	path := qwen35Tiny(t)
	e := newEngine(t, Options{ModelPath: path, PrefixCacheSlots: 4})
	fresh := newEngine(t, Options{ModelPath: path, NoPrefixCache: true})
	base := "Ticket 4411: the customer cannot log in after the password reset"
	a := routing("a", base+" and the reset email never arrived.")
	score1(t, e, a)

	// Shares a long common token prefix with a, but diverges before a ends.
	b := routing("b", base+" although the reset email did arrive.")
	before := e.Stats()
	rb := score1(t, e, b)
	after := e.Stats()
	require.Equal(t, before.PrefixMisses+1, after.PrefixMisses, "a partly shared entry must not count as a hit")
	require.Equal(t, rb.Tokens.Input, rb.Tokens.Evaluated, "the whole prompt is evaluated")
	want := score1(t, fresh, b)
	require.Less(t, maxAbsDiff(want.Probabilities, rb.Probabilities), hybridTol)

	// JSON states with a shared leading part: the same rule.
	j1 := routing("j1", "x")
	j1.State = decision.State{JSON: []byte(`{"customer":"acme","plan":"pro","text":"reset my password"}`)}
	j2 := j1
	j2.ID = "j2"
	j2.State = decision.State{JSON: []byte(`{"customer":"acme","plan":"pro","text":"refund my invoice"}`)}
	score1(t, e, j1)
	r2 := score1(t, e, j2)
	require.Less(t, maxAbsDiff(score1(t, fresh, j2).Probabilities, r2.Probabilities), hybridTol)

	// The same state asked again after others were cached: an exact hit.
	before = e.Stats()
	rb2 := score1(t, e, b)
	require.Equal(t, before.PrefixHits+1, e.Stats().PrefixHits)
	require.Less(t, maxAbsDiff(want.Probabilities, rb2.Probabilities), hybridTol)
}

func TestHybridMultiTokenLabelsAndManyOptions(t *testing.T) {
	t.Parallel()
	e := newEngine(t, Options{ModelPath: qwen35Tiny(t)})
	d := withOptions(routing("many", "Pick the numbered choice that matches this ticket."), 40)
	it := e.prepare(&d, map[string][]llama.Token{})
	require.NoError(t, it.err)
	r := score1(t, e, d)
	require.InDelta(t, 1.0, sum(r.Probabilities), 1e-9)
	requireClose(t, hybridReference(t, e, d), r.OptionLogits, labelTol(2e-3), fmt.Sprintf("40 options (multi-token labels: %v)", it.multi))

	d255 := withOptions(routing("255", "Pick one of very many choices."), 255)
	r255 := score1(t, e, d255)
	require.Len(t, r255.Probabilities, 255)
	require.InDelta(t, 1.0, sum(r255.Probabilities), 1e-9)
}

func TestHybridConcurrentCallersMatchSerial(t *testing.T) {
	t.Parallel()
	path := qwen35Tiny(t)
	serial := newEngine(t, Options{ModelPath: path, NoPrefixCache: true})
	var ds []decision.Decision
	for s := 0; s < 4; s++ {
		ds = append(ds, hybridFan(fmt.Sprintf("State %d: a customer reports problem number %d with the %s feature.", s, s*3, []string{"export", "login", "billing", "search"}[s]), 3)...)
	}
	want := make([]decision.Result, len(ds))
	for i, d := range ds {
		want[i] = score1(t, serial, d)
	}
	e := newEngine(t, Options{ModelPath: path, MaxSequences: 12, PrefixCacheSlots: 3})
	var wg sync.WaitGroup
	got := make([]decision.Result, len(ds))
	for i := range ds {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			rs, err := e.Score(context.Background(), ds[i:i+1])
			if err == nil {
				got[i] = rs[0]
			}
		}(i)
	}
	wg.Wait()
	worst := 0.0
	for i := range ds {
		require.Nil(t, got[i].Error, "%d", i)
		require.Equal(t, want[i].Chosen, got[i].Chosen)
		worst = max(worst, maxAbsDiff(want[i].Probabilities, got[i].Probabilities))
	}
	t.Logf("hybrid concurrent vs serial: max |Δp| = %.3g", worst)
	require.Less(t, worst, hybridTol)
}
