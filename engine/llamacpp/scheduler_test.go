//go:build cgo

package llamacpp

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/engine/llamacpp/internal/llama"
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

// Work is served in arrival order, and each caller is answered when its
// own decisions are done: x (first) is answered before a, a before b, and
// b's decoding goes on after a was answered — a small request is not
// held back by a larger one that arrived after it. The decode loop's own
// events (decode calls, callers answered) give the order; no clock does.
func TestCallersAreServedInOrderAndAnsweredWhenDone(t *testing.T) {
	t.Parallel()
	// One state per sub-round (every head is longer than the head budget),
	// and several decode calls for b's suffixes.
	e := newEngine(t, Options{BranchBatchTokens: 16, HeadBatchTokens: 16})
	var mu sync.Mutex
	var events []string // in the decode loop's order
	record := func(ev string) {
		mu.Lock()
		events = append(events, ev)
		mu.Unlock()
	}
	e.jobDoneFunc = func(j *job) { record("answer " + j.items[0].d.ID[:1]) }
	h := holdLoop(t, e, func() { record("decode") })

	errs := make(chan error, 3)
	h.enqueue(func() {
		errs <- scoreErr(e, fanOut("x", "A customer cannot log in after the password reset email expired.", 4))
	})
	h.enqueue(func() {
		errs <- scoreErr(e, fanOut("a", "An invoice was charged twice in the same billing period.", 1))
	})
	h.enqueue(func() {
		errs <- scoreErr(e, fanOut("b", "The nightly export job wrote an empty file to the bucket again.", 8))
	})
	require.NoError(t, h.release())
	for range 3 {
		require.NoError(t, <-errs)
	}

	mu.Lock()
	defer mu.Unlock()
	var answers []string
	for _, ev := range events {
		if strings.HasPrefix(ev, "answer ") && ev != "answer w" { // w: the warm-up
			answers = append(answers, ev)
		}
	}
	require.Equal(t, []string{"answer x", "answer a", "answer b"}, answers, "callers not served in arrival order")
	a, b := slices.Index(events, "answer a"), slices.Index(events, "answer b")
	require.Contains(t, events[a+1:b], "decode", "a was answered only after b's decoding ended: %v", events)
}

// stateOf is a state whose head (prompt up to the state's end) is at
// least n tokens.
func stateOf(t *testing.T, e *Engine, seed string, n int) string {
	t.Helper()
	st := seed
	for {
		p, _, err := e.PromptTokens(routing("probe", st))
		require.NoError(t, err)
		if p >= n {
			return st
		}
		st += fmt.Sprintf(" %s reported again at step %d.", seed, p)
	}
}

// Distinct states waiting together are prefilled together only up to
// HeadBatchTokens: on the CPU (default: one fresh state per sub-round)
// three ~150-token states, which one micro-batch would hold, are three
// sub-rounds, each one decode call with its suffix; with a larger
// budget, as on a GPU, one sub-round and one call.
func TestDistinctStatesShareASubRoundUpToTheHeadBudget(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		opts  Options
		calls int64
	}{
		{"cpu default", Options{}, 3},
		{"gpu-like budget", Options{HeadBatchTokens: 2048, BranchBatchTokens: 2048}, 1}, // the suffixes fit one call
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEngine(t, tc.opts)
			require.Equal(t, map[string]int{"cpu default": 1, "gpu-like budget": 2048}[tc.name], e.opts.HeadBatchTokens)
			var ds []decision.Decision
			for _, seed := range []string{"Printer jam", "Refund due", "Login loop"} {
				ds = append(ds, routing(seed, stateOf(t, e, seed, 150)))
			}
			h := holdLoop(t, e, nil)
			before := e.Stats().Batches + 1 // the warm-up's call, held
			errs := make(chan error, len(ds))
			for i := range ds {
				h.enqueue(func() { errs <- scoreErr(e, ds[i:i+1]) })
			}
			require.NoError(t, h.release())
			for range ds {
				require.NoError(t, <-errs)
			}
			require.Equal(t, tc.calls, e.Stats().Batches-before, "decode calls for three fresh ~150-token states")
		})
	}
}

// take keeps the queue's order and puts at most one fresh head past the
// budget into a sub-round: cached heads (no new tokens) ride along before
// and after it, and the first fresh head that does not fit ends the
// sub-round, so nothing behind it is served first.
func TestTakeOneFreshHeadPastTheBudget(t *testing.T) {
	t.Parallel()
	keys := []string{"c1", "f1", "c2", "f2", "c3", "f3"} // a head's one token is its key's index
	newTokens := map[string]int{"c1": 0, "f1": 300, "c2": 0, "f2": 200, "c3": 0, "f3": 100}
	queue := func(ks ...string) *waiting {
		w := &waiting{byHead: map[string]*group{}}
		for _, k := range ks {
			g := &group{key: k, head: []llama.Token{llama.Token(slices.Index(keys, k))}, items: []*item{{}}}
			w.groups = append(w.groups, g)
			w.byHead[k] = g
			w.decisions++
		}
		return w
	}
	keysOf := func(gs []*group) []string {
		var ks []string
		for _, g := range gs {
			ks = append(ks, g.key)
		}
		return ks
	}
	for _, tc := range []struct {
		name   string
		queue  []string
		slots  int
		tokens int
		want   [][]string
	}{
		{"one fresh head a sub-round", []string{"c1", "f1", "c2", "f2", "c3", "f3"}, 16, 1, [][]string{{"c1", "f1", "c2"}, {"f2", "c3"}, {"f3"}}},
		{"a budget holds two", []string{"f1", "f2", "f3", "c1"}, 16, 500, [][]string{{"f1", "f2"}, {"f3", "c1"}}},
		{"slots bound cached heads too", []string{"c1", "c2", "c3", "f1"}, 2, 1, [][]string{{"c1", "c2"}, {"c3", "f1"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := queue(tc.queue...)
			var got [][]string
			for len(w.groups) > 0 {
				sub := w.take(tc.slots, tc.tokens, func(h []llama.Token) int { return newTokens[keys[h[0]]] })
				got = append(got, keysOf(sub))
			}
			require.Equal(t, tc.want, got)
			require.Zero(t, w.decisions)
			require.Empty(t, w.byHead)
		})
	}
}

// Cached heads add no new tokens, so they do not count against the head
// budget: on the CPU (one fresh state a sub-round) new questions on two
// cached ~300-token states ride along with a third, fresh state's
// prefill — one decode call, where counting whole heads made three.
func TestCachedStatesRideAlongWithAFreshPrefill(t *testing.T) {
	t.Parallel()
	// Room for the three suffixes in one call whatever the options
	// (without flash attention the branch budget defaults to 128 tokens); the head
	// budget is the CPU default.
	e := newEngine(t, Options{BranchBatchTokens: 1024})
	require.Equal(t, 1, e.opts.HeadBatchTokens)
	var states []string
	for _, seed := range []string{"Printer jam", "Refund due", "Login loop"} {
		states = append(states, stateOf(t, e, seed, 300))
	}
	for _, st := range states[:2] { // cache two of them
		require.NoError(t, scoreErr(e, []decision.Decision{routing("first", st)}))
	}
	again := func(id, st string) decision.Decision {
		d := routing(id, st)
		d.Question = "Which team should own this, given the history?"
		return d
	}
	h := holdLoop(t, e, nil)
	before := e.Stats().Batches + 1 // the warm-up's call, held
	// Queue order: the fresh state first, then the cached ones.
	ds := []decision.Decision{again("fresh", states[2]), again("cached-1", states[0]), again("cached-2", states[1])}
	got := make([][]float64, len(ds))
	errs := make(chan error, len(ds))
	for i := range ds {
		h.enqueue(func() {
			rs, err := e.Score(context.Background(), ds[i:i+1])
			if err == nil {
				got[i] = rs[0].OptionLogits
			}
			errs <- err
		})
	}
	require.NoError(t, h.release())
	for range ds {
		require.NoError(t, <-errs)
	}
	require.Equal(t, int64(1), e.Stats().Batches-before, "decode calls for one fresh state and two cached ones")
	for i, d := range ds { // each as the whole prompt decoded alone
		requireClose(t, reference(t, e, d), got[i], logitTol(1e-3), d.ID)
	}
}

// heldLoop is an engine whose decode loop is held in its first decode
// call (a warm-up decision's) until release, so that callers can queue up
// behind it in a known order.
type heldLoop struct {
	e        *Engine
	gate     chan struct{} // closed by release
	queued   chan struct{} // a Score call's job waits in the queue
	watching atomic.Bool   // queued is sent to until release
	warm     chan error    // the warm-up's answer
}

// holdLoop holds e's decode loop in the warm-up's first decode call and
// returns once it is held. onDecode, when set, runs in the decode loop
// before every decode call, the held one after its release. It sets e's
// beforeDecodeFunc and queuedFunc: call it before other Score calls run.
func holdLoop(t *testing.T, e *Engine, onDecode func()) *heldLoop {
	t.Helper()
	h := &heldLoop{e: e, gate: make(chan struct{}), queued: make(chan struct{}, 1), warm: make(chan error, 1)}
	h.watching.Store(true)
	entered := make(chan struct{})
	first := true // the decode loop's
	e.queuedFunc = func() {
		if h.watching.Load() {
			h.queued <- struct{}{}
		}
	}
	e.beforeDecodeFunc = func() error {
		if first {
			first = false
			close(entered)
			<-h.gate
		}
		if onDecode != nil {
			onDecode()
		}
		return nil
	}
	go func() { h.warm <- scoreErr(e, []decision.Decision{routing("w", "Warm-up state.")}) }()
	<-h.queued
	<-entered
	return h
}

// enqueue runs score (a Score call) in a goroutine and returns once its
// job waits in the engine's queue, so that callers queue in the order
// they are enqueued.
func (h *heldLoop) enqueue(score func()) {
	go score()
	<-h.queued
}

// release lets the decode loop go on and returns the warm-up's error.
func (h *heldLoop) release() error {
	h.watching.Store(false)
	close(h.gate)
	return <-h.warm
}

// scoreErr scores ds and returns the call's error or the first decision's.
func scoreErr(e *Engine, ds []decision.Decision) error {
	rs, err := e.Score(context.Background(), ds)
	for _, r := range rs {
		if err == nil && r.Error != nil {
			err = fmt.Errorf("%s: %s", r.ID, r.Error.Message)
		}
	}
	return err
}
