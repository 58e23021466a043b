package server_test

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/internal/server"
)

// The SemIf SageMaker adapter contract, table by table, as its published
// HTTP tests state it: callers copy those tests, so verdict's SageMaker
// routes must pass them (verdict may add members; where the published
// test compares a whole body, so does this one).

const semifDecision = `{"id":"route-1","state":"The customer cannot sign in.","question":"Which queue should handle this request?","options":[{"id":"access","description":"Account access support."},{"id":"billing","description":"Billing support."}]}`

var semifRoutes = []string{"/invocations", "/endpoints/local/invocations"}

func TestSemIfContractPing(t *testing.T) {
	t.Parallel()
	b := setup(t, server.Config{})
	r := do(t, "GET", b.url+"/ping", nil)
	require.Equal(t, http.StatusOK, r.status)
	require.Equal(t, map[string]any{"status": "ok"}, r.json(t))
}

func TestSemIfContractAnswers(t *testing.T) {
	t.Parallel()
	b := setup(t, server.Config{})
	second := strings.NewReplacer(`"route-1"`, `"priority-1"`, "Which queue should handle this request?", "How urgent is this request?").Replace(semifDecision)
	for _, path := range semifRoutes {
		t.Run(path, func(t *testing.T) {
			t.Parallel()
			r := do(t, "POST", b.url+path, []byte(`{"decision":`+semifDecision+`}`))
			require.Equal(t, http.StatusOK, r.status, "%s", r.body)
			res := r.json(t)["result"].(map[string]any)
			require.Equal(t, "route-1", res["id"])
			require.Equal(t, []any{"access", "billing"}, res["option_ids"])
			probs := res["probabilities"].([]any)
			require.InDelta(t, 1.0, probs[0].(float64)+probs[1].(float64), 1e-9)

			r = do(t, "POST", b.url+path, []byte(`{"decisions":[`+semifDecision+`,`+second+`]}`))
			require.Equal(t, http.StatusOK, r.status, "%s", r.body)
			m := r.json(t)
			results := m["results"].([]any)
			require.Equal(t, "route-1", results[0].(map[string]any)["id"])
			require.Equal(t, "priority-1", results[1].(map[string]any)["id"])
			timing := m["timing"].(map[string]any)
			require.Equal(t, 2.0, timing["batch_size"])
			require.Equal(t, 1.0, timing["states"])
			require.Contains(t, timing, "prefix_tokens")
			require.Contains(t, timing, "total_seconds")
		})
	}
}

func TestSemIfContractInvalidShapes(t *testing.T) {
	t.Parallel()
	b := setup(t, server.Config{})
	cases := []struct{ body, message string }{
		{`[]`, "JSON object"},
		{`{}`, "exactly one"},
		{`{"decision":[]}`, "one decision object"},
		{`{"decisions":[]}`, "nonempty decisions list"},
		{`{"decisions":[` + semifDecision + `,[]]}`, "decision objects"},
		{`{"decision":` + semifDecision + `,"decisions":[` + semifDecision + `]}`, "exactly one"},
		{`{"decision":` + semifDecision + `,"mode":"shared"}`, "Unsupported request fields"},
		// verdict's own rules answer in the same shape, with field paths.
		{`{"decision":{"state":"s","question":"q?","options":[{"id":"a","description":""},{"id":"a","description":""}]}}`, "duplicate"},
		{`{"state": `, "malformed"},
	}
	for _, path := range semifRoutes {
		for _, c := range cases {
			t.Run(path+" "+c.body[:min(len(c.body), 30)], func(t *testing.T) {
				t.Parallel()
				r := do(t, "POST", b.url+path, []byte(c.body))
				require.Equal(t, http.StatusBadRequest, r.status, "%s", r.body)
				m := r.json(t)
				require.Contains(t, m["error"], c.message, "%s", r.body)
				require.NotEmpty(t, m["code"])
			})
		}
	}
	require.Zero(t, b.scorer.calls.Load(), "nothing invalid reaches the scorer")
}

func TestSemIfContractBatchLimit(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		limit, n int
	}{{0, 65}, {1, 2}} {
		t.Run(fmt.Sprint(c.n), func(t *testing.T) {
			t.Parallel()
			cfg := server.Config{}
			cfg.Limits.MaxDecisions = c.limit
			b := setup(t, cfg)
			ds := make([]string, c.n)
			for i := range ds {
				ds[i] = strings.Replace(semifDecision, `"route-1"`, fmt.Sprintf(`"d%d"`, i), 1)
			}
			r := do(t, "POST", b.url+"/invocations", []byte(`{"decisions":[`+strings.Join(ds, ",")+`]}`))
			require.Equal(t, http.StatusBadRequest, r.status, "%s", r.body)
			want := max(c.limit, 1)
			if c.limit == 0 {
				want = 64
			}
			require.Equal(t, fmt.Sprintf("decisions supports at most %d items", want), r.json(t)["error"])
			require.Zero(t, b.scorer.calls.Load())
		})
	}
}

func TestSemIfContractContentTypeAndRoutes(t *testing.T) {
	t.Parallel()
	b := setup(t, server.Config{})
	for _, path := range semifRoutes {
		r := do(t, "POST", b.url+path, []byte(`{"decision":`+semifDecision+`}`), "Content-Type", "text/plain")
		require.Equal(t, http.StatusUnsupportedMediaType, r.status)
		require.Contains(t, r.json(t)["error"], "application/json")
	}
	for _, c := range []struct{ method, path string }{
		{"GET", "/unknown"}, {"POST", "/unknown"}, {"POST", "/endpoints//invocations"},
		{"POST", "/endpoints/invocations"}, {"POST", "/endpoints/a/b/invocations"},
	} {
		var body []byte
		if c.method == "POST" {
			body = []byte(`{}`)
		}
		r := do(t, c.method, b.url+c.path, body)
		require.Equal(t, http.StatusNotFound, r.status, c.path)
		require.Equal(t, `{"error":"not found"}`, strings.TrimSpace(string(r.body)))
	}
}

func TestSemIfContractScoringFailure(t *testing.T) {
	t.Parallel()
	b := setup(t, server.Config{Scorer: &fakeScorer{err: errors.New("model context failed")}})
	r := do(t, "POST", b.url+"/invocations", []byte(`{"decision":`+semifDecision+`}`))
	require.Equal(t, http.StatusInternalServerError, r.status)
	m := r.json(t)
	require.Equal(t, "scoring failed", m["error"])
	require.NotContains(t, m, "result")
}

// Busy: 503 with exactly the contract's body, before the body is read,
// and with Retry-After (which the SageMaker scorer honours).
func TestSemIfContractBusy(t *testing.T) {
	t.Parallel()
	fs := &fakeScorer{gate: make(chan struct{})}
	b := setup(t, server.Config{Scorer: fs, MaxConcurrent: 1, MaxQueue: server.NoQueue, Logger: discardLogger()})
	first := make(chan response, 1)
	go func() { first <- do(t, "POST", b.url+"/invocations", []byte(`{"decision":`+semifDecision+`}`)) }()
	require.Eventually(t, func() bool { return fs.calls.Load() == 1 }, 10*time.Second, 2*time.Millisecond)

	r := do(t, "POST", b.url+"/invocations", []byte(`{"decision":`+semifDecision+`}`))
	require.Equal(t, http.StatusServiceUnavailable, r.status)
	require.Equal(t, `{"error":"model is busy; retry the request","retryable":true}`, strings.TrimSpace(string(r.body)))
	require.NotEmpty(t, r.header.Get("Retry-After"))

	// Headers only: the answer comes although the body never does.
	conn, err := net.Dial("tcp", strings.TrimPrefix(b.url, "http://"))
	require.NoError(t, err)
	defer conn.Close()
	_, err = fmt.Fprintf(conn, "POST /invocations HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n")
	require.NoError(t, err)
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(10*time.Second)))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	_ = resp.Body.Close()

	fs.open()
	require.Equal(t, http.StatusOK, (<-first).status)
}
