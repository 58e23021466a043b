package sagemaker_test

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sagemakerruntime"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/engine"
	"github.com/verdict-dev/verdict/engine/sagemaker"
	"github.com/verdict-dev/verdict/internal/server"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
	)
}

// fakeEngine stands in for llama.cpp inside the local verdict server when
// the binary is built without it (the llamacpp-tagged end-to-end test uses
// the real engine): deterministic logits from a hash of each option.
type fakeEngine struct{ calls atomic.Int64 }

func (f *fakeEngine) Score(_ context.Context, ds []decision.Decision) ([]decision.Result, error) {
	f.calls.Add(1)
	out := make([]decision.Result, len(ds))
	for i := range ds {
		logits := make([]float64, len(ds[i].Options))
		for j, o := range ds[i].Options {
			h := fnv.New32a()
			fmt.Fprintf(h, "%s|%s|%s", ds[i].State.Canonical(), ds[i].Question, o.ID)
			logits[j] = float64(h.Sum32()%1000) / 100
		}
		engine.Readout(&out[i], &ds[i], logits, 1)
	}
	return out, nil
}

// endpoint is a local stand-in for a SageMaker endpoint: a real verdict
// server, behind a front that can answer the first requests with errors.
type endpoint struct {
	url      string
	requests atomic.Int64
	engine   *fakeEngine
	mu       sync.Mutex
	bodies   []string
}

// failFunc decides the answer to request n (1-based): ok=false means pass
// it to the verdict server.
type failFunc func(n int64, w http.ResponseWriter) (handled bool)

func newEndpoint(t *testing.T, fail failFunc) *endpoint {
	t.Helper()
	ep := &endpoint{engine: &fakeEngine{}}
	srv, err := server.New(server.Config{Scorer: ep.engine, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := ep.requests.Add(1)
		b, _ := io.ReadAll(r.Body)
		ep.mu.Lock()
		ep.bodies = append(ep.bodies, string(b))
		ep.mu.Unlock()
		r.Body = io.NopCloser(strings.NewReader(string(b)))
		if fail != nil && fail(n, w) {
			return
		}
		srv.ServeHTTP(w, r)
	})
	ep.url = serve(t, h)
	return ep
}

func serve(t *testing.T, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() { defer close(done); _ = hs.Serve(ln) }()
	t.Cleanup(func() {
		// Requests are over when a test ends; a connection the client
		// opened but never used would hold Shutdown for 5 s.
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if hs.Shutdown(ctx) != nil {
			_ = hs.Close()
		}
		<-done
	})
	return "http://" + ln.Addr().String()
}

// client builds a SageMaker runtime client for url with dummy credentials
// and the SDK's default retryer left on: the Scorer must switch it off per
// call, or the attempts counted below would multiply.
func client(url string) *sagemakerruntime.Client {
	return sagemakerruntime.New(sagemakerruntime.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(url),
		Credentials:  credentials.NewStaticCredentialsProvider("testing", "testing", ""),
	})
}

func newScorer(t *testing.T, url string, mod func(*sagemaker.Config)) *sagemaker.Scorer {
	t.Helper()
	cfg := sagemaker.Config{
		EndpointName: "local", Client: client(url),
		BaseDelay: time.Millisecond, MaxDelay: 10 * time.Millisecond, MaxAttempts: 4,
		MaxElapsed: 20 * time.Second, Logger: slog.New(slog.DiscardHandler),
	}
	if mod != nil {
		mod(&cfg)
	}
	s, err := sagemaker.New(context.Background(), cfg)
	require.NoError(t, err)
	return s
}

func answer(w http.ResponseWriter, status int, errType, body string, hdr ...string) {
	for i := 0; i+1 < len(hdr); i += 2 {
		w.Header().Set(hdr[i], hdr[i+1])
	}
	if errType != "" {
		w.Header().Set("X-Amzn-ErrorType", errType)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

func decisions(states ...string) []decision.Decision {
	var out []decision.Decision
	for i, s := range states {
		out = append(out, decision.Decision{
			ID: fmt.Sprintf("d%d", i), State: decision.TextState(s), Question: "Which queue?",
			Options: []decision.Option{{ID: "billing", Description: "Money."}, {ID: "tech", Description: "Bugs."}},
		})
	}
	return out
}

func requireScored(t *testing.T, ds []decision.Decision, rs []decision.Result) {
	t.Helper()
	require.Len(t, rs, len(ds))
	for i := range ds {
		require.Nil(t, rs[i].Error, "result %d", i)
		require.Equal(t, ds[i].ID, rs[i].ID)
		require.Equal(t, ds[i].OptionIDs(), rs[i].OptionIDs)
		require.Len(t, rs[i].Probabilities, len(ds[i].Options))
		require.InDelta(t, 1, rs[i].Probabilities[0]+rs[i].Probabilities[1], 1e-9)
	}
}

func TestSucceedsAfterNServiceUnavailable(t *testing.T) {
	t.Parallel()
	const n = 3
	ep := newEndpoint(t, func(i int64, w http.ResponseWriter) bool {
		if i <= n {
			answer(w, 503, "ServiceUnavailable", `{"message":"busy"}`)
			return true
		}
		return false
	})
	s := newScorer(t, ep.url, func(c *sagemaker.Config) { c.MaxAttempts = n + 1 })
	ds := decisions("state one")
	rs, err := s.Score(context.Background(), ds)
	require.NoError(t, err)
	requireScored(t, ds, rs)
	require.Equal(t, int64(n+1), ep.requests.Load(), "exactly N+1 attempts: the SDK's retryer is off")
}

func TestAlwaysUnavailableGivesUpRetryable(t *testing.T) {
	t.Parallel()
	for _, status := range []int{500, 502, 503, 504} {
		ep := newEndpoint(t, func(int64, http.ResponseWriter) bool { return false })
		ep2 := newEndpoint(t, func(_ int64, w http.ResponseWriter) bool {
			answer(w, status, "", `{"message":"down"}`)
			return true
		})
		_ = ep
		s := newScorer(t, ep2.url, func(c *sagemaker.Config) { c.MaxAttempts = 5 })
		start := time.Now()
		_, err := s.Score(context.Background(), decisions("s"))
		require.Error(t, err)
		require.ErrorIs(t, err, engine.ErrUnavailable)
		require.True(t, engine.Retryable(err))
		require.Contains(t, err.Error(), "gave up after 5 attempts")
		require.Equal(t, int64(5), ep2.requests.Load(), "status %d", status)
		require.Less(t, time.Since(start), 20*time.Second)
	}
}

func TestMaxElapsedCapsRetries(t *testing.T) {
	t.Parallel()
	ep := newEndpoint(t, func(_ int64, w http.ResponseWriter) bool {
		answer(w, 503, "ServiceUnavailable", `{"message":"busy"}`, "Retry-After", "1")
		return true
	})
	s := newScorer(t, ep.url, func(c *sagemaker.Config) { c.MaxAttempts = 100; c.MaxElapsed = 1500 * time.Millisecond })
	_, err := s.Score(context.Background(), decisions("s"))
	require.ErrorIs(t, err, engine.ErrUnavailable)
	// Waits of 1 s each within 1.5 s: the first retry fits, the second would not.
	require.Equal(t, int64(2), ep.requests.Load())
}

func TestThrottledHonoursRetryAfter(t *testing.T) {
	t.Parallel()
	var first time.Time
	var gap atomic.Int64
	ep := newEndpoint(t, func(i int64, w http.ResponseWriter) bool {
		if i == 1 {
			first = time.Now()
			answer(w, 429, "ThrottlingException", `{"message":"slow down"}`, "Retry-After", "1")
			return true
		}
		gap.Store(int64(time.Since(first)))
		return false
	})
	s := newScorer(t, ep.url, nil)
	ds := decisions("s")
	rs, err := s.Score(context.Background(), ds)
	require.NoError(t, err)
	requireScored(t, ds, rs)
	require.Equal(t, int64(2), ep.requests.Load())
	// The backoff alone would wait about a millisecond; Retry-After says 1 s.
	require.GreaterOrEqual(t, time.Duration(gap.Load()), 900*time.Millisecond)
}

func TestModelErrorIsNotRetried(t *testing.T) {
	t.Parallel()
	ep := newEndpoint(t, func(_ int64, w http.ResponseWriter) bool {
		answer(w, 424, "ModelError", `{"Message":"Received server error (500) from primary","OriginalStatusCode":500,"OriginalMessage":"boom"}`)
		return true
	})
	s := newScorer(t, ep.url, nil)
	ds := decisions("s1", "s2")
	rs, err := s.Score(context.Background(), ds)
	require.NoError(t, err, "a refused request fails its decisions, not the call")
	require.Equal(t, int64(2), ep.requests.Load(), "one request per state, none retried")
	for i, r := range rs {
		require.Equal(t, ds[i].ID, r.ID)
		require.NotNil(t, r.Error)
		require.False(t, r.Error.Retryable)
		require.Contains(t, r.Error.Message, "ModelError")
	}
}

func TestModelErrorOfASheddingContainerIsRetried(t *testing.T) {
	t.Parallel()
	ep := newEndpoint(t, func(i int64, w http.ResponseWriter) bool {
		if i == 1 {
			answer(w, 424, "ModelError", `{"Message":"Received server error (503) from primary","OriginalStatusCode":503}`)
			return true
		}
		return false
	})
	s := newScorer(t, ep.url, nil)
	ds := decisions("s")
	rs, err := s.Score(context.Background(), ds)
	require.NoError(t, err)
	requireScored(t, ds, rs)
	require.Equal(t, int64(2), ep.requests.Load())
}

func TestValidationErrorFromVerdictServeIsNotRetried(t *testing.T) {
	t.Parallel()
	ep := newEndpoint(t, nil)
	s := newScorer(t, ep.url, nil)
	ds := decisions("s")
	ds[0].Options = ds[0].Options[:1] // one option: the server answers 422
	rs, err := s.Score(context.Background(), ds)
	require.NoError(t, err)
	require.Equal(t, int64(1), ep.requests.Load())
	require.NotNil(t, rs[0].Error)
	require.Contains(t, rs[0].Error.Message, "options")
}

func TestConnectionErrorsAreRetried(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	url := "http://" + ln.Addr().String()
	require.NoError(t, ln.Close()) // nothing listens there now
	s := newScorer(t, url, func(c *sagemaker.Config) { c.MaxAttempts = 3 })
	_, err = s.Score(context.Background(), decisions("s"))
	require.ErrorIs(t, err, engine.ErrUnavailable)
	require.Contains(t, err.Error(), "gave up after 3 attempts")
}

func TestFreshBackoffPerCall(t *testing.T) {
	t.Parallel()
	var fails atomic.Int64
	ep := newEndpoint(t, func(_ int64, w http.ResponseWriter) bool {
		if fails.Add(1)%3 != 0 { // every call fails twice, then succeeds
			answer(w, 503, "ServiceUnavailable", `{"message":"busy"}`)
			return true
		}
		return false
	})
	s := newScorer(t, ep.url, func(c *sagemaker.Config) { c.MaxAttempts = 3 })
	for range 4 {
		ds := decisions("s")
		rs, err := s.Score(context.Background(), ds)
		require.NoError(t, err, "a spent backoff must not leak into the next call")
		requireScored(t, ds, rs)
	}
	require.Equal(t, int64(12), ep.requests.Load())
}

func TestContextEndsRetries(t *testing.T) {
	t.Parallel()
	ep := newEndpoint(t, func(_ int64, w http.ResponseWriter) bool {
		answer(w, 503, "ServiceUnavailable", `{"message":"busy"}`, "Retry-After", "30")
		return true
	})
	s := newScorer(t, ep.url, func(c *sagemaker.Config) { c.MaxAttempts = 10; c.MaxElapsed = time.Minute })
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := s.Score(ctx, decisions("s"))
	require.Error(t, err)
	require.True(t, engine.Retryable(err), "%v", err)
	require.Less(t, time.Since(start), 10*time.Second, "a 30 s Retry-After past the deadline is not waited")
	require.Equal(t, int64(1), ep.requests.Load())
}

// TestGroupsByStateEndToEnd scores through a real local verdict server:
// decisions sharing a state travel in one request, results come back in
// input order, ids survive even when they would collide in a batch.
func TestGroupsByStateEndToEnd(t *testing.T) {
	t.Parallel()
	ep := newEndpoint(t, nil)
	s := newScorer(t, ep.url, func(c *sagemaker.Config) { c.MaxBatch = 2 })
	ds := decisions("alpha", "beta", "alpha", "alpha", "beta")
	ds[3].ID = ds[0].ID // a duplicate id within the "alpha" group
	ds[4].ID = ""
	rs, err := s.Score(context.Background(), ds)
	require.NoError(t, err)
	requireScored(t, ds, rs)
	// alpha: 3 decisions in batches of 2 → 2 requests; beta: 1 request.
	require.Equal(t, int64(3), ep.requests.Load())
	ep.mu.Lock()
	defer ep.mu.Unlock()
	for _, b := range ep.bodies {
		require.True(t, strings.HasPrefix(b, `{"decisions":[`), b)
		require.False(t, strings.Contains(b, "alpha") && strings.Contains(b, "beta"), "one state per request: %s", b)
	}
	// Same decision, same answer, whichever request carried it.
	require.Equal(t, rs[0].Probabilities, rs[2].Probabilities)
}

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		cfg  sagemaker.Config
		want string
	}{
		{sagemaker.Config{}, "EndpointName"},
		{sagemaker.Config{EndpointName: "e", MaxAttempts: -1}, "MaxAttempts"},
		{sagemaker.Config{EndpointName: "e", MaxBatch: -1}, "MaxBatch"},
		{sagemaker.Config{EndpointName: "e", BaseDelay: time.Second, MaxDelay: time.Millisecond}, "MaxDelay"},
	} {
		_, err := sagemaker.New(context.Background(), c.cfg)
		require.ErrorIs(t, err, sagemaker.ErrConfig)
		require.ErrorContains(t, err, c.want)
	}
}

// TestNewClientFromEnvironment builds the client the way production does:
// from the default AWS configuration (here dummy credentials in the
// environment) with an endpoint URL.
func TestNewClientFromEnvironment(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "testing")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "testing")
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_CONFIG_FILE", "/dev/null")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
	ep := newEndpoint(t, func(i int64, w http.ResponseWriter) bool {
		if i == 1 {
			answer(w, 503, "ServiceUnavailable", `{"message":"busy"}`)
			return true
		}
		return false
	})
	s, err := sagemaker.New(context.Background(), sagemaker.Config{
		EndpointName: "local", EndpointURL: ep.url, BaseDelay: time.Millisecond, MaxAttempts: 2,
	})
	require.NoError(t, err)
	ds := decisions("s")
	rs, err := s.Score(context.Background(), ds)
	require.NoError(t, err)
	requireScored(t, ds, rs)
	require.Equal(t, int64(2), ep.requests.Load())
}

var _ = errors.Is
