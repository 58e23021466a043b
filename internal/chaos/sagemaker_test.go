//go:build chaos

package chaos

import (
	"bytes"
	"context"
	"crypto/sha256"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/internal/queue"
)

// Sizes of the 503 storm.
const (
	stormMessages = 30               // two decisions each, one endpoint request per message
	stormDuration = 30 * time.Second // how long ~90 % of requests get 503
	stormShare    = 0.9              // the share of requests answered 503 during the storm
	// stormMinGap is the least time between two attempts of one request:
	// the storm's Retry-After (1 s), less the clock's granularity.
	stormMinGap = 990 * time.Millisecond
)

// TestSageMaker503StormLosesNothing protects the SageMaker engine's retry
// policy: while ~90 % of endpoint requests are answered 503 with
// Retry-After: 1 (an overloaded endpoint), `verdict worker --engine
// sagemaker` loses no decision (it retries, then releases the message for
// later) and never retries one request sooner than Retry-After says.
func TestSageMaker503StormLosesNothing(t *testing.T) {
	r := seeded(t)
	_, serveURL := startServe(t)
	target, err := url.Parse(serveURL)
	require.NoError(t, err)
	fwd := httputil.NewSingleHostReverseProxy(target)

	var mu sync.Mutex
	attempts := map[[32]byte][]time.Time{} // by request body
	refused, passed := 0, 0
	stormEnds := time.Now().Add(stormDuration)
	proxy := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(req.Body)
		if err != nil {
			http.Error(rw, "read", http.StatusBadRequest)
			return
		}
		mu.Lock()
		key := sha256.Sum256(body)
		attempts[key] = append(attempts[key], time.Now())
		storm := time.Now().Before(stormEnds) && r.Float64() < stormShare
		if storm {
			refused++
		} else {
			passed++
		}
		mu.Unlock()
		if storm {
			// What an overloaded `verdict serve` answers on the runtime path.
			rw.Header().Set("Content-Type", "application/json")
			rw.Header().Set("Retry-After", "1")
			rw.Header().Set("X-Amzn-ErrorType", "ServiceUnavailable")
			rw.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(rw, `{"error":"model is busy; retry the request","retryable":true}`)
			return
		}
		req.Body = io.NopCloser(bytes.NewReader(body))
		fwd.ServeHTTP(rw, req)
	}))
	defer proxy.Close()

	data := t.TempDir()
	w := start(t, awsEnv, "worker", "--engine", "sagemaker", "--sagemaker-endpoint", "local", "--sagemaker-url", proxy.URL,
		"--queue", "local", "--data", data, "--wait", "1s", "--retry-base", "1s", "--max-receives", "50",
		"--region", "us-east-1", "--log-format", "json")
	w.waitLog(t, msgWorkerStarted, startTimeout)

	q, err := queue.OpenLocal(queue.LocalConfig{Path: filepath.Join(data, "queue.db"), Name: "cpu"})
	require.NoError(t, err)
	defer q.Close()
	want := map[string]bool{}
	var msgs []queue.Outgoing
	for i := range stormMessages {
		m, keys := envelope(t, "storm", i, 2)
		msgs = append(msgs, m)
		want[keys[0]], want[keys[1]] = true, true
	}
	sendAll(t, context.Background(), q, msgs)

	store := filepath.Join(data, "results.db")
	eventually(t, stormDuration+3*time.Minute, 500*time.Millisecond, func() bool {
		return len(readStore(t, store)) >= len(want)
	}, "every decision is stored after the storm")
	_, err = w.terminate(t, time.Minute)
	require.NoError(t, err)

	got := readStore(t, store)
	require.Len(t, got, len(want))
	for key := range want {
		rec, ok := got[key]
		require.True(t, ok, "decision %s lost", key)
		requireDecided(t, rec)
	}
	require.Zero(t, localDeadLetters(t, filepath.Join(data, "queue.db"), "cpu"), "no message dead-lettered")

	mu.Lock()
	defer mu.Unlock()
	t.Logf("%d requests answered 503, %d passed", refused, passed)
	require.Positive(t, refused, "the storm refused requests")
	retried := 0
	for _, times := range attempts {
		sort.Slice(times, func(i, j int) bool { return times[i].Before(times[j]) })
		for i := 1; i < len(times); i++ {
			retried++
			gap := times[i].Sub(times[i-1])
			require.GreaterOrEqual(t, gap, stormMinGap, "a request was retried %v after a 503 with Retry-After: 1", gap)
		}
	}
	require.Positive(t, retried, "requests were retried")
	t.Logf("%d retries, all at least %v apart", retried, stormMinGap)
}
