package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/engine"
	"github.com/verdict-dev/verdict/internal/server"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// The AWS CLI test and http clients leave idle keep-alive readers
		// that net/http closes lazily.
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
	)
}

// fakeScorer stands in for the engine in tests about HTTP shapes,
// admission and errors, where what matters is the wire and not the model
// (the real llama.cpp engine is exercised by the llamacpp-tagged tests).
// Its logits are a deterministic hash of the decision and option, so
// answers are stable and differ between options.
type fakeScorer struct {
	gate    chan struct{} // when non-nil, Score waits for it to close (or ctx); guarded by mu
	err     error         // returned by every call when set
	itemErr error         // when set, every result carries it
	calls   atomic.Int64
	mu      sync.Mutex
	seen    [][]decision.Decision
}

// open lets every waiting and future call through, and returns a function
// that closes the gate again for the next round.
func (f *fakeScorer) open() (reset func()) {
	f.mu.Lock()
	close(f.gate)
	f.mu.Unlock()
	return func() {
		f.mu.Lock()
		f.gate = make(chan struct{})
		f.mu.Unlock()
	}
}

func (f *fakeScorer) Score(ctx context.Context, ds []decision.Decision) ([]decision.Result, error) {
	f.calls.Add(1)
	f.mu.Lock()
	f.seen = append(f.seen, ds)
	gate := f.gate
	f.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if f.err != nil {
		return nil, f.err
	}
	out := make([]decision.Result, len(ds))
	for i := range ds {
		d := &ds[i]
		if f.itemErr != nil {
			out[i] = engine.ErrorResult(d, f.itemErr)
			continue
		}
		logits := make([]float64, len(d.Options))
		for j, o := range d.Options {
			h := fnv.New32a()
			fmt.Fprintf(h, "%s|%s|%s", d.State.Canonical(), d.Question, o.ID)
			logits[j] = float64(h.Sum32()%1000) / 100
		}
		engine.Readout(&out[i], d, logits, 1)
		out[i].Tokens = &decision.Tokens{Input: 10 + len(d.Question)/4, StatePrefix: 5, Evaluated: 10}
		out[i].PromptVersion = "fake-v1"
		out[i].PromptSHA256 = strings.Repeat("ab", 32)
		out[i].Readout = "fake"
	}
	return out, nil
}

// bundle is one test's server.
type bundle struct {
	srv    *server.Server
	scorer *fakeScorer
	url    string // base URL of a real listener on 127.0.0.1
}

func setup(t *testing.T, cfg server.Config) *bundle {
	t.Helper()
	fs, _ := cfg.Scorer.(*fakeScorer)
	if cfg.Scorer == nil {
		fs = &fakeScorer{}
		cfg.Scorer = fs
	}
	if cfg.Model == (decision.ModelIdentity{}) {
		cfg.Model = decision.ModelIdentity{File: "/models/tiny-test.gguf", SHA256: strings.Repeat("0", 64)}
	}
	srv, err := server.New(cfg)
	require.NoError(t, err)
	return &bundle{srv: srv, scorer: fs, url: listen(t, srv)}
}

// listen serves h on 127.0.0.1 until the test ends.
func listen(t *testing.T, h http.Handler) string {
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

// response is an answer read in full.
type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(r.body, &m), "body: %s", r.body)
	return m
}

var client = &http.Client{Timeout: 30 * time.Second}

func do(t *testing.T, method, url string, body []byte, hdr ...string) response {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	require.NoError(t, err)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i+1] == "" {
			req.Header.Del(hdr[i])
		} else {
			req.Header.Set(hdr[i], hdr[i+1])
		}
	}
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

// serveLocal runs one request through the handler without a listener
// (for the fuzz target, where a network round trip per input is too slow).
func serveLocal(h http.Handler, method, path string, body []byte) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

const (
	semIfBare    = `{"id":"support-route","state":"Customer asks to reset a forgotten password and says the reset email never arrived.","question":"Which queue should handle this request?","options":[{"id":"account_access","description":"Account access and authentication support."},{"id":"billing","description":"Billing and payment support."},{"id":"sales","description":"Sales and product evaluation."}]}`
	systemOneAll = `{"model":"jev-latest","state":"The customer wrote: my card was charged twice for the same order.","questions":{
		"is_billing":{"type":"noul","instructions":"Is this about billing?","criteria":{"true":"It is about money.","false":"It is not."}},
		"queue":{"type":"choice","instructions":"Which queue?","criteria":{"billing":"Payments.","tech":null,"sales":"Buying."}},
		"urgency":{"type":"score","instructions":"How urgent is it?","criteria":["Not urgent.","Somewhat urgent.","Urgent."]}}}`
)

// heapInUse returns the live heap after a full collection.
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// syncBuffer is a bytes.Buffer safe for the concurrent writes of a logger.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func newTestLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
