package worker_test

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/engine"
	"github.com/verdict-dev/verdict/internal/queue"
	"github.com/verdict-dev/verdict/internal/queue/queuetest"
	"github.com/verdict-dev/verdict/internal/results"
	"github.com/verdict-dev/verdict/internal/sink"
	"github.com/verdict-dev/verdict/router"
	"github.com/verdict-dev/verdict/worker"
)

func TestMain(m *testing.M) {
	if spec := os.Getenv(helperEnv); spec != "" {
		helperMain(spec)
		return
	}
	os.Exit(queuetest.Main(m))
}

// fakeScorer stands in for the engine in tests of queue semantics (the
// real engine needs a model; see e2e_llamacpp_test.go). Its scores are a
// deterministic function of the decision. Questions steer it: "poison"
// panics, "crash" ends the process (only for the worker subprocess of
// helper_test.go: it would end the test binary), "block" waits until
// Unblock is closed or the call's context ends, "busy" answers
// engine.ErrBusy.
type fakeScorer struct {
	// StartedFunc, when set, is called with the decision ids of each call
	// as it starts: the test's event "the worker is scoring these".
	StartedFunc func(ids []string)
	// Unblock releases the "block" decisions; nil: only their call's
	// context ending does.
	Unblock <-chan struct{}
	// BlockAll makes every decision a "block" one.
	BlockAll bool

	mu    sync.Mutex
	calls map[string]int // decision id → times scored
	sizes []int          // decisions per Score call
	order [][]string     // decision ids of each Score call, in call order
}

func (f *fakeScorer) Score(ctx context.Context, ds []decision.Decision) ([]decision.Result, error) {
	ids := make([]string, len(ds))
	for i := range ds {
		ids[i] = ds[i].ID
	}
	f.mu.Lock()
	if f.calls == nil {
		f.calls = map[string]int{}
	}
	for _, d := range ds {
		f.calls[d.ID]++
	}
	f.sizes = append(f.sizes, len(ds))
	f.order = append(f.order, ids)
	f.mu.Unlock()
	if f.StartedFunc != nil {
		f.StartedFunc(ids)
	}
	out := make([]decision.Result, len(ds))
	for i := range ds {
		d := &ds[i]
		switch {
		case strings.Contains(d.Question, "poison"):
			panic("fake scorer: poison decision " + d.ID)
		case strings.Contains(d.Question, "crash"):
			fmt.Fprintln(os.Stderr, "fake scorer: crashing on decision", d.ID)
			os.Exit(3)
		case strings.Contains(d.Question, "busy"):
			return nil, engine.ErrBusy
		case f.BlockAll || strings.Contains(d.Question, "block"):
			select {
			case <-f.Unblock:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		logits := make([]float64, len(d.Options))
		for k, o := range d.Options {
			h := sha256.Sum256([]byte(string(d.State.Canonical()) + "\x00" + d.Question + "\x00" + o.ID))
			logits[k] = float64(binary.BigEndian.Uint16(h[:2])) / 4096
		}
		engine.Readout(&out[i], d, logits, 1)
		out[i].Readout = "fake"
		out[i].Timing = &decision.Timing{Total: float64(time.Now().UnixNano() % 1000)} // differs per run
	}
	return out, nil
}

func (f *fakeScorer) callsOf(id string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[id]
}

func (f *fakeScorer) callOrder() [][]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([][]string(nil), f.order...)
}

func (f *fakeScorer) callSizes() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]int(nil), f.sizes...)
}

// zeroScorer costs nothing: for benchmarks.
type zeroScorer struct{}

func (zeroScorer) Score(_ context.Context, ds []decision.Decision) ([]decision.Result, error) {
	out := make([]decision.Result, len(ds))
	for i := range ds {
		logits := make([]float64, len(ds[i].Options))
		logits[0] = 1
		engine.Readout(&out[i], &ds[i], logits, 1)
	}
	return out, nil
}

func mkDecision(id, state, question string) decision.Decision {
	return decision.Decision{ID: id, State: decision.TextState(state), Question: question,
		Options: []decision.Option{{ID: "yes", Description: "Yes."}, {ID: "no", Description: "No."}}}
}

func envelope(reqID string, ds ...decision.Decision) queue.Outgoing {
	env := queue.Envelope{RequestID: reqID, Tenant: "t1", SubmittedAt: time.Unix(1700000000, 0).UTC(),
		Route: decision.RouteCPU, GroupKey: router.GroupKey(ds[0].State), Format: queue.FormatSemIf, Decisions: ds}
	b, err := env.Marshal()
	if err != nil {
		panic(err)
	}
	return queue.Outgoing{Body: b, GroupID: env.GroupKey, DedupID: reqID}
}

// bundle is one test's queue and results, local or SQS.
type bundle struct {
	kind     string
	q        queue.Queue
	sink     sink.Sink
	results  func(t testing.TB) map[string][][]byte // key → every published copy
	dead     func(t testing.TB) int
	inFlight func(t testing.TB) int
	depth    func(t testing.TB) int // visible + in flight
	spec     helperSpec             // how a subprocess reaches the same queue and results
	clock    *queuetest.Clock       // the local queue's clock, with bundleOpts.clock
}

type bundleOpts struct {
	maxReceives int
	visibility  time.Duration
	// clock gives the local queue a queuetest.Clock (not for tests that
	// share the queue with a subprocess: it keeps the real time).
	clock bool
}

func setup(t testing.TB, kind string, o bundleOpts) *bundle {
	t.Helper()
	ctx := context.Background()
	if o.maxReceives == 0 {
		o.maxReceives = 5
	}
	b := &bundle{kind: kind}
	switch kind {
	case "local":
		dir := t.TempDir()
		lc := queue.LocalConfig{Path: filepath.Join(dir, "queue.db"), MaxReceives: o.maxReceives, PollInterval: 20 * time.Millisecond}
		if o.clock {
			b.clock = queuetest.NewClock()
			lc.NowFunc = b.clock.Now
		}
		lq, err := queue.OpenLocal(lc)
		require.NoError(t, err)
		st, err := results.OpenFile(filepath.Join(dir, "results.db"))
		require.NoError(t, err)
		t.Cleanup(func() { lq.Close(); st.Close() })
		b.q, b.sink = lq, st
		b.spec = helperSpec{Kind: "local", QueuePath: filepath.Join(dir, "queue.db"), StorePath: filepath.Join(dir, "results.db"), MaxReceives: o.maxReceives}
		b.results = func(t testing.TB) map[string][][]byte {
			rows, err := st.All(ctx)
			require.NoError(t, err)
			out := map[string][][]byte{}
			for _, r := range rows {
				out[r.Record.Key()] = append(out[r.Record.Key()], r.Body)
			}
			return out
		}
		b.dead = func(t testing.TB) int {
			s, err := lq.Stats(ctx)
			require.NoError(t, err)
			return s.Dead
		}
		b.inFlight = func(t testing.TB) int {
			s, err := lq.Stats(ctx)
			require.NoError(t, err)
			return s.InFlight
		}
		b.depth = func(t testing.TB) int {
			s, err := lq.Stats(ctx)
			require.NoError(t, err)
			return s.Visible + s.InFlight
		}
	case "sqs", "sqs-fifo":
		moto := queuetest.SharedMoto(t)
		fifo := kind == "sqs-fifo"
		tq, err := moto.CreateQueue(ctx, "work", queuetest.QueueOptions{MaxReceives: o.maxReceives, FIFO: fifo})
		require.NoError(t, err)
		rq, err := moto.CreateQueue(ctx, "results", queuetest.QueueOptions{FIFO: fifo})
		require.NoError(t, err)
		ac := moto.AWS()
		sq, err := queue.NewSQS(ctx, queue.SQSConfig{URL: tq.URL, Endpoint: moto.Endpoint, AWS: &ac})
		require.NoError(t, err)
		rs, err := queue.NewSQS(ctx, queue.SQSConfig{URL: rq.URL, Endpoint: moto.Endpoint, AWS: &ac})
		require.NoError(t, err)
		snk, err := sink.NewSQS(moto.SQS(), rq.URL)
		require.NoError(t, err)
		b.q, b.sink = sq, snk
		b.spec = helperSpec{Kind: "sqs", QueueURL: tq.URL, ResultsURL: rq.URL, Endpoint: moto.Endpoint}
		var mu sync.Mutex
		seen := map[string][][]byte{}
		b.results = func(t testing.TB) map[string][][]byte {
			mu.Lock()
			defer mu.Unlock()
			msgs, err := queuetest.Drain(ctx, rs, 0)
			require.NoError(t, err)
			for _, m := range msgs {
				var rec sink.Record
				require.NoError(t, json.Unmarshal(m.Body, &rec))
				require.Equal(t, rec.RequestID, m.Attributes["request_id"])
				require.Equal(t, rec.DecisionID, m.Attributes["decision_id"])
				require.Equal(t, string(rec.Status), m.Attributes["status"])
				seen[rec.Key()] = append(seen[rec.Key()], m.Body)
			}
			out := map[string][][]byte{}
			for k, v := range seen {
				out[k] = v
			}
			return out
		}
		b.dead = func(t testing.TB) int {
			v, f, err := moto.Count(ctx, tq.DLQURL)
			require.NoError(t, err)
			return v + f
		}
		b.inFlight = func(t testing.TB) int {
			_, f, err := moto.Count(ctx, tq.URL)
			require.NoError(t, err)
			return f
		}
		b.depth = func(t testing.TB) int {
			v, f, err := moto.Count(ctx, tq.URL)
			require.NoError(t, err)
			return v + f
		}
	default:
		t.Fatalf("unknown kind %q", kind)
	}
	return b
}

func (b *bundle) send(t testing.TB, msgs ...queue.Outgoing) {
	t.Helper()
	for start := 0; start < len(msgs); start += 10 {
		errs, err := b.q.Send(context.Background(), msgs[start:min(start+10, len(msgs))])
		require.NoError(t, err)
		for _, e := range errs {
			require.NoError(t, e)
		}
	}
}

// waitResults polls until at least n distinct keys are published.
func (b *bundle) waitResults(t testing.TB, n int, within time.Duration) map[string][][]byte {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		got := b.results(t)
		if len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d results published within %v", len(got), n, within)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func eventually(t testing.TB, within time.Duration, cond func() bool, msg string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal(msg)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// eventLog collects, in order, what a test's fakes, its worker's logs
// (eventLogger) or its worker subprocesses (helper) report, so that a test
// waits for an event instead of sleeping.
type eventLog struct {
	mu     sync.Mutex
	events []string
	next   int           // the first event no wait has passed yet
	added  chan struct{} // closed and replaced by every add
}

func newEventLog() *eventLog { return &eventLog{added: make(chan struct{})} }

// all returns every event so far, in order.
func (l *eventLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.events...)
}

// workerMetric returns the worker's metrics text.
func workerMetric(t testing.TB, w *worker.Worker) string {
	t.Helper()
	rr := httptest.NewRecorder()
	w.Handler().ServeHTTP(rr, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	return rr.Body.String()
}

func (l *eventLog) add(event string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, event)
	close(l.added)
	l.added = make(chan struct{})
}

// wait waits for an event that starts with prefix, later than the one the
// previous wait returned, and returns it. within only guards against a
// hang.
func (l *eventLog) wait(t testing.TB, prefix string, within time.Duration) string {
	t.Helper()
	timeout := time.After(within)
	for {
		l.mu.Lock()
		for ; l.next < len(l.events); l.next++ {
			if e := l.events[l.next]; strings.HasPrefix(e, prefix) {
				l.next++
				l.mu.Unlock()
				return e
			}
		}
		added := l.added
		l.mu.Unlock()
		select {
		case <-added:
		case <-timeout:
			t.Fatalf("no event %q within %v", prefix, within)
		}
	}
}

// eventLogger is a logger that adds the message of every record it gets
// to l: the worker's own account of the steps it reaches ("worker
// stopping: stop requested", "message released", …).
func eventLogger(l *eventLog) *slog.Logger { return slog.New(eventHandler{l}) }

type eventHandler struct{ l *eventLog }

func (h eventHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h eventHandler) Handle(_ context.Context, r slog.Record) error {
	h.l.add(r.Message)
	return nil
}
func (h eventHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h eventHandler) WithGroup(string) slog.Handler      { return h }
