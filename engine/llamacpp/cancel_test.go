//go:build cgo

package llamacpp

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/verdict-dev/verdict/decision"
)

// fanOut is n questions about one state: with a small branch budget, many
// decode calls.
func fanOut(prefix, state string, n int) []decision.Decision {
	var ds []decision.Decision
	for i := 0; i < n; i++ {
		d := routing(fmt.Sprint(prefix, i), state)
		d.Question = fmt.Sprintf("Question %d: %s", i, strings.Repeat("which team owns this? ", 3))
		ds = append(ds, d)
	}
	return ds
}

// stopAtDecode runs stop in the decode loop just before its nth decode
// call (which still runs) and counts the decode calls after that one.
func stopAtDecode(e *Engine, n int64, stop func()) *atomic.Int64 {
	var calls, after atomic.Int64
	var stopped atomic.Bool
	e.beforeDecodeFunc = func() error {
		if stopped.Load() {
			after.Add(1)
			return nil
		}
		if calls.Add(1) == n {
			stop()
			stopped.Store(true)
		}
		return nil
	}
	return &after
}

// requireBranchesReturned requires the engine idle and every branch
// sequence back in the pool.
func requireBranchesReturned(t *testing.T, e *Engine) {
	t.Helper()
	requireIdle(t, e)
	require.Len(t, e.free, e.lctx.NSeqMax()-e.opts.PrefixCacheSlots, "branch sequences not returned")
}

// requireIdle requires that the decode loop has finished every job (it
// releases a job's admission when the job's last decision is done). A
// Score call that returned its results has had its job finished; after
// one that returned because its caller gave up, wait for the job first
// (jobsDone).
func requireIdle(t *testing.T, e *Engine) {
	t.Helper()
	require.Zero(t, e.Stats().Pending, "a job is still in flight")
}

// jobsDone reports on the returned channel every job the decode loop
// finishes (each Score call's, answered or given up). Call it before the
// engine's first Score; it holds up to 16 reports not yet received.
func jobsDone(e *Engine) <-chan struct{} {
	done := make(chan struct{}, 16)
	e.jobDoneFunc = func(*job) { done <- struct{}{} }
	return done
}

// A caller that gives up mid-round stops costing decode calls: the call
// running when it cancels is the last one its work takes, and its branch
// sequences go back to the pool.
func TestCancelledWorkStopsWithinOneDecode(t *testing.T) {
	t.Parallel()
	e := newEngine(t, Options{BranchBatchTokens: 16})
	done := jobsDone(e)
	ctx, cancel := context.WithCancel(context.Background())
	after := stopAtDecode(e, 3, cancel)
	_, err := e.Score(ctx, fanOut("c", "A customer reports that invoices are duplicated.", 12))
	require.ErrorIs(t, err, context.Canceled)
	<-done // the loop has finished the cancelled job
	require.Zero(t, after.Load(), "decode calls after the one during which the caller cancelled")
	requireBranchesReturned(t, e)

	// The engine goes on, and what it cached of the cancelled state is sound.
	e.beforeDecodeFunc = nil
	d := routing("next", "A customer reports that invoices are duplicated.")
	requireClose(t, reference(t, e, d), score1(t, e, d).OptionLogits, logitTol(1e-3), "after a cancelled round")
}

// A cancelled caller's state is dropped at a prefill boundary: its head
// stops where the last decode left it, and a later request about the
// same state reuses only what was decoded.
func TestCancelledPrefillIsCutToWhatWasDecoded(t *testing.T) {
	t.Parallel()
	e := newEngine(t, Options{BatchSize: 32, UBatchSize: 32, BranchBatchTokens: 32, MaxSequences: 16})
	done := jobsDone(e)
	state := strings.Repeat("The export failed again overnight and the file was empty. ", 8)
	ctx, cancel := context.WithCancel(context.Background())
	after := stopAtDecode(e, 2, cancel)
	d := routing("p", state)
	p, _, err := e.PromptTokens(d)
	require.NoError(t, err)
	require.Greater(t, p, 3*32, "the head must take several prefill calls")
	_, err = e.Score(ctx, []decision.Decision{d})
	require.ErrorIs(t, err, context.Canceled)
	<-done // the loop has finished the cancelled job
	requireIdle(t, e)
	require.Zero(t, after.Load(), "decode calls after the one during which the caller cancelled")
	require.Len(t, e.cache.entries, 1)
	require.Equal(t, 2*32, len(e.cache.entries[0].tokens), "the cached head is what two calls decoded")

	e.beforeDecodeFunc = nil
	r := score1(t, e, d)
	require.Equal(t, r.Tokens.Input-2*32, r.Tokens.Evaluated, "the decoded part is reused, the rest decoded")
	requireClose(t, reference(t, e, d), r.OptionLogits, logitTol(1e-3), "after a cut prefill")
}

// Close does not wait behind work in flight: the decode call running when
// Close is called is the last one, and what was not scored comes back as
// closed.
func TestCloseStopsInFlightWorkWithinOneDecode(t *testing.T) {
	t.Parallel()
	e, err := New(Options{ModelPath: tinyPath, BranchBatchTokens: 16})
	require.NoError(t, err)
	closed := make(chan struct{})
	after := stopAtDecode(e, 3, func() {
		go func() {
			_ = e.Close()
			close(closed)
		}()
		<-e.quit // Close has begun
	})
	rs, err := e.Score(context.Background(), fanOut("c", "The nightly export fails with an empty file.", 12))
	require.NoError(t, err)
	<-closed
	require.Zero(t, after.Load(), "decode calls after the one during which Close was called")
	unscored := 0
	for _, r := range rs {
		if r.Error != nil {
			require.Contains(t, r.Error.Message, "closed")
			unscored++
		}
	}
	require.Positive(t, unscored)
}

// One caller cancelling does not disturb another's decisions in the same
// round: they are scored as if alone.
func TestCancelledNeighbourLeavesTheRoundExact(t *testing.T) {
	t.Parallel()
	e := newEngine(t, Options{BranchBatchTokens: 16})
	gate, entered, queued := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var calls atomic.Int64
	ctxA, cancelA := context.WithCancel(context.Background())
	defer cancelA()
	e.queuedFunc = func() { queued <- struct{}{} }
	e.beforeDecodeFunc = func() error {
		switch calls.Add(1) {
		case 1: // the first round: hold it until both jobs wait
			close(entered)
			<-gate
		case 4: // inside the round of both jobs
			cancelA()
		}
		return nil
	}
	go func() { _, _ = e.Score(context.Background(), []decision.Decision{routing("first", "Hold the loop.")}) }()
	<-queued
	<-entered
	errA := make(chan error, 1)
	go func() {
		_, err := e.Score(ctxA, fanOut("a", "A customer cannot log in after the password reset.", 6))
		errA <- err
	}()
	<-queued // a's job waits
	b := fanOut("b", "An invoice was charged twice to the company card.", 6)
	rsB := make(chan []decision.Result, 1)
	go func() {
		rs, err := e.Score(context.Background(), b)
		if err != nil {
			panic(err)
		}
		rsB <- rs
	}()
	<-queued // b's job waits behind a's
	close(gate)
	require.ErrorIs(t, <-errA, context.Canceled)
	got := <-rsB
	requireBranchesReturned(t, e)
	for _, i := range []int{0, 5} {
		require.Nil(t, got[i].Error)
		requireClose(t, reference(t, e, b[i]), got[i].OptionLogits, logitTol(1e-3), b[i].ID)
	}
}
