//go:build cgo

package worker_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sagemakerruntime"
	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/engine"
	"github.com/verdict-dev/verdict/engine/enginetest"
	"github.com/verdict-dev/verdict/engine/llamacpp"
	"github.com/verdict-dev/verdict/engine/sagemaker"
	"github.com/verdict-dev/verdict/internal/gguf"
	"github.com/verdict-dev/verdict/internal/server"
	"github.com/verdict-dev/verdict/internal/sink"
	"github.com/verdict-dev/verdict/worker"
)

// invocation is one request the endpoint saw and how it answered.
type invocation struct {
	path       string
	status     int
	retryAfter string
	questions  []string // in request order
	states     []string // canonical state of each decision
}

// recordingEndpoint wraps the real `verdict serve` handler and records every
// invocation (its decisions and the status answered). It changes nothing.
type recordingEndpoint struct {
	next http.Handler
	mu   sync.Mutex
	seen []invocation
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

func (e *recordingEndpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !strings.HasSuffix(r.URL.Path, "/invocations") {
		e.next.ServeHTTP(w, r)
		return
	}
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	inv := invocation{path: r.URL.Path}
	var batch struct {
		Decisions []decision.Decision `json:"decisions"`
	}
	if json.Unmarshal(body, &batch) == nil {
		for _, d := range batch.Decisions {
			inv.questions = append(inv.questions, d.Question)
			inv.states = append(inv.states, string(d.State.Canonical()))
		}
	}
	sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
	e.next.ServeHTTP(sw, r)
	inv.status = sw.status
	inv.retryAfter = sw.Header().Get("Retry-After")
	e.mu.Lock()
	e.seen = append(e.seen, inv)
	e.mu.Unlock()
}

func (e *recordingEndpoint) invocations() []invocation {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]invocation(nil), e.seen...)
}

func (e *recordingEndpoint) count(status int) int {
	n := 0
	for _, inv := range e.invocations() {
		if inv.status == status {
			n++
		}
	}
	return n
}

// gatedScorer is the real engine, except that decisions asking "hold?"
// wait until the gate is opened: it lets a test keep the server's only
// scoring slot taken, so that its admission control sheds the worker's
// requests with real 503s.
type gatedScorer struct {
	eng     engine.Scorer
	entered chan struct{}
	gate    chan struct{}
}

func (g *gatedScorer) Score(ctx context.Context, ds []decision.Decision) ([]decision.Result, error) {
	for _, d := range ds {
		if d.Question == "hold?" {
			close(g.entered)
			select {
			case <-g.gate:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			break
		}
	}
	return g.eng.Score(ctx, ds)
}

// startEndpoint serves cfg (a `verdict serve` handler) on 127.0.0.1 behind
// a recorder, and returns the recorder and the server's URL.
func startEndpoint(t *testing.T, cfg server.Config) (*recordingEndpoint, string) {
	t.Helper()
	cfg.Logger = quietLogger()
	srv, err := server.New(cfg)
	require.NoError(t, err)
	rec := &recordingEndpoint{next: srv}
	hs := httptest.NewServer(rec)
	t.Cleanup(hs.Close)
	return rec, hs.URL
}

// sageMakerScorer is the engine/sagemaker scorer pointed at url with static
// test credentials and the SDK's own retries off.
func sageMakerScorer(t *testing.T, url string, cfg sagemaker.Config) *sagemaker.Scorer {
	t.Helper()
	client := sagemakerruntime.New(sagemakerruntime.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(url),
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
		Retryer:      aws.NopRetryer{},
		HTTPClient:   &http.Client{Timeout: 30 * time.Second},
	})
	cfg.EndpointName = "local"
	cfg.Client = client
	cfg.Logger = quietLogger()
	s, err := sagemaker.New(context.Background(), cfg)
	require.NoError(t, err)
	return s
}

// TestSageMakerEngineEndToEnd runs a worker whose scorer is the SageMaker
// engine against a `verdict serve` handler (the real llama.cpp engine on a
// synthetic tiny model) as the endpoint: local queue in, local results
// store out.
func TestSageMakerEngineEndToEnd(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	require.NoError(t, gguf.Synth(path, gguf.SynthOptions{Shape: "tiny", Seed: 1}))
	eng, err := llamacpp.New(llamacpp.Options{ModelPath: path, ContextSize: 4096})
	require.NoError(t, err)
	defer eng.Close()

	const shared = "The customer cannot log in after the password reset and is locked out."
	const other = "An invoice was charged twice this month."
	ds := []decision.Decision{
		mkDecision("a", shared, "Is this about account access?"),
		mkDecision("b", shared, "Is this urgent?"),
		mkDecision("c", shared, "Is this billing?"),
		mkDecision("d", other, "Is this billing?"),
	}
	// The engine's own answers, one call per state as the endpoint gets
	// them. (Sequential: with this engine build, prefilling two new states
	// in one batch changes the second state's probabilities; see the
	// report of issue 7.)
	direct, err := eng.Score(context.Background(), ds[:3])
	require.NoError(t, err)
	d2, err := eng.Score(context.Background(), ds[3:])
	require.NoError(t, err)
	direct = append(direct, d2...)

	// requireSameAsDirect checks the stored records of request reqID
	// against the engine's own answers for ds.
	requireSameAsDirect := func(t *testing.T, got map[string][][]byte, reqID string) {
		t.Helper()
		for i, d := range ds {
			key := reqID + "/" + d.ID
			require.Len(t, got[key], 1, key)
			rec := decode(t, got[key][0])
			require.Equal(t, decision.StatusDecided, rec.Status, key)
			require.Nil(t, rec.Result.Error, key)
			require.Equal(t, direct[i].OptionIDs, rec.Result.OptionIDs, key)
			require.Len(t, rec.Result.Probabilities, len(direct[i].Probabilities), key)
			// The endpoint may batch the decisions differently from the
			// direct call; batch composition moves results by rounding only
			// (measured below 1e-5; engine/llamacpp's invariance tests).
			for j := range direct[i].Probabilities {
				require.InDelta(t, direct[i].Probabilities[j], rec.Result.Probabilities[j], enginetest.ProbTol(1e-5), key)
				require.InDelta(t, direct[i].OptionLogits[j], rec.Result.OptionLogits[j], enginetest.LogitTol(1e-4), key)
			}
			require.Equal(t, direct[i].PromptSHA256, rec.Result.PromptSHA256, key)
			require.NotNil(t, rec.Result.Model, key)
			require.Equal(t, eng.Identity().SHA256, rec.Result.Model.SHA256, key)
		}
	}

	// The subtests share the engine and run one after the other; the
	// scorer sends one request at a time (Concurrency 1).
	t.Run("results equal the engine's", func(t *testing.T) {
		ep, url := startEndpoint(t, server.Config{Scorer: eng, Model: eng.Identity()})
		b := setup(t, "local", bundleOpts{})
		b.send(t, envelope("e2e-1", ds...))
		start(t, worker.Config{Queue: b.q, Scorer: sageMakerScorer(t, url, sagemaker.Config{Concurrency: 1}), Sinks: []sink.Sink{b.sink}})
		got := b.waitResults(t, len(ds), 60*time.Second)
		require.Len(t, got, len(ds))
		requireSameAsDirect(t, got, "e2e-1")

		// One request per state: the three decisions sharing a state went
		// together (so the endpoint prefilled the state once).
		invs := ep.invocations()
		require.Len(t, invs, 2, "one request per state")
		byState := map[string]invocation{}
		for _, inv := range invs {
			require.Equal(t, http.StatusOK, inv.status)
			require.Equal(t, "/endpoints/local/invocations", inv.path)
			for _, s := range inv.states {
				require.Equal(t, inv.states[0], s, "a request holds one state")
			}
			byState[inv.states[0]] = inv
		}
		require.ElementsMatch(t, []string{"Is this about account access?", "Is this urgent?", "Is this billing?"}, byState[string(decision.TextState(shared).Canonical())].questions)
		require.Equal(t, []string{"Is this billing?"}, byState[string(decision.TextState(other).Canonical())].questions)
	})

	t.Run("shed load is retried and nothing is lost", func(t *testing.T) {
		g := &gatedScorer{eng: eng, entered: make(chan struct{}), gate: make(chan struct{})}
		// One scoring slot and no waiting room: while the slot is taken the
		// server answers 503 with Retry-After: 1.
		ep, url := startEndpoint(t, server.Config{Scorer: g, Model: eng.Identity(), MaxConcurrent: 1, MaxQueue: server.NoQueue, RetryAfter: time.Second})
		opened := false
		openGate := func() {
			if !opened {
				opened = true
				close(g.gate)
			}
		}
		defer openGate()

		// Take the slot with a request of our own.
		held := make(chan int, 1)
		go func() {
			body := `{"decisions":[{"id":"h","state":"hold the slot","question":"hold?","options":[{"id":"yes","description":"Yes."},{"id":"no","description":"No."}]}]}`
			resp, err := http.Post(url+"/invocations", "application/json", strings.NewReader(body))
			if err != nil {
				held <- 0
				return
			}
			resp.Body.Close()
			held <- resp.StatusCode
		}()
		select {
		case <-g.entered:
		case <-time.After(30 * time.Second):
			t.Fatal("the holding request never reached the engine")
		}

		b := setup(t, "local", bundleOpts{maxReceives: 20})
		b.send(t, envelope("e2e-shed", ds...))
		const attempts = 2
		sm := sageMakerScorer(t, url, sagemaker.Config{Concurrency: 1, MaxAttempts: attempts, MaxElapsed: 5 * time.Second, BaseDelay: 10 * time.Millisecond, MaxDelay: 50 * time.Millisecond})
		w := start(t, worker.Config{Queue: b.q, Scorer: sm, Sinks: []sink.Sink{b.sink},
			RetryBase: 50 * time.Millisecond, RetryMax: 200 * time.Millisecond})

		// Keep the slot until the scorer gave up at least once (every
		// attempt shed) and the worker released the message and received
		// it again (more 503s after that).
		eventually(t, 60*time.Second, func() bool {
			return ep.count(http.StatusServiceUnavailable) > 2*attempts &&
				strings.Contains(workerMetric(t, w), "verdict_worker_messages_released_total")
		}, "the worker's requests were not shed and retried")
		require.Empty(t, b.results(t), "nothing is published while the endpoint sheds")
		for _, inv := range ep.invocations() {
			if inv.status == http.StatusServiceUnavailable {
				require.Equal(t, "1", inv.retryAfter, "a shed request carries Retry-After")
			}
		}
		openGate()
		require.Equal(t, http.StatusOK, <-held)

		got := b.waitResults(t, len(ds), 60*time.Second)
		require.Len(t, got, len(ds))
		requireSameAsDirect(t, got, "e2e-shed")
		eventually(t, 10*time.Second, func() bool { return b.depth(t) == 0 }, "the message was not deleted")
		require.Zero(t, b.dead(t), "nothing dead-lettered")
		m := workerMetric(t, w)
		require.Regexp(t, `verdict_worker_messages_received_total [2-9]|verdict_worker_messages_received_total [1-9][0-9]`, m, "the message was received again after its release")
		require.Contains(t, m, "verdict_worker_messages_deleted_total 1")
		require.Contains(t, m, `verdict_worker_decisions_total{status="decided"} 4`)
	})
}
