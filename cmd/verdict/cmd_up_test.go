package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/lambda"
	"github.com/verdict-dev/verdict/queue"
	"github.com/verdict-dev/verdict/sink"
)

func TestUpFlagErrorsNameTheFlag(t *testing.T) {
	t.Parallel()
	data := filepath.Join(t.TempDir(), "data")
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--data", data, "--addr", "0.0.0.0:8080"}, "flag --addr"},
		{[]string{"--data", data, "--addr", "nonsense"}, "flag --addr"},
		{[]string{"--data", data, "--visibility", "10ms"}, "flag --visibility"},
		{[]string{"--data", data, "--concurrency", "0"}, "flag --concurrency"},
		{[]string{"--data", data, "--max-receives", "0"}, "flag --max-receives"},
		{[]string{"--data", data, "--max-body-bytes", "0"}, "flag --max-body-bytes"},
		{[]string{"--data", data, "--max-state-bytes", "0"}, "flag --max-state-bytes"},
		{[]string{"--data", data, "--synth-shape", "huge"}, "flag --synth-shape"},
		{[]string{"--data", data, "--log-level", "loud"}, "flag --log-level"},
		{[]string{"--data", data, "--policy", filepath.Join(data, "missing.yaml")}, "flag --policy"},
		{[]string{"--data", data, "--api-keys", "a key with spaces"}, "flag --api-keys"},
		{[]string{"--data", data, "extra"}, `unexpected argument "extra"`},
	}
	for _, tc := range cases {
		err := runUp(context.Background(), tc.args)
		require.ErrorContains(t, err, tc.want, "%v", tc.args)
	}
}

func TestCheckLoopback(t *testing.T) {
	t.Parallel()
	require.NoError(t, checkLoopback("127.0.0.1:8080", nil))
	require.NoError(t, checkLoopback("[::1]:0", nil))
	require.NoError(t, checkLoopback("localhost:80", nil))
	require.ErrorContains(t, checkLoopback(":8080", nil), "--api-keys")
	require.ErrorContains(t, checkLoopback("10.0.0.1:8080", nil), "not a loopback address")
	require.NoError(t, checkLoopback("0.0.0.0:8080", map[string]string{"k": "t"}))
}

// TestUpLookups exercises the result lookups over a real local queue,
// results store and request log (no engine: the record is published to the
// store as a worker would).
func TestUpLookups(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	q, err := queue.OpenLocal(queue.LocalConfig{Path: filepath.Join(dir, "queue.db"), Name: upQueueName})
	require.NoError(t, err)
	t.Cleanup(func() { _ = q.Close() })
	store, err := sink.OpenStore(filepath.Join(dir, "results.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	reqs, err := openRequestLog(filepath.Join(dir, "requests.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = reqs.Close() })
	front, err := lambda.New(lambda.Config{
		Queues:     map[decision.Route]queue.Sender{decision.RouteCPU: q},
		APIKeys:    map[string]string{"key-acme-123": "acme", "key-globex-123": "globex"},
		RecordFunc: reqs.record,
	})
	require.NoError(t, err)
	api := &upAPI{front: front, store: store, reqs: reqs}
	mux := http.NewServeMux()
	mux.Handle("POST /v1/decisions", front)
	mux.HandleFunc("GET /v1/requests/{id}", api.getRequest)
	mux.HandleFunc("GET /v1/decisions/{id}", api.getDecision)

	do := func(method, path, key, body string) (int, string) {
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if key != "" {
			req.Header.Set("X-Api-Key", key)
		}
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		return rec.Code, rec.Body.String()
	}
	status, body := do("POST", "/v1/decisions", "key-acme-123",
		`{"decisions": [{"id": "a", "state": "s", "question": "q?", "options": [{"id": "x", "description": ""}, {"id": "y", "description": ""}]},
		                {"id": "b", "state": "s", "question": "r?", "options": [{"id": "x", "description": ""}, {"id": "y", "description": ""}]}]}`)
	require.Equal(t, http.StatusAccepted, status, body)
	var acc lambda.Accepted
	require.NoError(t, json.Unmarshal([]byte(body), &acc))

	status, body = do("GET", "/v1/requests/"+acc.RequestID, "key-acme-123", "")
	require.Equal(t, http.StatusOK, status)
	var st requestStatus
	require.NoError(t, json.Unmarshal([]byte(body), &st))
	require.Equal(t, "queued", st.Status)
	require.Equal(t, 2, st.Total)
	require.Zero(t, st.Done)

	// Another tenant does not see it; no key is 401.
	status, _ = do("GET", "/v1/requests/"+acc.RequestID, "key-globex-123", "")
	require.Equal(t, http.StatusNotFound, status)
	status, _ = do("GET", "/v1/requests/"+acc.RequestID, "", "")
	require.Equal(t, http.StatusUnauthorized, status)

	// A worker publishes one result.
	require.NoError(t, store.Publish(context.Background(), []sink.Record{{RequestID: acc.RequestID, DecisionID: "a", Tenant: "acme",
		Status: decision.StatusDecided, Result: decision.Result{ID: "a", OptionIDs: []string{"x", "y"}, Probabilities: []float64{0.7, 0.3}, Chosen: "x"}}}))
	status, body = do("GET", "/v1/requests/"+acc.RequestID, "key-acme-123", "")
	require.Equal(t, http.StatusOK, status)
	require.NoError(t, json.Unmarshal([]byte(body), &st))
	require.Equal(t, "queued", st.Status)
	require.Equal(t, 1, st.Done)
	require.Equal(t, "done", st.Decisions[0].Status)
	require.Equal(t, "queued", st.Decisions[1].Status)

	status, body = do("GET", "/v1/decisions/a", "key-acme-123", "")
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, body, `"status":"done"`)
	status, body = do("GET", "/v1/decisions/b?request_id="+acc.RequestID, "key-acme-123", "")
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, body, `"status":"queued"`)
	status, _ = do("GET", "/v1/decisions/zzz", "key-acme-123", "")
	require.Equal(t, http.StatusNotFound, status)
	status, _ = do("GET", "/v1/decisions/a", "key-globex-123", "")
	require.Equal(t, http.StatusNotFound, status)

	require.NoError(t, store.Publish(context.Background(), []sink.Record{{RequestID: acc.RequestID, DecisionID: "b", Tenant: "acme",
		Status: decision.StatusDecided, Result: decision.Result{ID: "b"}}}))
	status, body = do("GET", "/v1/requests/"+acc.RequestID, "key-acme-123", "")
	require.Equal(t, http.StatusOK, status)
	require.NoError(t, json.Unmarshal([]byte(body), &st))
	require.Equal(t, "done", st.Status)
}

func TestRequireKeyGuardsAdminRoutes(t *testing.T) {
	t.Parallel()
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	call := func(keys map[string]string, hdr, val string) int {
		req := httptest.NewRequest(http.MethodPost, "/admin/policy", nil)
		if hdr != "" {
			req.Header.Set(hdr, val)
		}
		rec := httptest.NewRecorder()
		requireKey(keys, ok).ServeHTTP(rec, req)
		return rec.Code
	}
	keys := map[string]string{"k1": "acme"}
	require.Equal(t, http.StatusUnauthorized, call(keys, "", ""))
	require.Equal(t, http.StatusUnauthorized, call(keys, "Authorization", "Bearer nope"))
	require.Equal(t, http.StatusNoContent, call(keys, "Authorization", "Bearer k1"))
	require.Equal(t, http.StatusNoContent, call(keys, "X-Api-Key", "k1"))
	require.Equal(t, http.StatusNoContent, call(nil, "", "")) // loopback-only mode
}

// TestUpRequestAnswered503IsNotQueued: a request the front door answered
// 503 (the queue failed) is unknown to the status API, not "queued"
// forever.
func TestUpRequestAnswered503IsNotQueued(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	q, err := queue.OpenLocal(queue.LocalConfig{Path: filepath.Join(dir, "queue.db"), Name: upQueueName})
	require.NoError(t, err)
	store, err := sink.OpenStore(filepath.Join(dir, "results.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	reqs, err := openRequestLog(filepath.Join(dir, "requests.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = reqs.Close() })
	front, err := lambda.New(lambda.Config{
		Queues: map[decision.Route]queue.Sender{decision.RouteCPU: q}, AllowAnonymous: true, RecordFunc: reqs.record,
	})
	require.NoError(t, err)
	api := &upAPI{front: front, store: store, reqs: reqs}
	require.NoError(t, q.Close()) // every Send fails from now on

	req := httptest.NewRequest("POST", "/v1/decisions", strings.NewReader(
		`{"id": "a", "state": "s", "question": "q?", "options": [{"id": "x", "description": ""}, {"id": "y", "description": ""}]}`))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	front.ServeHTTP(rec, req)
	require.Equal(t, http.StatusServiceUnavailable, rec.Code, rec.Body.String())
	var refused lambda.ErrorBody
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &refused))
	require.NotEmpty(t, refused.RequestID)

	get := httptest.NewRequest("GET", "/v1/requests/"+refused.RequestID, nil)
	get.SetPathValue("id", refused.RequestID)
	rec = httptest.NewRecorder()
	api.getRequest(rec, get)
	require.Equal(t, http.StatusNotFound, rec.Code, rec.Body.String())
}
