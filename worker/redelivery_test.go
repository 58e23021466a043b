package worker_test

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/internal/queue"
	"github.com/verdict-dev/verdict/internal/sink"
	"github.com/verdict-dev/verdict/worker"
)

// A message whose receive count says it was in flight before (here: held
// and never deleted, as by a worker that died) is scored first and alone,
// even though it shares its state with the fresh messages received with
// it; the fresh ones are scored after it, together. A fresh worker starts
// with one message.
func TestRedeliveredMessageProcessedAloneAndFirst(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, "local", bundleOpts{clock: true})
	b.send(t, envelope("s1", mkDecision("s1", "shared", "q?")), envelope("s2", mkDecision("s2", "shared", "q?")))
	held, err := b.q.Receive(ctx, queue.ReceiveOptions{Max: 10, Visibility: 30 * time.Second})
	require.NoError(t, err)
	require.Len(t, held, 2)
	b.send(t, envelope("w", mkDecision("w", "warm-up", "q?")))
	b.clock.Advance(time.Second)
	b.send(t, envelope("f1", mkDecision("f1", "shared", "q?")), envelope("f2", mkDecision("f2", "shared", "q?")))
	b.clock.Advance(30 * time.Second) // s1 and s2 are visible again (behind w, f1, f2 in the queue)

	fs := &fakeScorer{}
	w := start(t, worker.Config{Queue: b.q, Scorer: fs, Sinks: []sink.Sink{b.sink}, Concurrency: 2})
	b.waitResults(t, 5, 30*time.Second)
	require.NoError(t, w.Stop(ctx))
	// A fresh worker takes one message (w); then one receive holds s1, s2
	// (received before) and f1, f2.
	require.Equal(t, [][]string{{"w"}, {"s1"}, {"s2"}, {"f1", "f2"}}, fs.callOrder())
}

// A message that crashes the worker process takes no neighbours with it to
// the dead-letter queue: the worker is restarted after every crash, and in
// the end only the crashing message is dead-lettered while the nine others
// are answered.
func TestCrashingMessageIsolatesItself(t *testing.T) {
	t.Parallel()
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			b := setup(t, kind, bundleOpts{maxReceives: 5})
			var msgs []queue.Outgoing
			for i := 0; i < 9; i++ {
				msgs = append(msgs, envelope(fmt.Sprintf("good%d", i), mkDecision("g", fmt.Sprintf("state %d", i), "fine?")))
			}
			msgs = append(msgs[:4], append([]queue.Outgoing{envelope("bad", mkDecision("b", "bad state", "crash?"))}, msgs[4:]...)...)
			b.send(t, msgs...)
			spec := b.spec
			spec.Visibility, spec.Shutdown, spec.Concurrency, spec.MaxMessages = time.Second, 5*time.Second, 2, 10
			// Done when every message is answered or dead-lettered.
			done := func() bool { return len(b.results(t))+b.dead(t) == 10 || b.depth(t) == 0 }
			for round := 0; round < 20 && !done(); round++ {
				h := startHelper(t, spec)
				exited := make(chan struct{})
				go func() { _ = h.Wait(); close(exited) }()
				for finished := false; !finished; {
					select {
					case <-exited:
						finished = true // crashed: start it again
					case <-time.After(200 * time.Millisecond):
						if done() {
							require.NoError(t, h.Process.Signal(syscall.SIGTERM))
							<-exited
							finished = true
						}
					}
				}
			}
			got := b.results(t)
			require.Len(t, got, 9, "innocent messages went unanswered: %d results, %d dead", len(got), b.dead(t))
			require.Equal(t, 1, b.dead(t), "only the crashing message is dead-lettered")
			require.NotContains(t, got, "bad/b")
		})
	}
}

// A fresh worker takes one message and runs one batch until it has a
// timing, so its first result is published after one message is scored,
// not after ten × concurrency; then it takes more.
func TestFreshWorkerStartsWithOneMessage(t *testing.T) {
	t.Parallel()
	b := setup(t, "local", bundleOpts{})
	var msgs []queue.Outgoing
	for i := 0; i < 20; i++ {
		msgs = append(msgs, envelope(fmt.Sprintf("r%d", i), mkDecision("d", fmt.Sprintf("state %d", i), "q?")))
	}
	b.send(t, msgs...)
	rq := &recordingQueue{Queue: b.q}
	fs := &fakeScorer{}
	w := start(t, worker.Config{Queue: rq, Scorer: fs, Sinks: []sink.Sink{b.sink}, Concurrency: 2})
	b.waitResults(t, 20, 30*time.Second)
	require.NoError(t, w.Stop(context.Background()))
	got := rq.received()
	require.Equal(t, 1, got[0].Max, "a fresh worker's first receive")
	grew := false
	for _, o := range got[1:] {
		grew = grew || o.Max > 1
	}
	require.True(t, grew, "the worker never took more than one message: %+v", got)
}
