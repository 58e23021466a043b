package batch_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/client"
	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/internal/batch"
	"github.com/verdict-dev/verdict/internal/results"
	"github.com/verdict-dev/verdict/internal/sink"
)

// fakeFrontDoor is a fake of the front door's HTTP API (POST
// /v1/decisions, GET /v1/requests/{id}); the real one, `verdict up`, is
// exercised by cmd/verdict's TestBatchSubmitKill9ThenResume. It derives a
// request id from the Idempotency-Key and enqueues a key once, counts
// POSTs per key, scores like fakeScorer, and answers "queued" for the
// first Queued lookups of each request.
type fakeFrontDoor struct {
	*httptest.Server
	APIKey string
	// Fail503 answers the next POSTs 503 with Retry-After: 7.
	Fail503 int
	// Queued is how many lookups of a request answer "queued".
	Queued int
	// RejectState answers 422 to a body with a decision of this state.
	RejectState string

	mu       sync.Mutex
	posts    map[string]int // by Idempotency-Key
	enqueued map[string]int // by Idempotency-Key
	keys     []string       // in order of first POST
	reqs     map[string][]decision.Decision
	lookups  map[string]int
	order    [][]decision.Decision // enqueued requests in order
}

func newFakeFrontDoor(t *testing.T) *fakeFrontDoor {
	f := &fakeFrontDoor{posts: map[string]int{}, enqueued: map[string]int{}, reqs: map[string][]decision.Decision{}, lookups: map[string]int{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/decisions", f.post)
	mux.HandleFunc("GET /v1/requests/{id}", f.get)
	f.Server = httptest.NewServer(mux)
	t.Cleanup(f.Close)
	return f
}

func answer(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (f *fakeFrontDoor) post(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.APIKey != "" && r.Header.Get("X-Api-Key") != f.APIKey {
		answer(w, 401, decision.ErrorBody{Code: decision.CodeUnauthorized, Message: "missing or invalid API key"})
		return
	}
	key := r.Header.Get("Idempotency-Key")
	if f.posts[key] == 0 {
		f.keys = append(f.keys, key)
	}
	f.posts[key]++
	if f.Fail503 > 0 {
		f.Fail503--
		w.Header().Set("Retry-After", "7")
		answer(w, 503, decision.ErrorBody{Code: decision.CodeUnavailable, Message: "the queue is unavailable"})
		return
	}
	body, _ := io.ReadAll(r.Body)
	ds, _, err := decision.ParseSemIf(body, decision.Limits{})
	if err != nil {
		e := decision.ErrorFor(err, decision.CodeInvalid)
		answer(w, e.Code.Status(), decision.ErrorBody{Code: e.Code, Message: e.Message, Fields: e.Fields})
		return
	}
	for i, d := range ds {
		if f.RejectState != "" && d.State.Text == f.RejectState {
			answer(w, 422, decision.ErrorBody{Code: decision.CodeInvalid, Message: "decisions[" + fmt.Sprint(i) + "].state: refused by the fake",
				Fields: []decision.FieldError{{Path: fmt.Sprintf("decisions[%d].state", i), Message: "refused by the fake"}}})
			return
		}
	}
	sum := sha256.Sum256([]byte(key))
	id := "req_" + hex.EncodeToString(sum[:8])
	if f.enqueued[key] == 0 { // a resent key is the same request, not enqueued again
		f.reqs[id] = ds
		f.order = append(f.order, ds)
		f.enqueued[key]++
	}
	answer(w, 202, map[string]any{"request_id": id, "status": "queued"})
}

func (f *fakeFrontDoor) get(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	id := r.PathValue("id")
	ds, ok := f.reqs[id]
	if !ok {
		answer(w, 404, decision.ErrorBody{Code: decision.CodeNotFound, Message: "no request " + id})
		return
	}
	f.lookups[id]++
	st := results.Request{RequestID: id, Status: "queued", Total: len(ds)}
	done := f.lookups[id] > f.Queued
	for _, d := range ds {
		sd := results.Decision{RequestID: id, ID: d.ID, Status: "queued"}
		if done {
			rec := sink.Record{RequestID: id, DecisionID: d.ID, Status: "scored", Result: fakeResult(d)}
			sd.Status, sd.Record = "done", must(rec.Marshal())
			st.Done++
		}
		st.Decisions = append(st.Decisions, sd)
	}
	if done {
		st.Status = "done"
	}
	answer(w, 200, st)
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

// fakeResult scores as fakeScorer does.
func fakeResult(d decision.Decision) decision.Result {
	lg := make([]float64, len(d.Options))
	for j := range lg {
		lg[j] = -float64(j)
	}
	return decision.Result{ID: d.ID, OptionIDs: d.OptionIDs(), OptionLogits: lg, Chosen: d.Options[0].ID, Tokens: &decision.Tokens{Input: 10, Evaluated: 4}}
}

// keyCounts returns the POSTs per key, in order of first POST.
func (f *fakeFrontDoor) keyCounts() ([]string, []int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var n []int
	for _, k := range f.keys {
		n = append(n, f.posts[k])
	}
	return append([]string(nil), f.keys...), n
}

// submitInput is a file of every kind of line: shared states (interleaved),
// a System One line, bad and over-long lines, a blank line.
func submitInput(n int) string {
	var b strings.Builder
	for i := range n {
		switch i {
		case 3:
			b.WriteString(`{"id":"bad","state":` + "\n")
		case 5:
			b.WriteString(semif("long", strings.Repeat("long ", 400)) + "\n")
		case 7:
			b.WriteString("\n")
		case 9:
			b.WriteString(`{"id":"c1","state":"s1","questions":{"q1":{"type":"noul","instructions":"Is it?"},"q2":{"type":"choice","instructions":"Which?","criteria":{"x":"X.","y":"Y."}}}}` + "\n")
		}
		b.WriteString(semif(fmt.Sprintf("d%d", i), fmt.Sprintf("s%d", i%3)) + "\n")
	}
	return b.String()
}

// submitRun is one Submit of in to dir/out.jsonl; it returns the output.
type submitRun struct {
	t       *testing.T
	fd      *fakeFrontDoor
	dir, in string
	cfg     batch.SubmitConfig
}

func newSubmitRun(t *testing.T, fd *fakeFrontDoor, in string) *submitRun {
	dir := t.TempDir()
	path := filepath.Join(dir, "in.jsonl")
	require.NoError(t, os.WriteFile(path, []byte(in), 0o644))
	out := filepath.Join(dir, "out.jsonl")
	return &submitRun{t: t, fd: fd, dir: dir, in: path, cfg: batch.SubmitConfig{
		Config: batch.Config{MaxLineBytes: 1000, Window: 8, Chunk: 4},
		URL:    fd.URL, StatePath: batch.StatePath(out),
		Retry:     client.Retry{BaseDelay: time.Millisecond, MaxRetryAfter: time.Millisecond},
		SleepFunc: func(context.Context, time.Duration) error { return nil },
	}}
}

func (r *submitRun) out() string { return filepath.Join(r.dir, "out.jsonl") }

// run submits, resuming when resume is set as `verdict batch --resume`
// does (Resume of the output, then append).
func (r *submitRun) run(ctx context.Context, resume bool) (batch.SubmitSummary, error) {
	cfg := r.cfg
	flags := os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	if resume {
		skip, err := batch.Resume(r.out())
		require.NoError(r.t, err)
		cfg.Skip, cfg.Resume = skip, true
		flags = os.O_WRONLY | os.O_CREATE | os.O_APPEND
	}
	in, err := os.Open(r.in)
	require.NoError(r.t, err)
	defer in.Close()
	out, err := os.OpenFile(r.out(), flags, 0o644)
	require.NoError(r.t, err)
	defer out.Close()
	return batch.Submit(ctx, cfg, in, out)
}

// localRun is batch.Run of the same input with fakeScorer.
func localRun(t *testing.T, in string, cfg batch.Config) ([]byte, *fakeScorer) {
	f := &fakeScorer{}
	cfg.Score = f.score
	var out bytes.Buffer
	_, err := batch.Run(context.Background(), cfg, strings.NewReader(in), &out)
	require.NoError(t, err)
	return out.Bytes(), f
}

func TestSubmitWritesWhatALocalRunWrites(t *testing.T) {
	t.Parallel()
	fd := newFakeFrontDoor(t)
	fd.Queued = 2
	in := submitInput(30)
	r := newSubmitRun(t, fd, in)
	var errs bytes.Buffer
	r.cfg.Errors = &errs
	sum, err := r.run(t.Context(), false)
	require.NoError(t, err)
	want, local := localRun(t, in, batch.Config{MaxLineBytes: 1000, Window: 8, Chunk: 4})
	got, err := os.ReadFile(r.out())
	require.NoError(t, err)
	require.Equal(t, string(want), string(got), "the same records, in input order, as a local run")
	require.Equal(t, 33, sum.Lines)
	require.Equal(t, 2, sum.LinesFailed, "the malformed and the over-long line, not sent")
	require.Len(t, records(t, errs.Bytes()), 2)

	// The requests are the local run's chunks: states kept together.
	fd.mu.Lock()
	defer fd.mu.Unlock()
	require.Len(t, fd.order, len(local.calls))
	for i, ds := range fd.order {
		require.Len(t, ds, len(local.calls[i]), "request %d", i)
	}
	require.Equal(t, len(local.calls), sum.Chunks)
	require.Equal(t, sum.Chunks, sum.Submitted)
}

func TestSubmitChunksKeepStatesTogetherWithinBounds(t *testing.T) {
	t.Parallel()
	fd := newFakeFrontDoor(t)
	var in strings.Builder
	for i := range 24 { // states s0..s3 interleaved, 6 decisions each
		in.WriteString(semif(fmt.Sprintf("d%d", i), fmt.Sprintf("state %d", i%4)) + "\n")
	}
	r := newSubmitRun(t, fd, in.String())
	r.cfg.Window, r.cfg.Chunk, r.cfg.ChunkBytes = 24, 12, 1400
	_, err := r.run(t.Context(), false)
	require.NoError(t, err)
	fd.mu.Lock()
	defer fd.mu.Unlock()
	seen := map[string]int{}
	for i, ds := range fd.order {
		require.LessOrEqual(t, len(ds), 12)
		body, _ := json.Marshal(map[string]any{"decisions": ds})
		require.LessOrEqual(t, len(body), 1400, "request %d", i)
		for _, d := range ds {
			if j, ok := seen[d.State.Text]; ok {
				require.Equal(t, i, j, "the decisions of %q are split", d.State.Text)
			}
			seen[d.State.Text] = i
		}
	}
	require.Len(t, fd.order, 4, "one state per request: two do not fit in 1400 bytes")
}

func TestSubmitRetries503HonouringRetryAfterAndBacksOffPolling(t *testing.T) {
	t.Parallel()
	fd := newFakeFrontDoor(t)
	fd.Fail503, fd.Queued = 2, 3
	r := newSubmitRun(t, fd, semif("a", "s")+"\n")
	var retries []string
	var waits []time.Duration
	r.cfg.RetryFunc = func(call string, status int, after time.Duration, _ error) {
		retries = append(retries, fmt.Sprintf("%s %d %s", call, status, after))
	}
	r.cfg.SleepFunc = func(_ context.Context, d time.Duration) error { waits = append(waits, d); return nil }
	_, err := r.run(t.Context(), false)
	require.NoError(t, err)
	require.Equal(t, []string{"POST /v1/decisions 503 7s", "POST /v1/decisions 503 7s"}, retries)
	keys, n := fd.keyCounts()
	require.Len(t, keys, 1)
	require.Equal(t, []int{3}, n, "retried with the same Idempotency-Key")
	require.Equal(t, 1, fd.enqueued[keys[0]])
	require.Equal(t, []time.Duration{250 * time.Millisecond, 500 * time.Millisecond, time.Second}, waits)
	require.Len(t, records(t, must(os.ReadFile(r.out()))), 1)
}

func TestSubmitIdempotencyKeysAreStableAcrossRuns(t *testing.T) {
	t.Parallel()
	fd := newFakeFrontDoor(t)
	in := submitInput(20)
	r := newSubmitRun(t, fd, in)
	_, err := r.run(t.Context(), false)
	require.NoError(t, err)
	keys1, _ := fd.keyCounts()
	_, err = r.run(t.Context(), false) // a new run of the same file: the same keys
	require.NoError(t, err)
	keys2, n := fd.keyCounts()
	require.Equal(t, keys1, keys2)
	sum := sha256.Sum256([]byte(in))
	for i, k := range keys1 {
		require.Contains(t, k, hex.EncodeToString(sum[:])[:32], "the file's identity")
		require.Contains(t, k, fmt.Sprintf("-%d-", i), "the chunk's index")
		require.Equal(t, 2, n[i])
		require.Equal(t, 1, fd.enqueued[k], "never enqueued twice")
	}
}

// crashAt cancels the run once a snapshot matches: the state is then
// what a kill at that point leaves.
type crashAt struct {
	cancel context.CancelFunc
	when   func(batch.Snapshot) bool
}

func (c *crashAt) Update(s batch.Snapshot) {
	if c.when(s) {
		c.cancel()
	}
}
func (c *crashAt) Finish(batch.Snapshot) {}

func TestSubmitResumeAfterACrashSendsNoChunkTwice(t *testing.T) {
	t.Parallel()
	in := submitInput(40)
	want, _ := localRun(t, in, batch.Config{MaxLineBytes: 1000, Window: 8, Chunk: 4})
	for _, stage := range []string{batch.StageSubmit, batch.StageCollect} {
		t.Run(stage, func(t *testing.T) {
			t.Parallel()
			fd := newFakeFrontDoor(t)
			r := newSubmitRun(t, fd, in)
			ctx, cancel := context.WithCancel(t.Context())
			r.cfg.Progress = &crashAt{cancel: cancel, when: func(s batch.Snapshot) bool {
				return s.Stage == stage && s.ChunksDone >= 5
			}}
			_, err := r.run(ctx, false)
			require.ErrorIs(t, err, context.Canceled)
			written := len(bytes.Split(bytes.TrimSpace(must(os.ReadFile(r.out()))), []byte("\n")))
			if stage == batch.StageCollect {
				require.Greater(t, written, 1, "killed after some lines were written")
			}
			// A kill -9 tears the last lines of both files.
			appendTo(t, r.out(), `{"line":99,"id":"torn`)
			appendTo(t, r.cfg.StatePath, `{"chunk":77,"key":"to`)

			r.cfg.Progress = nil
			sum, err := r.run(t.Context(), true)
			require.NoError(t, err)
			got := must(os.ReadFile(r.out()))
			require.Equal(t, string(want), string(got), "each line once, in input order")
			_, n := fd.keyCounts()
			for i, c := range n {
				require.Equal(t, 1, c, "chunk %d sent once", i)
			}
			if stage == batch.StageCollect {
				require.Equal(t, 0, sum.Submitted)
				require.Positive(t, sum.Resumed)
			}
		})
	}
}

func appendTo(t *testing.T, path, s string) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = f.WriteString(s)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

func TestSubmitRefusedChunkBecomesErrorRecordsAndABadKeyStops(t *testing.T) {
	t.Parallel()
	fd := newFakeFrontDoor(t)
	fd.RejectState = "poison"
	in := semif("a", "s1") + "\n" + semif("b", "poison") + "\n" + semif("c", "s3") + "\n"
	r := newSubmitRun(t, fd, in)
	r.cfg.Chunk = 2 // a and b in one chunk, c in the next
	sum, err := r.run(t.Context(), false)
	require.NoError(t, err)
	require.Equal(t, 1, sum.Rejected)
	recs := records(t, must(os.ReadFile(r.out())))
	require.Len(t, recs, 3)
	for i, rec := range recs[:2] {
		e := rec.Results[0].Error
		require.NotNil(t, e, "line %d", i+1)
		require.EqualValues(t, "invalid", e.Code)
		require.Contains(t, e.Message, "(HTTP 422): decisions[1].state: refused by the fake")
	}
	require.Empty(t, recs[0].Results[0].Error.Fields, "a's own fields are fine")
	require.Equal(t, []decision.FieldError{{Path: "state", Message: "refused by the fake"}}, recs[1].Results[0].Error.Fields)
	require.Nil(t, recs[2].Results[0].Error)
	require.Equal(t, 2, sum.Failed)

	fd.APIKey = "the-key"
	r2 := newSubmitRun(t, fd, in)
	r2.cfg.APIKey = "wrong"
	_, err = r2.run(t.Context(), false)
	require.ErrorIs(t, err, batch.ErrRefused)
	require.ErrorContains(t, err, "HTTP 401")
	r2.cfg.APIKey = "the-key"
	_, err = r2.run(t.Context(), true)
	require.NoError(t, err)
}

func TestSubmitResumeRefusesAnotherFile(t *testing.T) {
	t.Parallel()
	fd := newFakeFrontDoor(t)
	r := newSubmitRun(t, fd, submitInput(10))
	_, err := r.run(t.Context(), false)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(r.in, []byte(submitInput(11)), 0o644))
	_, err = r.run(t.Context(), true)
	require.ErrorContains(t, err, "was written for another input")
}
