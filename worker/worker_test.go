package worker_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/internal/queue"
	"github.com/verdict-dev/verdict/internal/sink"
	"github.com/verdict-dev/verdict/worker"
)

var kinds = []string{"local", "sqs"}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// start runs a worker in this process until the test ends.
func start(t *testing.T, cfg worker.Config) *worker.Worker {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = quietLogger()
	}
	if cfg.Wait == 0 {
		cfg.Wait = time.Second
	}
	w, err := worker.New(cfg)
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- w.Run(context.Background()) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = w.Stop(ctx)
		require.NoError(t, <-done)
	})
	return w
}

func decode(t *testing.T, body []byte) sink.Record {
	t.Helper()
	var r sink.Record
	require.NoError(t, json.Unmarshal(body, &r))
	return r
}

func TestEndToEnd(t *testing.T) {
	t.Parallel()
	for _, kind := range append(kinds, "sqs-fifo") {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			b := setup(t, kind, bundleOpts{})
			// A fresh worker receives one message (the oldest) and measures
			// it before it takes more.
			b.send(t, envelope("r0", mkDecision("w", "warm-up state", "q0?")))
			// r1 and r2 share a state: their three decisions are scored in one call.
			b.send(t,
				envelope("r1", mkDecision("a", "shared state", "q1?"), mkDecision("b", "shared state", "q2?")),
				envelope("r2", mkDecision("c", "shared state", "q3?")),
				envelope("r3", mkDecision("d", "other state", "q4?")),
				queue.Outgoing{Body: []byte("this is not json")},
				envelope("r5", decision.Decision{ID: "e", State: decision.TextState("s"), Question: "q?", Options: []decision.Option{{ID: "only"}}}),
			)
			fs := &fakeScorer{}
			w := start(t, worker.Config{Queue: b.q, Scorer: fs, Sinks: []sink.Sink{b.sink}})
			got := b.waitResults(t, 7, 30*time.Second)
			for _, key := range []string{"r0/w", "r1/a", "r1/b", "r2/c", "r3/d"} {
				require.Len(t, got[key], 1, key)
				rec := decode(t, got[key][0])
				require.Equal(t, decision.StatusDecided, rec.Status, key)
				require.Equal(t, "t1", rec.Tenant)
				require.Len(t, rec.Result.Probabilities, 2)
				require.Nil(t, rec.Result.Timing, "timing is not published by default")
				require.NotNil(t, rec.Result.Outcome)
			}
			// The invalid messages were answered with error results.
			var garbage sink.Record
			for k, v := range got {
				if strings.HasPrefix(k, "message:") {
					garbage = decode(t, v[0])
				}
			}
			require.Equal(t, decision.StatusError, garbage.Status)
			require.EqualValues(t, "invalid", garbage.Result.Error.Code)
			bad := decode(t, got["r5/e"][0])
			require.Equal(t, decision.StatusError, bad.Status)
			require.EqualValues(t, "invalid", bad.Result.Error.Code)
			require.NotEmpty(t, bad.Result.Error.Fields)
			require.Equal(t, "decisions[0].options", bad.Result.Error.Fields[0].Path)
			// Everything was deleted.
			eventually(t, 10*time.Second, func() bool { return b.inFlight(t) == 0 }, "messages still in flight")
			// The warm-up message came alone; then decisions sharing a state
			// across messages went in one call (when they arrived in one
			// receive, as they do here).
			require.Equal(t, 1, fs.callSizes()[0], "call sizes %v", fs.callSizes())
			require.Contains(t, fs.callSizes(), 3, "call sizes %v", fs.callSizes())
			// Metrics are served.
			rec := httptest.NewRecorder()
			w.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
			require.Contains(t, rec.Body.String(), `verdict_worker_decisions_total{status="decided"} 5`)
			require.Contains(t, rec.Body.String(), "verdict_worker_messages_invalid_total 2")
		})
	}
}

func TestPoisonMessageReachesDLQ(t *testing.T) {
	t.Parallel()
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			b := setup(t, kind, bundleOpts{maxReceives: 2})
			// "mate" shares the poison message's state, so the two are merged
			// into one engine call; the worker isolates them when it fails.
			b.send(t, envelope("bad", mkDecision("p", "s1", "poison?")), envelope("good", mkDecision("g", "s2", "fine?")),
				envelope("mate", mkDecision("m", "s1", "fine?")))
			fs := &fakeScorer{}
			events := newEventLog()
			w := start(t, worker.Config{Queue: b.q, Scorer: fs, Sinks: []sink.Sink{b.sink}, RetryBase: worker.None, Visibility: 5 * time.Second,
				Logger: eventLogger(events)})
			deadline := time.Now().Add(40 * time.Second)
			for b.dead(t) != 1 {
				if time.Now().After(deadline) {
					// Once seen in a loaded CI run: say where the message was.
					t.Fatalf("the poison message did not reach the DLQ: %d dead, %d in the queue (%d in flight); scored %d times; results %d; worker events %q; metrics:\n%s",
						b.dead(t), b.depth(t), b.inFlight(t), fs.callsOf("p"), len(b.results(t)), events.all(), workerMetric(t, w))
				}
				time.Sleep(100 * time.Millisecond)
			}
			got := b.waitResults(t, 2, 10*time.Second)
			require.Contains(t, got, "good/g")
			require.Contains(t, got, "mate/m", "a message merged with a poison message is still answered")
			require.NotContains(t, got, "bad/p", "a panicking decision must not be published as a result")
			require.Equal(t, 1, b.dead(t), "only the poison message is dead-lettered")
			require.LessOrEqual(t, fs.callsOf("p"), 4, "scored at most twice per receive (merged, then alone), maxReceiveCount 2")
		})
	}
}

// While a message is scored, the heartbeat extends its visibility, so that
// it is not delivered again after its first visibility timeout. The local
// queue's clock stands in for time: it is advanced only once the worker is
// scoring the message, and again only after an extension made since the
// previous advance is on record. (Extending is one ChangeVisibility call,
// which the queue conformance suite checks on SQS too.)
func TestHeartbeatKeepsSlowMessage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, "local", bundleOpts{clock: true})
	b.send(t, envelope("slow", mkDecision("s", "state", "block?")))
	unblock := make(chan struct{})
	events := newEventLog()
	fs := &fakeScorer{Unblock: unblock, StartedFunc: func(ids []string) { events.add("scoring " + strings.Join(ids, ",")) }}
	const vis = 30 * time.Second
	w := start(t, worker.Config{Queue: b.q, Scorer: fs, Sinks: []sink.Sink{b.sink},
		Visibility: vis, Heartbeat: 500 * time.Millisecond, MessageTimeout: time.Hour})
	events.wait(t, "scoring s", 20*time.Second)
	extensions := func() float64 { return metricValue(t, w, "verdict_worker_visibility_extensions_total") }
	for i := 0; i < 3; i++ {
		// From the second round on, the clock is past the visibility the
		// message was received with: only the extensions hide it.
		b.clock.Advance(vis/2 + time.Second)
		msgs, err := b.q.Receive(ctx, queue.ReceiveOptions{Max: 1})
		require.NoError(t, err)
		require.Empty(t, msgs, "round %d: delivered again while being scored", i)
		// The second extension from now was made after the advance: it
		// pushed the visibility to at least the clock's now + vis.
		n := extensions()
		eventually(t, 20*time.Second, func() bool { return extensions() >= n+2 }, "the heartbeat stopped extending")
	}
	close(unblock)
	got := b.waitResults(t, 1, 30*time.Second)
	require.Len(t, got["slow/s"], 1)
	eventually(t, 10*time.Second, func() bool { return b.depth(t) == 0 }, "message not deleted")
	require.NoError(t, w.Stop(ctx))
	require.Equal(t, 1, fs.callsOf("s"))
}

func TestBusyEngineReleasesWithBackoff(t *testing.T) {
	t.Parallel()
	b := setup(t, "local", bundleOpts{maxReceives: 10, clock: true})
	b.send(t, envelope("busy", mkDecision("x", "state", "busy?")))
	fs := &fakeScorer{}
	w := start(t, worker.Config{Queue: b.q, Scorer: fs, Sinks: []sink.Sink{b.sink}, RetryBase: time.Hour, RetryMax: time.Hour})
	eventually(t, 10*time.Second, func() bool {
		return strings.Contains(metricsText(w), `verdict_worker_messages_released_total{reason="retryable"} 1`)
	}, "not released")
	require.NoError(t, w.Stop(context.Background()))
	require.Equal(t, 1, fs.callsOf("x"))
	// Released with a one-hour delay on the queue's clock: not lost (still
	// in the queue, hidden), not hot-looped.
	require.Equal(t, 1, b.inFlight(t))
	b.clock.Advance(time.Hour - time.Second)
	msgs, err := b.q.Receive(context.Background(), queue.ReceiveOptions{Max: 1})
	require.NoError(t, err)
	require.Empty(t, msgs, "visible before its one-hour delay")
	b.clock.Advance(time.Second)
	msgs, err = b.q.Receive(context.Background(), queue.ReceiveOptions{Max: 1})
	require.NoError(t, err)
	require.Len(t, msgs, 1, "back after its delay")
	require.Equal(t, 2, msgs[0].ReceiveCount)
}

// SIGTERM while a message is being scored: the worker stops receiving, and
// the message, unfinished at the shutdown deadline (one signal) or at once
// (a second signal), is released with visibility 0 and nothing is
// published.
func TestSIGTERMReleasesUnfinished(t *testing.T) {
	t.Parallel()
	for _, kind := range kinds {
		for _, signals := range []int{1, 2} {
			name := kind + "/one-signal"
			if signals == 2 {
				name = kind + "/second-signal-releases-at-once"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				b := setup(t, kind, bundleOpts{})
				b.send(t, envelope("term", mkDecision("t", "state", "block?")))
				spec := b.spec
				spec.Visibility, spec.Concurrency = 60*time.Second, 1
				// A fifth of it, 1 s, is kept for the release.
				spec.Shutdown = 5 * time.Second
				if signals == 2 {
					spec.Shutdown = 5 * time.Minute // only the second signal can make it quick
				}
				h := startHelper(t, spec)
				h.events.wait(t, "scoring t", 20*time.Second)
				require.NoError(t, h.Process.Signal(syscall.SIGTERM))
				if signals == 2 {
					// Once the first signal is taken, the second cannot
					// merge with it.
					h.events.wait(t, "signal", 20*time.Second)
					require.NoError(t, h.Process.Signal(syscall.SIGTERM))
				}
				require.Equal(t, 0, h.waitExit(t, 60*time.Second))
				// Released with visibility 0: it is back long before its
				// 60 s visibility would have ended.
				msgs, err := b.q.Receive(context.Background(), queue.ReceiveOptions{Max: 1, Wait: 5 * time.Second})
				require.NoError(t, err)
				require.Len(t, msgs, 1, "the unfinished message was not released")
				require.Equal(t, 2, msgs[0].ReceiveCount)
				require.Empty(t, b.results(t), "nothing was finished, so nothing was published")
			})
		}
	}
}

// A worker killed with SIGKILL at the steps where a crash matters — after
// publishing and before deleting (the redelivery publishes the same records
// again), and while scoring — loses nothing: a worker started afterwards
// answers every decision, and the duplicates are identical.
func TestCrashSafetyKill9(t *testing.T) {
	t.Parallel()
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			b := setup(t, kind, bundleOpts{maxReceives: 50})
			const nMsgs = 12
			var msgs []queue.Outgoing
			for i := 0; i < nMsgs; i++ {
				state := "state " + string(rune('A'+i%4))
				msgs = append(msgs, envelope("req"+string(rune('a'+i)),
					mkDecision("d1", state, "first?"), mkDecision("d2", state, "second?")))
			}
			b.send(t, msgs...)
			spec := b.spec
			spec.Visibility, spec.Shutdown = 2*time.Second, 10*time.Second
			spec.Concurrency, spec.MaxMessages = 1, 3
			for _, at := range []struct{ block, event string }{{"delete", "deleting"}, {"score", "scoring"}, {"delete", "deleting"}} {
				spec.BlockAt = at.block
				h := startHelper(t, spec)
				h.events.wait(t, at.event, 30*time.Second)
				require.NoError(t, h.Process.Signal(syscall.SIGKILL))
				_ = h.waitExit(t, 10*time.Second)
			}
			spec.BlockAt = ""
			h := startHelper(t, spec)
			b.waitResults(t, 2*nMsgs, 90*time.Second)
			// Every message deleted: redeliveries of messages whose delete
			// the kills interrupted have been processed again.
			eventually(t, 60*time.Second, func() bool { return b.depth(t) == 0 }, "messages left in the queue")
			require.NoError(t, h.Process.Signal(syscall.SIGTERM))
			require.Equal(t, 0, h.waitExit(t, 30*time.Second))
			got := b.results(t)
			require.Len(t, got, 2*nMsgs)
			dups := 0
			for key, copies := range got {
				for _, c := range copies[1:] {
					require.Equal(t, string(copies[0]), string(c), "duplicate of %s differs", key)
					dups++
				}
				rec := decode(t, copies[0])
				require.Equal(t, decision.StatusDecided, rec.Status)
			}
			t.Logf("%s: %d records, %d identical duplicates after 3 kill -9s", kind, len(got), dups)
		})
	}
}

func TestWebhookReplyTargets(t *testing.T) {
	t.Parallel()
	secret := []byte("s3cret")
	bodies := make(chan []byte, 10)
	srv := httptest.NewServer(nil)
	srv.Config.Handler = webhookReceiver(t, secret, bodies)
	defer srv.Close()
	wh, err := sink.NewWebhook(sink.WebhookConfig{Secret: secret, AllowPrivate: true})
	require.NoError(t, err)
	defer wh.Close()
	b := setup(t, "local", bundleOpts{})
	out := envelope("hook", mkDecision("h", "state", "q?"))
	env, err := queue.UnmarshalEnvelope(out.Body)
	require.NoError(t, err)
	env.Reply = []queue.ReplyTarget{{Kind: "webhook", URL: srv.URL + "/cb"}}
	out.Body, err = env.Marshal()
	require.NoError(t, err)
	b.send(t, out)
	start(t, worker.Config{Queue: b.q, Scorer: &fakeScorer{}, Sinks: []sink.Sink{b.sink}, Webhook: wh})
	select {
	case body := <-bodies:
		rec := decode(t, body)
		require.Equal(t, "hook/h", rec.Key())
	case <-time.After(20 * time.Second):
		t.Fatal("webhook not called")
	}
}

func TestConfigErrors(t *testing.T) {
	t.Parallel()
	b := setup(t, "local", bundleOpts{})
	base := worker.Config{Queue: b.q, Scorer: &fakeScorer{}, Sinks: []sink.Sink{b.sink}}
	cases := []struct {
		field  string // "" when the config is valid
		mutate func(c *worker.Config)
	}{
		{"Config.Queue", func(c *worker.Config) { c.Queue = nil }},
		{"Config.Scorer", func(c *worker.Config) { c.Scorer = nil }},
		{"Config.Sinks", func(c *worker.Config) { c.Sinks = nil }},
		{"Config.Sinks[0]", func(c *worker.Config) { c.Sinks = []sink.Sink{nil} }},
		{"Config.MaxMessages", func(c *worker.Config) { c.MaxMessages = 11 }},
		{"Config.MaxMessages", func(c *worker.Config) { c.MaxMessages = -1 }},
		{"Config.Visibility", func(c *worker.Config) { c.Visibility = time.Millisecond }},
		{"Config.Visibility", func(c *worker.Config) { c.Visibility = 13 * time.Hour }},
		{"Config.Concurrency", func(c *worker.Config) { c.Concurrency = -1 }},
		{"Config.Wait", func(c *worker.Config) { c.Wait = time.Minute }},
		{"Config.Wait", func(c *worker.Config) { c.Wait = -time.Second }},
		{"Config.ShutdownTimeout", func(c *worker.Config) { c.ShutdownTimeout = -2 }},
		{"Config.RetryBase", func(c *worker.Config) { c.RetryBase = -time.Second }},
		{"Config.RetryMax", func(c *worker.Config) { c.RetryMax = -time.Minute }},
		{"Config.RetryMax", func(c *worker.Config) { c.RetryMax = 24 * time.Hour }},
		{"Config.MessageTimeout", func(c *worker.Config) { c.MessageTimeout = -time.Second }},
		{"Config.Heartbeat", func(c *worker.Config) { c.Heartbeat = -time.Second }},
		{"Config.Heartbeat", func(c *worker.Config) { c.Visibility, c.Heartbeat = 10*time.Second, 10*time.Second }},
		// Zero means the default, None means no time; both are valid.
		{"", func(c *worker.Config) {}},
		{"", func(c *worker.Config) {
			c.Wait, c.ShutdownTimeout, c.RetryBase, c.RetryMax = worker.None, worker.None, worker.None, worker.None
		}},
		{"", func(c *worker.Config) { c.Visibility, c.MessageTimeout = time.Second, 12*time.Hour }},
	}
	for _, tc := range cases {
		c := base
		tc.mutate(&c)
		_, err := worker.New(c)
		if tc.field == "" {
			require.NoError(t, err)
			continue
		}
		require.ErrorIs(t, err, worker.ErrConfig, tc.field)
		require.ErrorContains(t, err, tc.field+":")
		var fe *worker.FieldError
		require.ErrorAs(t, err, &fe)
	}
}

// recordingQueue records the options of every Receive on its way to a
// real queue.
type recordingQueue struct {
	queue.Queue
	mu   sync.Mutex
	opts []queue.ReceiveOptions
}

func (q *recordingQueue) Receive(ctx context.Context, o queue.ReceiveOptions) ([]queue.Message, error) {
	q.mu.Lock()
	q.opts = append(q.opts, o)
	q.mu.Unlock()
	return q.Queue.Receive(ctx, o)
}

func (q *recordingQueue) received() []queue.ReceiveOptions {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]queue.ReceiveOptions(nil), q.opts...)
}

// Wait None long-polls not at all; Wait 0 is the default 20 s.
func TestConfigNoneMeansZero(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		wait, want time.Duration
	}{{worker.None, 0}, {0, worker.DefaultWait}, {3 * time.Second, 3 * time.Second}} {
		b := setup(t, "local", bundleOpts{})
		rq := &recordingQueue{Queue: b.q}
		w, err := worker.New(worker.Config{Queue: rq, Scorer: &fakeScorer{}, Sinks: []sink.Sink{b.sink}, Wait: tc.wait, Logger: quietLogger()})
		require.NoError(t, err)
		done := make(chan error, 1)
		go func() { done <- w.Run(context.Background()) }()
		eventually(t, 10*time.Second, func() bool { return len(rq.received()) > 0 }, "no receive")
		require.NoError(t, w.Stop(context.Background()))
		require.NoError(t, <-done)
		require.Equal(t, tc.want, rq.received()[0].Wait, "Config.Wait %v", tc.wait)
	}
}

func TestLogsNeverContainState(t *testing.T) {
	t.Parallel()
	for _, logState := range []bool{false, true} {
		b := setup(t, "local", bundleOpts{})
		const secret = "SECRET-STATE-TEXT"
		b.send(t, envelope("log", mkDecision("l", secret, "q?")), queue.Outgoing{Body: []byte(`{"v":1,"request_id":"x","decisions":[{"state":"` + secret + `","question":""}]}`)})
		var buf syncBuffer
		logger := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
		w, err := worker.New(worker.Config{Queue: b.q, Scorer: &fakeScorer{}, Sinks: []sink.Sink{b.sink}, Logger: logger, LogState: logState, Wait: time.Second})
		require.NoError(t, err)
		done := make(chan error, 1)
		go func() { done <- w.Run(context.Background()) }()
		b.waitResults(t, 2, 20*time.Second)
		require.NoError(t, w.Stop(context.Background()))
		require.NoError(t, <-done)
		if logState {
			require.Contains(t, buf.String(), secret, "debug logs with LogState show the state")
		} else {
			require.NotContains(t, buf.String(), secret)
			require.Contains(t, buf.String(), "invalid message", "the logs were captured")
		}
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
