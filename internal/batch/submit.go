package batch

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/verdict-dev/verdict/client"
	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/internal/results"
	"github.com/verdict-dev/verdict/internal/sink"
)

// ErrRefused: the front door refused the caller (401 or 403); the run
// stops.
var ErrRefused = errors.New("batch: the front door refused the request")

// Defaults of SubmitConfig.
const (
	// DefaultSubmitChunk is the most decisions in one request: the front
	// door's batch limit (decision.Limits.MaxDecisions).
	DefaultSubmitChunk = 64
	// DefaultChunkBytes keeps a request under the front door's default
	// body limit (1 MiB) with room for the queue envelope.
	DefaultChunkBytes = 1<<20 - 64<<10
)

// SubmitConfig configures Submit. The embedded Config's Limits,
// MaxLineBytes, Window, Chunk, Skip, Errors, Progress, TotalBytes and
// NowFunc mean what they mean for Run (Chunk defaults to
// DefaultSubmitChunk here); its Score is not used.
type SubmitConfig struct {
	Config
	// URL is the front door's root (`verdict up` or the Lambda), e.g.
	// http://127.0.0.1:8080. Required.
	URL string
	// APIKey is sent as X-Api-Key. Defaults to none.
	APIKey string
	// StatePath is the state file (see StatePath). Required.
	StatePath string
	// Resume continues from the state file when there is one; otherwise a
	// new one replaces it.
	Resume bool
	// ChunkBytes bounds a request body. Defaults to DefaultChunkBytes.
	ChunkBytes int
	// HTTPClient sends the requests. Defaults to a client of its own.
	HTTPClient *http.Client
	// CallTimeout is the deadline of one HTTP attempt. Defaults to 60 s.
	CallTimeout time.Duration
	// Retry is the retry policy of one HTTP call. Defaults to 10 attempts
	// within 5 minutes, honouring a Retry-After of up to 60 s.
	Retry client.Retry
	// RetryFunc, when set, is told of every failed attempt that will be
	// retried (status 0: no answer). Defaults to none.
	RetryFunc func(call string, status int, after time.Duration, err error)
	// PollInterval is the first wait between status lookups; it doubles
	// up to MaxPollInterval while nothing finishes. Defaults to 250 ms.
	PollInterval time.Duration
	// MaxPollInterval caps the wait between lookups. Defaults to 10 s.
	MaxPollInterval time.Duration
	// NotFoundFor is how long a request may stay unknown (404) to the
	// lookup before the run stops. Defaults to 2 minutes.
	NotFoundFor time.Duration
	// SleepFunc waits between lookups. Defaults to a timer.
	SleepFunc func(ctx context.Context, d time.Duration) error
}

func (c *SubmitConfig) defaults() error {
	c.Score = func(context.Context, []decision.Decision) ([]decision.Result, error) {
		return nil, errors.New("unused")
	}
	if c.Chunk <= 0 {
		c.Chunk = DefaultSubmitChunk
	}
	if err := c.Config.defaults(); err != nil {
		return err
	}
	u, err := url.Parse(c.URL)
	if c.URL == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("batch: SubmitConfig.URL: want http(s)://HOST[:PORT], got %q", c.URL)
	}
	c.URL = strings.TrimRight(c.URL, "/")
	if c.StatePath == "" {
		return errors.New("batch: SubmitConfig.StatePath is required")
	}
	if c.ChunkBytes <= 0 {
		c.ChunkBytes = DefaultChunkBytes
	}
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{}
	}
	if c.CallTimeout <= 0 {
		c.CallTimeout = 60 * time.Second
	}
	if c.Retry == (client.Retry{}) {
		c.Retry = client.Retry{MaxAttempts: 10, MaxElapsed: 5 * time.Minute, MaxRetryAfter: time.Minute}
	}
	if c.PollInterval <= 0 {
		c.PollInterval = 250 * time.Millisecond
	}
	if c.MaxPollInterval < c.PollInterval {
		c.MaxPollInterval = max(c.PollInterval, 10*time.Second)
	}
	if c.NotFoundFor <= 0 {
		c.NotFoundFor = 2 * time.Minute
	}
	if c.SleepFunc == nil {
		c.SleepFunc = sleep
	}
	return nil
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}

// SubmitSummary counts what Submit did.
type SubmitSummary struct {
	Summary
	// Chunks the file was cut into; Submitted of them sent this run,
	// Recorded found in the state file, Rejected refused for their content
	// (4xx: their decisions got error results).
	Chunks, Submitted, Recorded, Rejected int
}

// Submit runs a batch file on a fleet through its front door instead of
// a local engine, in two stages that each survive a crash:
//
//  1. Submit: the file is read in windows and cut into chunks exactly as
//     Run groups it (the decisions sharing a state stay together), within
//     Chunk decisions and ChunkBytes; each chunk is one POST
//     /v1/decisions with an Idempotency-Key made of the file's sha256, the
//     chunk's index and its content's sha256, so a resent chunk gets the
//     same request id and is not enqueued twice. Each accepted chunk's
//     request id is appended to the state file before the next is sent.
//  2. Collect: the file is read again, and for each window every chunk's
//     GET /v1/requests/{id} is polled with backoff until it is done; the
//     published records become Records, written in input order as Run
//     writes them.
//
// A bad line becomes an error record without being sent. A chunk answered
// 400, 413 or 422 gives its decisions the front door's error; 401 or 403
// stops the run (ErrRefused). With Skip (from Resume of the output) and
// Resume, a run goes on where a killed one stopped: recorded chunks are
// not sent again and written lines are not written again.
func Submit(ctx context.Context, cfg SubmitConfig, in io.ReadSeeker, out io.Writer) (SubmitSummary, error) {
	sum := SubmitSummary{Summary: Summary{Status: map[string]int{}}}
	if err := cfg.defaults(); err != nil {
		return sum, err
	}
	s := &submitter{cfg: &cfg, sum: &sum, start: cfg.NowFunc(),
		fd: &frontDoor{base: cfg.URL, apiKey: cfg.APIKey, hc: cfg.HTTPClient, retry: cfg.Retry, timeout: cfg.CallTimeout, retryFunc: cfg.RetryFunc}}
	h := sha256.New()
	n, err := io.Copy(h, in)
	if err != nil {
		return sum, fmt.Errorf("batch: read input: %w", err)
	}
	head := submitHeader{URL: cfg.URL, SHA256: hex.EncodeToString(h.Sum(nil)), Bytes: n,
		Plan: SubmitPlan{Window: cfg.Window, Chunk: cfg.Chunk, ChunkBytes: cfg.ChunkBytes, MaxLineBytes: cfg.MaxLineBytes, MaxStateBytes: cfg.Limits.MaxStateBytes}}
	if s.state, err = openOrCreateState(&cfg, head); err != nil {
		return sum, err
	}
	defer s.state.Close()
	if !s.state.complete {
		if err := s.pass(ctx, in, s.submitWindow); err != nil {
			return sum, err
		}
		if err := s.state.record(submitEntry{Complete: true, Chunk: s.chunks}); err != nil {
			return sum, err
		}
	}
	s.stage, s.total = StageCollect, s.state.total
	s.bw = bufio.NewWriter(out)
	if cfg.Errors != nil {
		s.ebw = bufio.NewWriter(cfg.Errors)
	}
	if err := s.pass(ctx, in, s.collectWindow); err != nil {
		return sum, err
	}
	sum.Chunks = s.chunks
	sum.Elapsed = cfg.NowFunc().Sub(s.start)
	if cfg.Progress != nil {
		cfg.Progress.Finish(s.snap())
	}
	return sum, nil
}

// openOrCreateState resumes the state file when asked to and it matches
// the input and the plan, else starts a new one.
func openOrCreateState(cfg *SubmitConfig, head submitHeader) (*submitState, error) {
	if cfg.Resume {
		st, err := loadState(cfg.StatePath)
		if err != nil {
			return nil, fmt.Errorf("batch: resume: %w", err)
		}
		if st != nil {
			old := st.header
			var bad string
			switch {
			case old.SHA256 != head.SHA256 || old.Bytes != head.Bytes:
				bad = fmt.Sprintf("another input (%d bytes, sha256 %.12s; this one: %d bytes, sha256 %.12s)", old.Bytes, old.SHA256, head.Bytes, head.SHA256)
			case old.URL != head.URL:
				bad = fmt.Sprintf("another front door (%s)", old.URL)
			case old.Plan != head.Plan:
				bad = fmt.Sprintf("other chunking flags (%+v; now %+v)", old.Plan, head.Plan)
			}
			if bad != "" {
				st.Close()
				return nil, fmt.Errorf("batch: resume: %s was written for %s; run with the same file and flags, or without --resume to start over", cfg.StatePath, bad)
			}
			return st, nil
		}
	}
	st, err := createState(cfg.StatePath, head)
	if err != nil {
		return nil, fmt.Errorf("batch: state file: %w", err)
	}
	return st, nil
}

// submitter holds one Submit run.
type submitter struct {
	cfg      *SubmitConfig
	fd       *frontDoor
	state    *submitState
	sum      *SubmitSummary
	start    time.Time
	stage    string
	chunks   int // chunks planned so far in this pass
	done     int // chunks sent (submit) or collected (collect) in this pass
	total    int // chunks of the file, once known
	bytes    int64
	bw, ebw  *bufio.Writer
	notFound map[string]time.Time
}

func (s *submitter) snap() Snapshot {
	total := s.total
	if s.stage == StageSubmit {
		total = s.chunks
	}
	return Snapshot{Lines: s.sum.Lines, Decisions: s.sum.Decisions, Failed: s.sum.Failed, Bytes: s.bytes,
		TotalBytes: s.cfg.TotalBytes, Elapsed: s.cfg.NowFunc().Sub(s.start), Stage: s.stage, Chunks: total, ChunksDone: s.done}
}

func (s *submitter) progress() {
	if s.cfg.Progress != nil {
		s.cfg.Progress.Update(s.snap())
	}
}

// pass reads the whole input in windows, as Run does but without
// skipping (the chunks must not depend on where a run resumed), and hands
// each window and its chunks to step.
func (s *submitter) pass(ctx context.Context, in io.ReadSeeker, step func(context.Context, []Item, []*wireChunk) error) error {
	if s.stage == "" {
		s.stage = StageSubmit
	}
	s.chunks, s.done = 0, 0
	if _, err := in.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("batch: rewind input: %w", err)
	}
	wr := windowReader{lr: NewLineReader(in, s.cfg.MaxLineBytes), cfg: &s.cfg.Config}
	for {
		if err := ctx.Err(); err != nil {
			return context.Cause(ctx)
		}
		items, err := wr.next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		s.bytes = wr.lr.Offset()
		chunks, err := s.plan(items)
		if err != nil {
			return err
		}
		if err := step(ctx, items, chunks); err != nil {
			return err
		}
	}
}

// windowReader yields the items of the input window by window: lines are
// added until the window holds cfg.Window decisions, as in Run.
type windowReader struct {
	lr  *LineReader
	cfg *Config
	eof bool
}

func (w *windowReader) next() ([]Item, error) {
	var items []Item
	pending := 0
	for !w.eof && pending < w.cfg.Window {
		l, err := w.lr.Next()
		switch {
		case errors.Is(err, io.EOF):
			w.eof = true
		case err != nil:
			return nil, fmt.Errorf("batch: read line %d: %w", w.lr.no+1, err)
		case l.TooLong:
			items = append(items, Item{Line: l.No, Err: TooLongError(l.Len, w.cfg.MaxLineBytes)})
		case len(trimSpace(l.Data)) == 0:
		default:
			it := ParseLine(l.No, l.Data, w.cfg.Limits)
			items = append(items, it)
			pending += len(it.Decisions)
		}
	}
	if len(items) == 0 {
		return nil, io.EOF
	}
	return items, nil
}

// wireChunk is one request: its decisions (refs into the window's items),
// the body that carries them and its Idempotency-Key.
type wireChunk struct {
	index       int
	refs        []ref
	first, last int // lowest and highest input line in the chunk
	body        []byte
	key         string
}

// wireID is the id a decision is sent under: its line and position, so
// ids are unique within a request whatever the lines' own ids are. Results
// get the line's own id back.
func wireID(line, dec int) string { return strconv.Itoa(line) + "." + strconv.Itoa(dec) }

// plan cuts a window into chunks as Run does, within the decision and
// byte bounds, and builds each chunk's body and key.
func (s *submitter) plan(items []Item) ([]*wireChunk, error) {
	enc := make([][][]byte, len(items))
	for i := range items {
		enc[i] = make([][]byte, len(items[i].Decisions))
		for j, d := range items[i].Decisions {
			d.ID = wireID(items[i].Line, j)
			b, err := marshalNoEscape(d)
			if err != nil {
				return nil, fmt.Errorf("batch: encode line %d: %w", items[i].Line, err)
			}
			enc[i][j] = b
		}
	}
	const envelope = len(`{"decisions":[]}`)
	lim := chunkLimit{decisions: s.cfg.Chunk, bytes: max(s.cfg.ChunkBytes-envelope, 1),
		sizeFunc: func(r ref) int { return len(enc[r.item][r.dec]) + 1 }}
	var out []*wireChunk
	for _, refs := range planChunks(items, lim) {
		c := &wireChunk{index: s.chunks, refs: refs, first: items[refs[0].item].Line}
		s.chunks++
		body := []byte(`{"decisions":[`)
		for n, r := range refs {
			if n > 0 {
				body = append(body, ',')
			}
			body = append(body, enc[r.item][r.dec]...)
			c.first, c.last = min(c.first, items[r.item].Line), max(c.last, items[r.item].Line)
		}
		c.body = append(body, "]}"...)
		sum := sha256.Sum256(c.body)
		c.key = fmt.Sprintf("verdict-batch-%.32s-%d-%s", s.state.header.SHA256, c.index, hex.EncodeToString(sum[:8]))
		out = append(out, c)
	}
	return out, nil
}

func marshalNoEscape(v any) ([]byte, error) {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return []byte(strings.TrimSuffix(b.String(), "\n")), nil
}

// submitWindow sends the window's chunks that the state file does not
// hold and that have a line still to write.
func (s *submitter) submitWindow(ctx context.Context, _ []Item, chunks []*wireChunk) error {
	for _, c := range chunks {
		if e, ok := s.state.chunks[c.index]; ok {
			if e.Key != c.key {
				return fmt.Errorf("batch: resume: chunk %d is not the one the state file recorded (key %s, now %s); start over without --resume", c.index, e.Key, c.key)
			}
			s.sum.Recorded++
			s.done++
			continue
		}
		if c.last <= s.cfg.Skip {
			continue // every line of it is in the output already
		}
		if err := s.send(ctx, c); err != nil {
			return err
		}
		s.done++
		s.progress()
	}
	return nil
}

// send posts one chunk and records the answer: its request id, or the
// error its decisions get when the front door refused its content.
func (s *submitter) send(ctx context.Context, c *wireChunk) error {
	e := submitEntry{Chunk: c.index, Key: c.key, Lines: [2]int{c.first, c.last}, Decisions: len(c.refs)}
	a, err := s.fd.post(ctx, c.body, c.key)
	if ae, ok := refused(err); ok {
		return fmt.Errorf("%w: HTTP %d %s: %s (check --api-key or VERDICT_API_KEY, and the fleet's policy)", ErrRefused, ae.Status, ae.Code, ae.Message)
	}
	if ae, ok := chunkError(err); ok {
		code := decision.Code(ae.Code)
		if code == "" {
			code = decision.CodeInvalid
		}
		e.Error = &decision.Error{Code: code, Message: fmt.Sprintf("the front door refused lines %d..%d (HTTP %d): %s", c.first, c.last, ae.Status, ae.Message), Fields: ae.Fields}
		s.sum.Rejected++
	} else if err != nil {
		return fmt.Errorf("batch: submit chunk %d (lines %d..%d): %w; run again with --resume", c.index, c.first, c.last, err)
	} else {
		e.RequestID = a.RequestID
		s.sum.Submitted++
	}
	return s.state.record(e)
}

// collectWindow waits for the results of the window's chunks that hold a
// line still to write, then writes those lines in order.
func (s *submitter) collectWindow(ctx context.Context, items []Item, chunks []*wireChunk) error {
	for i := range items {
		items[i].results = make([]decision.Result, len(items[i].Decisions))
		if items[i].Line <= s.cfg.Skip {
			s.sum.Resumed++
		}
	}
	var pending []*wireChunk
	for _, c := range chunks {
		if c.last <= s.cfg.Skip {
			s.done++
			continue
		}
		if _, ok := s.state.chunks[c.index]; !ok {
			// Not sent: its lines were in the output when the submit stage
			// ran, and have been lost since. Send it now.
			if err := s.send(ctx, c); err != nil {
				return err
			}
		}
		pending = append(pending, c)
	}
	if err := s.await(ctx, items, pending); err != nil {
		return err
	}
	for i := range items {
		if items[i].Line <= s.cfg.Skip {
			continue
		}
		if err := writeItem(s.bw, s.ebw, &items[i], &s.sum.Summary); err != nil {
			return err
		}
	}
	if err := s.bw.Flush(); err != nil {
		return err
	}
	if s.ebw != nil {
		if err := s.ebw.Flush(); err != nil {
			return err
		}
	}
	s.sum.Elapsed = s.cfg.NowFunc().Sub(s.start)
	s.progress()
	return nil
}

// await polls the chunks' requests until each is done, waiting
// PollInterval between rounds, doubled up to MaxPollInterval while no
// chunk finishes.
func (s *submitter) await(ctx context.Context, items []Item, pending []*wireChunk) error {
	wait := s.cfg.PollInterval
	for len(pending) > 0 {
		var left []*wireChunk
		for _, c := range pending {
			done, err := s.collect(ctx, items, c)
			if err != nil {
				return err
			}
			if !done {
				left = append(left, c)
				continue
			}
			s.done++
			wait = s.cfg.PollInterval
		}
		pending = left
		if len(pending) == 0 {
			return nil
		}
		s.progress()
		if err := s.cfg.SleepFunc(ctx, wait); err != nil {
			return err
		}
		wait = min(2*wait, s.cfg.MaxPollInterval)
	}
	return nil
}

// collect looks up one chunk and, when every decision of it is done, puts
// the results in the items.
func (s *submitter) collect(ctx context.Context, items []Item, c *wireChunk) (bool, error) {
	e := s.state.chunks[c.index]
	if e.Error != nil {
		for n, r := range c.refs {
			items[r.item].results[r.dec] = decision.Result{ID: items[r.item].Decisions[r.dec].ID, Error: decisionError(e.Error, n)}
		}
		return true, nil
	}
	req, err := s.fd.request(ctx, e.RequestID)
	if ae, ok := refused(err); ok {
		return false, fmt.Errorf("%w: GET /v1/requests/%s: HTTP %d: %s (check --api-key or VERDICT_API_KEY)", ErrRefused, e.RequestID, ae.Status, ae.Message)
	}
	var ae *client.APIError
	if errors.As(err, &ae) && ae.Status == http.StatusNotFound {
		// Not known yet (an eventually consistent store), or a front door
		// without lookups: wait a while, then say so.
		if s.notFound == nil {
			s.notFound = map[string]time.Time{}
		}
		first, seen := s.notFound[e.RequestID]
		now := s.cfg.NowFunc()
		if !seen {
			s.notFound[e.RequestID] = now
		} else if now.Sub(first) > s.cfg.NotFoundFor {
			return false, fmt.Errorf("batch: request %s (chunk %d, lines %d..%d) has been unknown to GET /v1/requests for %s: does %s serve the lookups?", e.RequestID, c.index, c.first, c.last, s.cfg.NotFoundFor, s.cfg.URL)
		}
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("batch: collect chunk %d (lines %d..%d): %w; run again with --resume", c.index, c.first, c.last, err)
	}
	byID := make(map[string]*results.Decision, len(req.Decisions))
	for i := range req.Decisions {
		byID[req.Decisions[i].ID] = &req.Decisions[i]
	}
	// Every decision must be there and done, whatever the request's own
	// status says ("partial", or "done" over a part of it).
	got := make([]decision.Result, len(c.refs))
	for n, r := range c.refs {
		d := byID[wireID(items[r.item].Line, r.dec)]
		if d == nil || d.Status != results.StatusDone || len(d.Record) == 0 {
			return false, nil
		}
		var rec sink.Record
		if err := json.Unmarshal(d.Record, &rec); err != nil {
			return false, fmt.Errorf("batch: request %s decision %s: bad record: %w", e.RequestID, d.ID, err)
		}
		got[n] = rec.Result
		got[n].ID = items[r.item].Decisions[r.dec].ID
	}
	for n, r := range c.refs {
		items[r.item].results[r.dec] = got[n]
	}
	return true, nil
}

// decisionError is the error the n-th decision of a refused chunk gets:
// the front door's, with the field problems of that decision (paths made
// relative to it) when the answer named any.
func decisionError(ce *decision.Error, n int) *decision.Error {
	e := &decision.Error{Code: ce.Code, Message: ce.Message, Retryable: ce.Code.Retryable()}
	prefix := "decisions[" + strconv.Itoa(n) + "]"
	for _, f := range ce.Fields {
		if rest, ok := strings.CutPrefix(f.Path, prefix); ok && (rest == "" || rest[0] == '.' || rest[0] == '[') {
			f.Path = strings.TrimPrefix(rest, ".")
			e.Fields = append(e.Fields, f)
		}
	}
	return e
}
