package worker_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/engine"
	"github.com/verdict-dev/verdict/internal/queue"
	"github.com/verdict-dev/verdict/internal/queue/queuetest"
	"github.com/verdict-dev/verdict/internal/sink"
	"github.com/verdict-dev/verdict/worker"
)

// hangingScorer is a fake engine whose calls never return and ignore their
// context: a wedged engine or a network call without a timeout. Each call
// reports "scoring" on events as it starts.
type hangingScorer struct {
	unblock chan struct{}
	events  *eventLog
}

func newHangingScorer(t *testing.T) *hangingScorer {
	h := &hangingScorer{unblock: make(chan struct{}), events: newEventLog()}
	t.Cleanup(func() { close(h.unblock) }) // let the abandoned goroutines end
	return h
}

func (h *hangingScorer) Score(context.Context, []decision.Decision) ([]decision.Result, error) {
	h.events.add("scoring")
	<-h.unblock
	return nil, errors.New("unblocked at the end of the test")
}

// hangingSink is a fake sink whose Publish never returns and ignores its
// context.
type hangingSink struct{ unblock chan struct{} }

func (h *hangingSink) Name() string { return "hanging" }
func (h *hangingSink) Publish(context.Context, []sink.Record) error {
	<-h.unblock
	return errors.New("unblocked at the end of the test")
}

// closingScorer is a fake of an engine being closed: every decision comes
// back unscored with the engine's closed error, the call itself succeeds
// (the llamacpp engine answers so for the decisions it did not reach).
type closingScorer struct{}

func (closingScorer) Score(_ context.Context, ds []decision.Decision) ([]decision.Result, error) {
	out := make([]decision.Result, len(ds))
	for i := range ds {
		out[i] = engine.ErrorResult(&ds[i], engine.ErrClosed)
	}
	return out, nil
}

func metricsText(w *worker.Worker) string {
	rec := httptest.NewRecorder()
	w.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	return rec.Body.String()
}

// metricValue is the value of one of the worker's counters or gauges
// without labels; 0 when it has none.
func metricValue(t testing.TB, w *worker.Worker, name string) float64 {
	t.Helper()
	fams, err := w.Registry().Gather()
	require.NoError(t, err)
	for _, f := range fams {
		if f.GetName() != name || len(f.GetMetric()) == 0 {
			continue
		}
		m := f.GetMetric()[0]
		if c := m.GetCounter(); c != nil {
			return c.GetValue()
		}
		return m.GetGauge().GetValue()
	}
	return 0
}

// A scorer or sink call that never returns does not hold its message: at
// the message deadline the work is abandoned and the message released,
// heartbeat or not, until the redrive policy dead-letters it.
func TestCallThatNeverReturnsReleasedAtMessageDeadline(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, kind string
		cfg        func(t *testing.T, b *bundle) worker.Config
	}{
		{"local/scorer", "local", func(t *testing.T, b *bundle) worker.Config {
			return worker.Config{Scorer: newHangingScorer(t), Sinks: []sink.Sink{b.sink}}
		}},
		{"sqs/scorer", "sqs", func(t *testing.T, b *bundle) worker.Config {
			return worker.Config{Scorer: newHangingScorer(t), Sinks: []sink.Sink{b.sink}}
		}},
		{"local/sink", "local", func(t *testing.T, b *bundle) worker.Config {
			hs := &hangingSink{unblock: make(chan struct{})}
			t.Cleanup(func() { close(hs.unblock) })
			return worker.Config{Scorer: &fakeScorer{}, Sinks: []sink.Sink{hs}}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, tc.kind, bundleOpts{maxReceives: 2})
			b.send(t, envelope("hang", mkDecision("h", "state", "q?")))
			cfg := tc.cfg(t, b)
			cfg.Queue = b.q
			// The heartbeat (every 2/3 s) would keep a 2 s visibility alive
			// for ever; the deadline of 300 ms ends it.
			cfg.Visibility, cfg.MessageTimeout, cfg.RetryBase = 2*time.Second, 300*time.Millisecond, worker.None
			w := start(t, cfg)
			eventually(t, 40*time.Second, func() bool { return b.dead(t) == 1 }, "the message held by a call that never returns was not released")
			require.Contains(t, metricsText(w), `verdict_worker_messages_released_total{reason="deadline"} `)
		})
	}
}

// Stop returns by its deadline even when a call never returns, and the
// message it held is released (visible again at once, not after its
// visibility timeout).
func TestStopBoundedWhenACallNeverReturns(t *testing.T) {
	t.Parallel()
	b := setup(t, "local", bundleOpts{})
	b.send(t, envelope("hang", mkDecision("h", "state", "q?")))
	hs := newHangingScorer(t)
	w, err := worker.New(worker.Config{Queue: b.q, Scorer: hs, Sinks: []sink.Sink{b.sink},
		Visibility: time.Hour, Wait: worker.None, Logger: quietLogger()})
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- w.Run(context.Background()) }()
	hs.events.wait(t, "scoring", 20*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	stopped := make(chan error, 1)
	go func() { stopped <- w.Stop(ctx) }()
	select {
	case err := <-stopped:
		require.ErrorIs(t, err, context.DeadlineExceeded)
	case <-time.After(30 * time.Second):
		t.Fatal("Stop did not return although its deadline passed")
	}
	require.NoError(t, <-done, "a requested stop is not an error")
	msgs, err := b.q.Receive(context.Background(), queue.ReceiveOptions{Max: 1})
	require.NoError(t, err)
	require.Len(t, msgs, 1, "the abandoned message was not released")
	require.Equal(t, 2, msgs[0].ReceiveCount)
}

// A closed queue (or an SQS queue deleted under the worker) ends Run with
// an error that says so, instead of a receive loop that fails and logs
// every second for ever.
func TestRunReturnsErrorWhenQueueGoes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		kind string
		want error
	}{{"local", queue.ErrClosed}, {"sqs", queue.ErrNoQueue}} {
		t.Run(tc.kind, func(t *testing.T) {
			t.Parallel()
			b := setup(t, tc.kind, bundleOpts{})
			w, err := worker.New(worker.Config{Queue: b.q, Scorer: &fakeScorer{}, Sinks: []sink.Sink{b.sink}, Wait: time.Second, Logger: quietLogger()})
			require.NoError(t, err)
			done := make(chan error, 1)
			go func() { done <- w.Run(context.Background()) }()
			if tc.kind == "local" {
				require.NoError(t, b.q.Close())
			} else {
				_, err := queuetest.SharedMoto(t).SQS().DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: &b.spec.QueueURL})
				require.NoError(t, err)
			}
			select {
			case err := <-done:
				require.ErrorIs(t, err, tc.want)
			case <-time.After(30 * time.Second):
				_ = w.Stop(context.Background())
				t.Fatal("Run went on receiving from a queue that is gone")
			}
			<-w.Closed()
		})
	}
}

// A decision that a closing engine left unscored is not published as an
// error result: its message is released for another worker (or the next
// start), and the worker stops, since every message would fail alike.
func TestClosedEngineReleasesAndStops(t *testing.T) {
	t.Parallel()
	b := setup(t, "local", bundleOpts{})
	b.send(t, envelope("closing", mkDecision("c", "state", "q?")))
	w, err := worker.New(worker.Config{Queue: b.q, Scorer: closingScorer{}, Sinks: []sink.Sink{b.sink},
		Visibility: time.Hour, RetryBase: time.Hour, Wait: time.Second, Logger: quietLogger()})
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- w.Run(context.Background()) }()
	select {
	case err := <-done:
		require.ErrorIs(t, err, engine.ErrClosed)
	case <-time.After(30 * time.Second):
		_ = w.Stop(context.Background())
		t.Fatal("the worker went on with a closed engine")
	}
	require.Empty(t, b.results(t), "a decision left unscored by a closing engine was published")
	msgs, err := b.q.Receive(context.Background(), queue.ReceiveOptions{Max: 1})
	require.NoError(t, err)
	require.Len(t, msgs, 1, "the message was not released at once")
	require.Contains(t, metricsText(w), `verdict_worker_messages_released_total{reason="shutdown"} 1`)
}

// Cancelling Run's context is a requested stop: with ShutdownTimeout None
// the message being scored is released at once with visibility 0, nothing
// is published, and Run returns nil.
func TestCancelledRunContextReleasesAtOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, "local", bundleOpts{})
	b.send(t, envelope("cancel", mkDecision("c", "state", "block?")))
	events := newEventLog()
	fs := &fakeScorer{StartedFunc: func([]string) { events.add("scoring") }} // blocks until its context ends
	w, err := worker.New(worker.Config{Queue: b.q, Scorer: fs, Sinks: []sink.Sink{b.sink},
		Visibility: time.Hour, ShutdownTimeout: worker.None, Wait: worker.None, Logger: quietLogger()})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	events.wait(t, "scoring", 20*time.Second)
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err, "a requested stop is not an error")
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after its context was cancelled")
	}
	<-w.Closed()
	require.Empty(t, b.results(t), "an unfinished message was published")
	msgs, err := b.q.Receive(context.Background(), queue.ReceiveOptions{Max: 1})
	require.NoError(t, err)
	require.Len(t, msgs, 1, "the unfinished message was not released at once")
	require.Equal(t, 2, msgs[0].ReceiveCount)
	require.Contains(t, metricsText(w), `verdict_worker_messages_released_total{reason="shutdown"} 1`)
}

// Stop without a deadline drains: once it has begun, the message being
// scored still finishes, is published and deleted, and Stop returns nil.
func TestStopDrainsInFlight(t *testing.T) {
	t.Parallel()
	b := setup(t, "local", bundleOpts{})
	b.send(t, envelope("drain", mkDecision("d", "state", "block?")))
	events := newEventLog()
	unblock := make(chan struct{})
	fs := &fakeScorer{Unblock: unblock, StartedFunc: func([]string) { events.add("scoring") }}
	w, err := worker.New(worker.Config{Queue: b.q, Scorer: fs, Sinks: []sink.Sink{b.sink},
		Visibility: time.Hour, Wait: worker.None, Logger: eventLogger(events)})
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- w.Run(context.Background()) }()
	events.wait(t, "scoring", 20*time.Second)
	stopped := make(chan error, 1)
	go func() { stopped <- w.Stop(context.Background()) }()
	events.wait(t, "worker stopping", 20*time.Second)
	select {
	case <-w.Closed():
		t.Fatal("the worker finished before the message being scored did")
	default:
	}
	close(unblock)
	select {
	case err := <-stopped:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("Stop did not return after the message finished")
	}
	require.NoError(t, <-done)
	require.Len(t, b.results(t)["drain/d"], 1, "the message in flight was not finished")
	require.Zero(t, b.depth(t), "the finished message was not deleted")
}
