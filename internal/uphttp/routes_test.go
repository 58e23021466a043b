package uphttp

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/internal/auth"
	"github.com/verdict-dev/verdict/internal/listen"
	"github.com/verdict-dev/verdict/internal/queue"
	"github.com/verdict-dev/verdict/internal/results"
	"github.com/verdict-dev/verdict/internal/server"
	"github.com/verdict-dev/verdict/internal/sink"
	"github.com/verdict-dev/verdict/lambda"
	"github.com/verdict-dev/verdict/policy"
)

// TestLookups exercises the result lookups over a real local queue,
// results store and request log (no engine: the record is published to the
// store as a worker would).
func TestLookups(t *testing.T) {
	t.Parallel()
	rig := newUpRig(t, map[string]string{"key-acme-123": "acme", "key-globex-123": "globex"})
	store, mux := rig.store, rig.mux

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
	var st results.Request
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
	require.Equal(t, "partial", st.Status)
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

// upRig is `verdict up`'s HTTP surface over a real local queue, results
// store and request log, without an engine (nothing is scored).
type upRig struct {
	mux   *http.ServeMux
	q     *queue.Local
	store *results.Local
	front *lambda.Handler
}

func newUpRig(t *testing.T, keys map[string]string) *upRig {
	t.Helper()
	dir := t.TempDir()
	q, err := queue.OpenLocal(queue.LocalConfig{Path: filepath.Join(dir, "queue.db"), Name: "cpu"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = q.Close() })
	store, err := results.OpenLocal(dir)
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	holder, err := policy.NewHolder("")
	require.NoError(t, err)
	front, err := lambda.New(lambda.Config{
		Queues: map[decision.Route]queue.Sender{decision.RouteCPU: q}, APIKeys: keys, AllowAnonymous: len(keys) == 0,
		Results: store,
	})
	require.NoError(t, err)
	// The worker's metrics handler needs a worker; this stands in for it.
	fakeMetrics := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("# metrics\n")) })
	return &upRig{mux: Routes(front, fakeMetrics, holder.Handler(), fakeMetrics), q: q, store: store, front: front}
}

func (r *upRig) do(method, path string, hdr ...string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	r.mux.ServeHTTP(rec, req)
	return rec
}

// TestUpRoutesShareOneAuthRule: with keys, every route of `verdict up` but
// /healthz (metrics and the policy admin included) refuses a caller without
// a good key with the same 401, code and message, as the front door.
func TestUpRoutesShareOneAuthRule(t *testing.T) {
	t.Parallel()
	rig := newUpRig(t, map[string]string{"k1": "acme"})
	want := lambda.Unauthorized(auth.ErrNoKey)
	routes := [][2]string{{"POST", "/admin/policy"}, {"GET", "/admin/policy"}, {"GET", "/metrics"},
		{"GET", "/v1/requests/req_1"}, {"GET", "/v1/decisions/a"}, {"POST", "/v1/decisions"}, {"POST", "/v1/systemone/async"}}
	for _, rt := range routes {
		rec := rig.do(rt[0], rt[1], "Content-Type", "application/json")
		require.Equal(t, http.StatusUnauthorized, rec.Code, "%v", rt)
		requireRefusal(t, want, rec, "%v", rt)
		require.Equal(t, auth.Challenge, rec.Header().Get("WWW-Authenticate"), "%v", rt)

		rec = rig.do(rt[0], rt[1], "Content-Type", "application/json", "Authorization", "Bearer k1", "X-Api-Key", "k2")
		requireRefusal(t, lambda.Unauthorized(auth.ErrTwoKeys), rec, "%v", rt)
		rec = rig.do(rt[0], rt[1], "Content-Type", "application/json", "Authorization", "bearer nope")
		requireRefusal(t, lambda.Unauthorized(auth.ErrBadKey), rec, "%v", rt)
	}
	require.Equal(t, http.StatusOK, rig.do("GET", "/healthz").Code, "the health check is open")
	require.Equal(t, http.StatusOK, rig.do("GET", "/metrics", "Authorization", "Bearer k1").Code)
	require.Equal(t, http.StatusOK, rig.do("GET", "/metrics", "X-Api-Key", "k1").Code)
	require.Equal(t, http.StatusOK, rig.do("GET", "/admin/policy", "AUTHORIZATION", "BEARER k1").Code)

	// Without keys (loopback), nothing asks for one, and a key a client
	// always sends is not checked.
	open := newUpRig(t, nil)
	require.Equal(t, http.StatusOK, open.do("GET", "/metrics").Code)
	require.Equal(t, http.StatusOK, open.do("GET", "/admin/policy", "Authorization", "Bearer anything").Code)
}

// TestOne401AcrossEntryPoints: the Lambda front door, `verdict up` and
// `verdict serve` refuse a missing or bad key with the same code and
// message.
func TestOne401AcrossEntryPoints(t *testing.T) {
	t.Parallel()
	keys := map[string]string{"k1": "acme"}
	rig := newUpRig(t, keys)
	srv, err := server.New(server.Config{APIKeys: keys})
	require.NoError(t, err)
	type refusal struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	read := func(b []byte) refusal {
		var r refusal
		require.NoError(t, json.Unmarshal(b, &r), "%s", b)
		return r
	}
	for _, hdr := range [][]string{nil, {"Authorization", "Bearer nope"}, {"X-Api-Key", "nope"}, {"Authorization", "Bearer k1", "X-Api-Key", "k2"}} {
		h := http.Header{"Content-Type": {"application/json"}}
		for i := 0; i+1 < len(hdr); i += 2 {
			h.Set(hdr[i], hdr[i+1])
		}
		fromLambda := rig.front.Handle(context.Background(), &lambda.Request{Method: "POST", Path: lambda.PathDecisions, Header: h, Body: []byte(`{}`)})
		require.Equal(t, http.StatusUnauthorized, fromLambda.Status)
		fromUp := rig.do("GET", "/metrics", hdr...)
		req := httptest.NewRequest("GET", "/metrics", nil)
		req.Header = h
		fromServe := httptest.NewRecorder()
		srv.ServeHTTP(fromServe, req)
		require.Equal(t, http.StatusUnauthorized, fromUp.Code)
		require.Equal(t, http.StatusUnauthorized, fromServe.Code)
		want := read(fromLambda.Body)
		require.EqualValues(t, auth.Code, want.Code)
		require.Equal(t, want, read(fromUp.Body.Bytes()), "up, %v", hdr)
		require.Equal(t, want, read(fromServe.Body.Bytes()), "serve, %v", hdr)
		require.Equal(t, fromLambda.Header.Get("WWW-Authenticate"), fromServe.Header().Get("WWW-Authenticate"))
	}
}

// TestUpRequestAnswered503IsNotQueued: a request the front door answered
// 503 (the queue failed) is unknown to the status API, not "queued"
// forever.
func TestUpRequestAnswered503IsNotQueued(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	q, err := queue.OpenLocal(queue.LocalConfig{Path: filepath.Join(dir, "queue.db"), Name: "cpu"})
	require.NoError(t, err)
	store, err := results.OpenLocal(dir)
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	front, err := lambda.New(lambda.Config{
		Queues: map[decision.Route]queue.Sender{decision.RouteCPU: q}, AllowAnonymous: true, Results: store,
	})
	require.NoError(t, err)
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
	rec = httptest.NewRecorder()
	front.ServeHTTP(rec, get)
	require.Equal(t, http.StatusNotFound, rec.Code, rec.Body.String())
}

// serveUp serves the rig's routes through the listener `verdict up` opens
// (package listen) with cfg, on a random loopback port.
func serveUp(t *testing.T, rig *upRig, cfg listen.Config) string {
	t.Helper()
	hs, err := listen.New(rig.mux, cfg)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { _ = hs.Close() })
	return ln.Addr().String()
}

// upSafetyNet is far beyond the timeouts these tests configure: reaching it
// means a stalled connection was held open.
const upSafetyNet = 20 * time.Second

// TestUpListenerSlowloris: clients that send their headers and then stall
// the body get 408 or a closed connection once the body timeout passes,
// instead of holding their sockets.
func TestUpListenerSlowloris(t *testing.T) {
	t.Parallel()
	addr := serveUp(t, newUpRig(t, nil), listen.Config{HeaderTimeout: 200 * time.Millisecond, BodyTimeout: 300 * time.Millisecond})
	var conns []net.Conn
	for range 20 {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		_, err = io.WriteString(c, "POST /v1/decisions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 4000\r\n\r\n{\"state\": \"")
		require.NoError(t, err)
		conns = append(conns, c)
	}
	for i, c := range conns {
		require.NoError(t, c.SetReadDeadline(time.Now().Add(upSafetyNet)))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			var ne net.Error
			require.False(t, errors.As(err, &ne) && ne.Timeout(), "conn %d held open: %v", i, err)
			continue // closed without an answer
		}
		body, _ := io.ReadAll(resp.Body)
		require.Equal(t, http.StatusRequestTimeout, resp.StatusCode, "conn %d: %s", i, body)
		require.Contains(t, string(body), `"code":"timeout"`)
	}
}

// TestUpListenerConnectionBound: beyond MaxConns open connections, one more
// is answered 503 with Retry-After and closed.
func TestUpListenerConnectionBound(t *testing.T) {
	t.Parallel()
	addr := serveUp(t, newUpRig(t, nil), listen.Config{MaxConns: 5})
	send := func(c net.Conn, br *bufio.Reader) int {
		_, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
		require.NoError(t, err)
		require.NoError(t, c.SetReadDeadline(time.Now().Add(upSafetyNet)))
		resp, err := http.ReadResponse(br, nil)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	for range 5 { // kept alive: each holds a place
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		require.Equal(t, http.StatusOK, send(c, bufio.NewReader(c)))
	}
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	require.Equal(t, http.StatusServiceUnavailable, send(c, bufio.NewReader(c)))
}

// requireRefusal checks that rec is the refusal want, with a request id
// of its own in the body and in X-Request-Id.
func requireRefusal(t *testing.T, want *lambda.Response, rec *httptest.ResponseRecorder, msg ...any) {
	t.Helper()
	var w, got lambda.ErrorBody
	require.NoError(t, json.Unmarshal(want.Body, &w))
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &got), msg...)
	require.Equal(t, w.Code, got.Code, msg...)
	require.Equal(t, w.Message, got.Message, msg...)
	require.NotEmpty(t, got.RequestID, msg...)
	require.Equal(t, got.RequestID, rec.Header().Get("X-Request-Id"), msg...)
}

// TestUpRefusesAnUnauthenticatedBodyUnread: a caller without a key is
// answered 401 from its headers while its body has not arrived, so a
// client with no key cannot hold a connection for the body timeout.
func TestUpRefusesAnUnauthenticatedBodyUnread(t *testing.T) {
	t.Parallel()
	addr := serveUp(t, newUpRig(t, map[string]string{"k1": "acme"}), listen.Config{BodyTimeout: 10 * upSafetyNet})
	for _, path := range []string{"/v1/decisions", "/v1/systemone/async"} {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		_, err = io.WriteString(c, "POST "+path+" HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 4000\r\n\r\n{\"state\": \"")
		require.NoError(t, err)
		require.NoError(t, c.SetReadDeadline(time.Now().Add(upSafetyNet)))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		require.NoError(t, err, "%s: answered only once the body arrived", path)
		body, _ := io.ReadAll(resp.Body)
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "%s", body)
		require.True(t, resp.Close, "%s: the connection is closed, its body unread: %v", path, resp.Header)
		var e lambda.ErrorBody
		require.NoError(t, json.Unmarshal(body, &e))
		require.NotEmpty(t, e.RequestID)
	}
}
