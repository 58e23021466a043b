package worker_test

import (
	"context"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/engine"
	"github.com/verdict-dev/verdict/internal/queue"
	"github.com/verdict-dev/verdict/internal/queue/queuetest"
	"github.com/verdict-dev/verdict/internal/sink"
	"github.com/verdict-dev/verdict/policy"
	"github.com/verdict-dev/verdict/worker"
)

// tableScorer answers each question with the probabilities its table
// gives (a question it does not know fails that decision), as the model
// it names: a stand-in for one pool's model in the cascade tests.
type tableScorer struct {
	model string
	probs map[string][]float64

	mu     sync.Mutex
	scored map[string]int // decision id → times scored
}

func (s *tableScorer) Score(_ context.Context, ds []decision.Decision) ([]decision.Result, error) {
	out := make([]decision.Result, len(ds))
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.scored == nil {
		s.scored = map[string]int{}
	}
	for i := range ds {
		d := &ds[i]
		s.scored[d.ID]++
		p, ok := s.probs[d.Question]
		if !ok {
			out[i] = decision.Result{ID: d.ID, Kind: d.Kind, OptionIDs: d.OptionIDs(),
				Error: &decision.Error{Code: decision.CodeTooLarge, Message: "the options do not fit in this model's context"}}
			continue
		}
		logits := make([]float64, len(p))
		for k := range p {
			logits[k] = math.Log(p[k])
		}
		engine.Readout(&out[i], d, logits, 1)
		out[i].Model = &decision.ModelIdentity{File: s.model + ".gguf", Name: s.model, SHA256: s.model + "-sha256"}
	}
	return out, nil
}

func (s *tableScorer) times(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.scored[id]
}

// cascadeTestPolicy: "prob" decisions escalate under p_max 0.8, "margin"
// ones under a margin of 0.2; a rule settles "canned?" without the model.
const cascadeTestPolicy = `
kinds:
  prob:
    match: [{id: '^p'}]
    escalate: {below: 0.8, to: gpu}
    fallback: review
    on_error: abstain
    rules: [{name: canned, when: 'question == "canned?"', option: "no"}]
  margin:
    match: [{id: '^m'}]
    escalate: {margin_below: 0.2, to: gpu}
    fallback: abstain
`

// cascade is a cpu pool and a gpu pool on one local queue file, with a
// worker each and one results store.
type cascade struct {
	cpu, gpu *queue.Local
	b        *bundle
}

func newCascade(t *testing.T) *cascade {
	t.Helper()
	b := setup(t, "local", bundleOpts{})
	gq, err := queue.OpenLocal(queue.LocalConfig{Path: b.spec.QueuePath, Name: "gpu", PollInterval: 20 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() { gq.Close() })
	return &cascade{cpu: b.q.(*queue.Local), gpu: gq, b: b}
}

func cascadePolicyHolder(t *testing.T) *policy.Holder {
	t.Helper()
	p, err := policy.Parse([]byte(cascadeTestPolicy))
	require.NoError(t, err)
	return policy.HolderOf(p)
}

// TestCascade: decisions the small model is unsure of, by probability or
// by margin, go on to the gpu pool and are published once, from there,
// with both stages; sure ones and rule-settled ones are published by the
// cpu pool; keys stay those of the first message.
func TestCascade(t *testing.T) {
	t.Parallel()
	c := newCascade(t)
	small := &tableScorer{model: "small", probs: map[string][]float64{
		"sure?":    {0.95, 0.05},
		"unsure?":  {0.6, 0.4},
		"hard?":    {0.55, 0.45},
		"close?":   {0.5, 0.45, 0.05},
		"clear?":   {0.5, 0.2, 0.3},
		"too big?": {0.5, 0.5},
		"canned?":  {0.5, 0.5},
	}}
	big := &tableScorer{model: "big", probs: map[string][]float64{
		"unsure?": {0.1, 0.9},
		"hard?":   {0.6, 0.4},
		"close?":  {0.1, 0.8, 0.1},
	}}
	three := func(id, q string) decision.Decision {
		d := mkDecision(id, "a shared ticket", q)
		d.Options = append(d.Options, decision.Option{ID: "maybe", Description: "Maybe."})
		return d
	}
	noID := mkDecision("", "a shared ticket", "unsure?")
	noID.Kind = "prob"
	c.b.send(t, envelope("r1",
		mkDecision("p-sure", "a shared ticket", "sure?"),
		mkDecision("p-unsure", "a shared ticket", "unsure?"),
		mkDecision("p-hard", "a shared ticket", "hard?"),
		three("m-close", "close?"),
		three("m-clear", "clear?"),
		mkDecision("p-canned", "a shared ticket", "canned?"),
		mkDecision("p-too-big", "a shared ticket", "too big?"),
		noID,
	))
	h := cascadePolicyHolder(t)
	start(t, worker.Config{Queue: c.cpu, Scorer: small, Sinks: []sink.Sink{c.b.sink}, Policy: h,
		Pool: decision.RouteCPU, Escalate: map[decision.Route]queue.Sender{decision.RouteGPU: c.gpu}})
	start(t, worker.Config{Queue: c.gpu, Scorer: big, Sinks: []sink.Sink{c.b.sink}, Policy: h,
		Pool: decision.RouteGPU, Escalate: map[decision.Route]queue.Sender{decision.RouteCPU: c.cpu}})
	got := c.b.waitResults(t, 8, 30*time.Second)
	require.Len(t, got, 8)
	for k, copies := range got {
		require.Len(t, copies, 1, "%s published once", k)
	}

	rec := decode(t, got["r1/p-sure"][0])
	require.Equal(t, decision.StatusDecided, rec.Status)
	require.Empty(t, rec.Result.Cascade, "decided on the first stage: no cascade")
	require.Equal(t, "small", rec.Result.Model.Name)
	rec = decode(t, got["r1/m-clear"][0])
	require.Equal(t, decision.StatusDecided, rec.Status, "margin 0.2 is not below 0.2")
	require.Empty(t, rec.Result.Cascade)
	rec = decode(t, got["r1/p-canned"][0])
	require.Equal(t, decision.StatusRule, rec.Status, "rules never escalate")
	require.Zero(t, big.times("p-canned"))

	// Escalated by probability: the big model decides.
	rec = decode(t, got["r1/p-unsure"][0])
	require.Equal(t, decision.StatusDecided, rec.Status)
	require.Equal(t, "no", rec.Result.Chosen)
	require.Equal(t, "big", rec.Result.Model.Name)
	require.InDeltaSlice(t, []float64{0.1, 0.9}, rec.Result.Probabilities, 1e-9)
	require.Len(t, rec.Result.Cascade, 2)
	s0, s1 := rec.Result.Cascade[0], rec.Result.Cascade[1]
	require.Equal(t, decision.RouteCPU, s0.Pool)
	require.Equal(t, "small-sha256", s0.Model.SHA256)
	require.InDeltaSlice(t, []float64{0.6, 0.4}, s0.Probabilities, 1e-9)
	require.Equal(t, "yes", s0.Chosen, "the first stage's top option, though its outcome named none")
	require.Equal(t, decision.StatusEscalate, s0.Status)
	require.Contains(t, s0.Reason, "p_max 0.6 below 0.8; escalating to gpu")
	require.False(t, s0.Decided)
	require.Nil(t, s0.Timing, "timing is not published by default")
	require.Equal(t, decision.RouteGPU, s1.Pool)
	require.Equal(t, "big", s1.Model.Name)
	require.Equal(t, "no", s1.Chosen)
	require.Equal(t, decision.StatusDecided, s1.Status)
	require.True(t, s1.Decided)

	// Escalated by margin.
	rec = decode(t, got["r1/m-close"][0])
	require.Equal(t, decision.StatusDecided, rec.Status)
	require.Equal(t, "no", rec.Result.Chosen)
	require.Len(t, rec.Result.Cascade, 2)
	require.Contains(t, rec.Result.Cascade[0].Reason, "margin 0.05 below 0.2")

	// Unsure on the gpu pool too: that is the pool the clause names, so
	// the big model's answer stands (this kind has no thresholds).
	rec = decode(t, got["r1/p-hard"][0])
	require.Equal(t, decision.StatusDecided, rec.Status)
	require.Equal(t, "yes", rec.Result.Chosen)
	require.Len(t, rec.Result.Cascade, 2)
	require.True(t, rec.Result.Cascade[1].Decided)
	require.Equal(t, decision.StatusDecided, rec.Result.Cascade[1].Status)

	// The second stage cannot score it: an error record keeping the first
	// stage, settled by on_error.
	rec = decode(t, got["r1/p-too-big"][0])
	require.Equal(t, decision.StatusAbstained, rec.Status)
	require.Equal(t, decision.CodeTooLarge, rec.Result.Error.Code)
	require.Len(t, rec.Result.Cascade, 2)
	require.Equal(t, decision.RouteCPU, rec.Result.Cascade[0].Pool)
	require.InDeltaSlice(t, []float64{0.5, 0.5}, rec.Result.Cascade[0].Probabilities, 1e-9)
	require.Equal(t, decision.CodeTooLarge, rec.Result.Cascade[1].Error.Code)
	require.Equal(t, decision.StatusAbstained, rec.Result.Cascade[1].Status)

	// A decision without an id keeps its position as its key.
	rec = decode(t, got["r1/7"][0])
	require.Len(t, rec.Result.Cascade, 2)
	require.Equal(t, "big", rec.Result.Model.Name)

	for _, id := range []string{"p-unsure", "p-hard", "m-close", "p-too-big"} {
		require.Equal(t, 1, small.times(id), id)
		require.Equal(t, 1, big.times(id), id)
	}
	require.Zero(t, big.times("p-sure"))
	eventually(t, 10*time.Second, func() bool { return c.b.depth(t) == 0 }, "the cpu queue emptied")
}

// flakySender refuses every send while down is set.
type flakySender struct {
	q     queue.Sender
	down  atomic.Bool
	tries atomic.Int32
}

func (f *flakySender) Send(ctx context.Context, msgs []queue.Outgoing) ([]error, error) {
	f.tries.Add(1)
	if f.down.Load() {
		return nil, errors.New("escalation queue: service unavailable")
	}
	return f.q.Send(ctx, msgs)
}

// TestCascadeTargetDown: while the gpu pool's queue refuses, nothing of
// the message is published (not even its sure decision) and the message
// is released and retried; once the queue takes it, each decision is
// published once.
func TestCascadeTargetDown(t *testing.T) {
	t.Parallel()
	c := newCascade(t)
	small := &tableScorer{model: "small", probs: map[string][]float64{"sure?": {0.95, 0.05}, "unsure?": {0.6, 0.4}}}
	big := &tableScorer{model: "big", probs: map[string][]float64{"unsure?": {0.2, 0.8}}}
	gpu := &flakySender{q: c.gpu}
	gpu.down.Store(true)
	c.b.send(t, envelope("r1", mkDecision("p-sure", "s", "sure?"), mkDecision("p-unsure", "s", "unsure?")))
	h := cascadePolicyHolder(t)
	start(t, worker.Config{Queue: c.cpu, Scorer: small, Sinks: []sink.Sink{c.b.sink}, Policy: h, RetryBase: 50 * time.Millisecond,
		Pool: decision.RouteCPU, Escalate: map[decision.Route]queue.Sender{decision.RouteGPU: gpu}})
	eventually(t, 20*time.Second, func() bool { return gpu.tries.Load() >= 2 }, "the escalation was retried")
	require.Empty(t, c.b.results(t), "nothing is published while the escalation fails")
	gpu.down.Store(false)
	start(t, worker.Config{Queue: c.gpu, Scorer: big, Sinks: []sink.Sink{c.b.sink}, Policy: h, Pool: decision.RouteGPU})
	got := c.b.waitResults(t, 2, 30*time.Second)
	require.Len(t, got["r1/p-sure"], 1)
	require.Len(t, got["r1/p-unsure"], 1)
	require.Equal(t, "big", decode(t, got["r1/p-unsure"][0]).Result.Model.Name)
	eventually(t, 10*time.Second, func() bool { return c.b.depth(t) == 0 }, "the cpu queue emptied")
}

// TestCascadeWithoutATarget: a worker with no queue for the pool a kind
// escalates to applies the fallback.
func TestCascadeWithoutATarget(t *testing.T) {
	t.Parallel()
	c := newCascade(t)
	small := &tableScorer{model: "small", probs: map[string][]float64{"unsure?": {0.6, 0.4}}}
	c.b.send(t, envelope("r1", mkDecision("p-unsure", "s", "unsure?")))
	start(t, worker.Config{Queue: c.cpu, Scorer: small, Sinks: []sink.Sink{c.b.sink}, Policy: cascadePolicyHolder(t), Pool: decision.RouteCPU})
	rec := decode(t, c.b.waitResults(t, 1, 30*time.Second)["r1/p-unsure"][0])
	require.Equal(t, decision.StatusReview, rec.Status)
	require.Contains(t, rec.Result.Outcome.Reason, "no queue for it")
	require.Empty(t, rec.Result.Cascade)
}

func TestCascadeConfig(t *testing.T) {
	t.Parallel()
	c := newCascade(t)
	base := worker.Config{Queue: c.cpu, Scorer: &tableScorer{}, Sinks: []sink.Sink{c.b.sink}}
	for _, tc := range []struct {
		name string
		edit func(*worker.Config)
		want string
	}{
		{"bad pool", func(c *worker.Config) { c.Pool = "tpu" }, `Config.Pool: must be "cpu", "gpu" or empty, got "tpu"`},
		{"own pool", func(cf *worker.Config) {
			cf.Pool = decision.RouteCPU
			cf.Escalate = map[decision.Route]queue.Sender{decision.RouteCPU: c.gpu}
		}, `Config.Escalate["cpu"]: is the worker's own pool`},
		{"unknown target", func(cf *worker.Config) { cf.Escalate = map[decision.Route]queue.Sender{"tpu": c.gpu} }, `Config.Escalate["tpu"]: is not a pool`},
		{"nil target", func(cf *worker.Config) { cf.Escalate = map[decision.Route]queue.Sender{decision.RouteGPU: nil} }, `Config.Escalate["gpu"]: is nil`},
	} {
		cfg := base
		tc.edit(&cfg)
		_, err := worker.New(cfg)
		require.ErrorIs(t, err, worker.ErrConfig, tc.name)
		require.ErrorContains(t, err, tc.want, tc.name)
	}
}

// TestCascadeEnvelopeChecks: a message whose cascade does not fit its
// decisions is invalid, answered with error records, and deleted.
func TestCascadeEnvelopeChecks(t *testing.T) {
	t.Parallel()
	d := mkDecision("a", "s", "q?")
	stage := decision.CascadeStage{Pool: decision.RouteCPU, Status: decision.StatusEscalate}
	for _, tc := range []struct {
		name    string
		route   decision.Route
		cascade [][]decision.CascadeStage
		want    string
	}{
		{"count", decision.RouteGPU, [][]decision.CascadeStage{{stage}, {stage}}, "cascade: has 2 entries for 1 decisions"},
		{"own pool", decision.RouteCPU, [][]decision.CascadeStage{{stage}}, "cascade[0][0].pool: cpu is the pool this message is on"},
		{"twice", decision.RouteGPU, [][]decision.CascadeStage{{stage, stage}}, "cascade[0][1].pool: cpu is named twice"},
		{"not escalated", decision.RouteGPU, [][]decision.CascadeStage{{{Pool: decision.RouteCPU, Status: decision.StatusDecided}}}, `cascade[0][0].status: a stage that sent a decision on has status "escalate", got "decided"`},
		{"empty", decision.RouteGPU, [][]decision.CascadeStage{{}}, "cascade[0]: is empty"},
		{"bad pool", decision.RouteGPU, [][]decision.CascadeStage{{{Pool: "tpu", Status: decision.StatusEscalate}}}, `cascade[0][0].pool: "tpu" is not a pool`},
	} {
		env := queue.Envelope{RequestID: "r", Route: tc.route, Decisions: []decision.Decision{d}, Cascade: tc.cascade}
		b, err := env.Marshal()
		require.NoError(t, err)
		_, err = queue.UnmarshalEnvelope(b)
		require.ErrorIs(t, err, queue.ErrBadEnvelope, tc.name)
		require.ErrorContains(t, err, tc.want, tc.name)
	}
	env := queue.Envelope{RequestID: "r", Route: decision.RouteGPU, Decisions: []decision.Decision{d}, Cascade: [][]decision.CascadeStage{{stage}}}
	b, err := env.Marshal()
	require.NoError(t, err)
	got, err := queue.UnmarshalEnvelope(b)
	require.NoError(t, err)
	require.Equal(t, []decision.Route{decision.RouteCPU}, got.Visited())
}

// killPolicy escalates every "esc-" decision (a probability is never 1).
const killPolicy = `
kinds:
  esc:
    match: [{id: '^esc-'}]
    escalate: {below: 1, to: gpu}
`

// TestCascadeKill9BetweenStages kills the first stage's worker (kill -9)
// after it sent a decision on to the gpu pool and published the others,
// before it deleted the message. The message comes back; a new worker
// scores it again and sends it on again. Nothing is lost and every
// decision has one final result: the local queue drops the repeated send
// by its deduplication id, so the big model scores the decision once; a
// standard SQS queue takes both, and the two final results are the same
// bytes.
func TestCascadeKill9BetweenStages(t *testing.T) {
	t.Parallel()
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			b := setup(t, kind, bundleOpts{maxReceives: 10})
			var (
				gq     queue.Queue
				target string
				gDepth func() int
			)
			switch kind {
			case "local":
				lq, err := queue.OpenLocal(queue.LocalConfig{Path: b.spec.QueuePath, Name: "gpu", PollInterval: 20 * time.Millisecond})
				require.NoError(t, err)
				t.Cleanup(func() { lq.Close() })
				gq, target = lq, "gpu"
				gDepth = func() int {
					s, err := lq.Stats(ctx)
					require.NoError(t, err)
					return s.Visible + s.InFlight
				}
			default:
				moto := queuetest.SharedMoto(t)
				tq, err := moto.CreateQueue(ctx, "gpu", queuetest.QueueOptions{MaxReceives: 10})
				require.NoError(t, err)
				ac := moto.AWS()
				sq, err := queue.NewSQS(ctx, queue.SQSConfig{URL: tq.URL, Endpoint: moto.Endpoint, AWS: &ac})
				require.NoError(t, err)
				gq, target = sq, tq.URL
				gDepth = func() int {
					v, f, err := moto.Count(ctx, tq.URL)
					require.NoError(t, err)
					return v + f
				}
			}
			b.send(t, envelope("r1", mkDecision("esc-1", "a ticket", "which team?"), mkDecision("plain", "a ticket", "urgent?")))

			spec := b.spec
			spec.Visibility, spec.Shutdown, spec.Concurrency, spec.MaxMessages = 2*time.Second, 5*time.Second, 1, 1
			spec.Pool, spec.EscalateTo, spec.Policy = "cpu", target, killPolicy
			spec.BlockAt = "delete"
			h := startHelper(t, spec)
			h.events.wait(t, "escalated", 30*time.Second)
			h.events.wait(t, "deleting", 30*time.Second)
			require.NoError(t, h.Process.Signal(syscall.SIGKILL))
			_ = h.waitExit(t, 10*time.Second)
			require.Equal(t, 1, b.depth(t), "the first stage's message is still held")
			eventually(t, 10*time.Second, func() bool { return gDepth() == 1 }, "the escalation was sent before the kill")

			spec.BlockAt = ""
			h = startHelper(t, spec)
			h.events.wait(t, "deleting", 30*time.Second)
			eventually(t, 30*time.Second, func() bool { return b.depth(t) == 0 }, "the first stage's message was deleted")
			require.NoError(t, h.Process.Signal(syscall.SIGTERM))
			require.Equal(t, 0, h.waitExit(t, 30*time.Second))

			p, err := policy.Parse([]byte(killPolicy))
			require.NoError(t, err)
			big := &fakeScorer{}
			start(t, worker.Config{Queue: gq, Scorer: big, Sinks: []sink.Sink{b.sink}, Policy: policy.HolderOf(p), Pool: decision.RouteGPU})
			got := b.waitResults(t, 2, 30*time.Second)
			eventually(t, 30*time.Second, func() bool { return gDepth() == 0 }, "the gpu queue emptied")
			got = b.results(t)
			require.Len(t, got, 2)
			for key, copies := range got {
				for _, c := range copies[1:] {
					require.Equal(t, string(copies[0]), string(c), "a second final result of %s differs", key)
				}
			}
			rec := decode(t, got["r1/esc-1"][0])
			require.Len(t, rec.Result.Cascade, 2)
			require.Equal(t, decision.RouteCPU, rec.Result.Cascade[0].Pool)
			require.Equal(t, decision.RouteGPU, rec.Result.Cascade[1].Pool)
			require.Empty(t, decode(t, got["r1/plain"][0]).Result.Cascade)
			if kind == "local" {
				require.Equal(t, 1, big.callsOf("esc-1"), "the repeated send was dropped by its deduplication id")
			}
			require.Zero(t, b.dead(t))
			t.Logf("%s: the big model scored the escalated decision %d times; copies of its result: %d", kind, big.callsOf("esc-1"), len(got["r1/esc-1"]))
		})
	}
}
