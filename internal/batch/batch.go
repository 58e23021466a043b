package batch

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/verdict-dev/verdict/decision"
)

// ScoreFunc scores decisions: one result per decision, in order, or an
// error for the whole call (the run then stops; --resume goes on from the
// last line written).
type ScoreFunc func(ctx context.Context, ds []decision.Decision) ([]decision.Result, error)

// Config configures Run.
type Config struct {
	// Score scores one chunk of decisions (engine and policy). Required.
	Score ScoreFunc
	// Limits bound each decision. Defaults to decision.DefaultLimits().
	Limits decision.Limits
	// MaxLineBytes bounds an input line; a longer line becomes an error
	// record. Defaults to 1 MiB.
	MaxLineBytes int
	// Window is how many decisions are held to group lines that share a
	// state, so memory stays flat on any file size. Defaults to 1024.
	Window int
	// Chunk is the most decisions in one Score call. Defaults to 256.
	Chunk int
	// Skip is the number of input lines already done (from Resume): lines
	// numbered Skip or less are read and not scored. Defaults to 0.
	Skip int
	// Errors, when set, receives a copy of every record with a failure
	// (only the failed results). Defaults to none.
	Errors io.Writer
	// Progress, when set, is told after every chunk. Defaults to none.
	Progress Progress
	// TotalBytes is the input size, for progress; 0 when unknown.
	TotalBytes int64
	// NowFunc is the clock. Defaults to time.Now.
	NowFunc func() time.Time
}

func (c *Config) defaults() error {
	if c.Score == nil {
		return errors.New("batch: Config.Score is required")
	}
	if c.Limits == (decision.Limits{}) {
		c.Limits = decision.DefaultLimits()
	}
	if c.MaxLineBytes <= 0 {
		c.MaxLineBytes = 1 << 20
	}
	if c.Window <= 0 {
		c.Window = 1024
	}
	if c.Chunk <= 0 {
		c.Chunk = 256
	}
	if c.NowFunc == nil {
		c.NowFunc = time.Now
	}
	return nil
}

// Record is one output line: the results of one input line, in the order
// of its decisions, or the line's error.
type Record struct {
	// Line is the input line number.
	Line int `json:"line"`
	// ID is the line's id (System One / JevBench case id, or the decision
	// id of a single SemIf decision).
	ID string `json:"id,omitempty"`
	// Format is "semif" or "systemone".
	Format string `json:"format"`
	// Types are the System One question types by question key.
	Types map[string]string `json:"types,omitempty"`
	// Results, one per decision of the line.
	Results []decision.Result `json:"results,omitempty"`
	// Error is set when the line could not be parsed; no result then.
	Error *decision.Error `json:"error,omitempty"`
}

// Summary counts what a run did.
type Summary struct {
	// Lines written this run, LinesFailed of them with an error record.
	Lines, LinesFailed int
	// Resumed is the number of input lines skipped as already done.
	Resumed int
	// Decisions scored this run; Failed of them have an error or an error
	// outcome.
	Decisions, Failed int
	// Status counts decisions by outcome status ("scored" without policy,
	// "error" for engine errors).
	Status map[string]int `json:"status"`
	// Tokens of the prompts scored, evaluated by the engine, and saved by
	// prefix reuse (input − evaluated).
	TokensInput, TokensEvaluated, TokensSaved int64
	// Elapsed wall time.
	Elapsed time.Duration
}

// PerSecond is decisions per second.
func (s Summary) PerSecond() float64 {
	if s.Elapsed <= 0 {
		return 0
	}
	return float64(s.Decisions) / s.Elapsed.Seconds()
}

// Status returns the status a result counts under.
func Status(r *decision.Result) string {
	switch {
	case r.Outcome != nil:
		return string(r.Outcome.Status)
	case r.Error != nil:
		return "error"
	default:
		return "scored"
	}
}

// Failed reports whether a result is an error.
func Failed(r *decision.Result) bool {
	return r.Error != nil || (r.Outcome != nil && r.Outcome.Status == decision.StatusError)
}

type ref struct{ item, dec int }

// Run reads JSONL lines from in, scores them and writes one Record per
// non-blank line to out, in input order. Lines sharing a state are grouped
// within the window, so each state is prefilled once per window. A bad
// line (malformed, over-long, invalid) becomes an error record naming its
// line and fields; every other line is scored. Out is flushed after every
// window. A whole-call scoring error stops the run and is returned, after
// the lines before the failing window were written.
func Run(ctx context.Context, cfg Config, in io.Reader, out io.Writer) (Summary, error) {
	sum := Summary{Status: map[string]int{}}
	if err := cfg.defaults(); err != nil {
		return sum, err
	}
	start := cfg.NowFunc()
	lr := NewLineReader(in, cfg.MaxLineBytes)
	bw := bufio.NewWriter(out)
	var ebw *bufio.Writer
	if cfg.Errors != nil {
		ebw = bufio.NewWriter(cfg.Errors)
	}
	snap := func() Snapshot {
		return Snapshot{Lines: sum.Lines, Decisions: sum.Decisions, Failed: sum.Failed, Bytes: lr.Offset(), TotalBytes: cfg.TotalBytes, Elapsed: cfg.NowFunc().Sub(start)}
	}
	var items []Item
	pending := 0
	eof := false
	for !eof {
		if err := ctx.Err(); err != nil {
			return sum, err
		}
		l, err := lr.Next()
		switch {
		case errors.Is(err, io.EOF):
			eof = true
		case err != nil:
			return sum, fmt.Errorf("batch: read line %d: %w", lr.no+1, err)
		case l.No <= cfg.Skip:
			sum.Resumed++
			continue
		case l.TooLong:
			items = append(items, Item{Line: l.No, Err: TooLongError(l.Len, cfg.MaxLineBytes)})
		case len(trimSpace(l.Data)) == 0:
			continue
		default:
			it := ParseLine(l.No, l.Data, cfg.Limits)
			items = append(items, it)
			pending += len(it.Decisions)
		}
		if pending < cfg.Window && !eof {
			continue
		}
		if err := runWindow(ctx, &cfg, items, &sum, snap); err != nil {
			return sum, err
		}
		for i := range items {
			if err := writeItem(bw, ebw, &items[i], &sum); err != nil {
				return sum, err
			}
		}
		if err := bw.Flush(); err != nil {
			return sum, err
		}
		if ebw != nil {
			if err := ebw.Flush(); err != nil {
				return sum, err
			}
		}
		items, pending = items[:0], 0
		sum.Elapsed = cfg.NowFunc().Sub(start)
		if cfg.Progress != nil {
			cfg.Progress.Update(snap())
		}
	}
	sum.Elapsed = cfg.NowFunc().Sub(start)
	if cfg.Progress != nil {
		cfg.Progress.Finish(snap())
	}
	return sum, nil
}

// results of a window, by item then decision.
type windowResults = [][]decision.Result

// runWindow scores every decision of the window's items, grouped by state
// (groups in order of first appearance), in chunks of at most cfg.Chunk
// decisions that do not split a group unless it is larger than a chunk.
func runWindow(ctx context.Context, cfg *Config, items []Item, sum *Summary, snap func() Snapshot) error {
	for i := range items {
		items[i].results = make([]decision.Result, len(items[i].Decisions))
	}
	for _, chunk := range planChunks(items, chunkLimit{decisions: cfg.Chunk}) {
		ds := make([]decision.Decision, len(chunk))
		for n, r := range chunk {
			ds[n] = items[r.item].Decisions[r.dec]
		}
		rs, err := cfg.Score(ctx, ds)
		if err == nil && len(rs) != len(ds) {
			err = fmt.Errorf("batch: scorer returned %d results for %d decisions", len(rs), len(ds))
		}
		if err != nil {
			return fmt.Errorf("batch: score lines %d..%d: %w", items[chunk[0].item].Line, items[chunk[len(chunk)-1].item].Line, err)
		}
		for n, r := range chunk {
			items[r.item].results[r.dec] = rs[n]
		}
		if cfg.Progress != nil {
			cfg.Progress.Update(snap())
		}
	}
	return nil
}

// chunkLimit bounds a chunk: at most decisions decisions and, when bytes is
// above 0, at most bytes of their sizes (sizeFunc) summed.
type chunkLimit struct {
	decisions int
	bytes     int
	sizeFunc  func(ref) int
}

// planChunks groups the decisions of a window's items by state (groups in
// order of first appearance) and cuts them into chunks within lim that do
// not split a group unless it does not fit in one chunk. The local run
// scores these chunks; --submit sends them, so both group alike.
func planChunks(items []Item, lim chunkLimit) [][]ref {
	var order []string
	groups := map[string][]ref{}
	for i := range items {
		for j := range items[i].Decisions {
			k := string(items[i].Decisions[j].State.Canonical())
			if _, ok := groups[k]; !ok {
				order = append(order, k)
			}
			groups[k] = append(groups[k], ref{i, j})
		}
	}
	size := func(r ref) int {
		if lim.bytes <= 0 {
			return 0
		}
		return lim.sizeFunc(r)
	}
	over := func(n, b int) bool { return n > lim.decisions || (lim.bytes > 0 && b > lim.bytes) }
	var chunks [][]ref
	var cur []ref
	curBytes := 0
	flush := func() {
		if len(cur) > 0 {
			chunks = append(chunks, cur)
			cur, curBytes = nil, 0
		}
	}
	for _, k := range order {
		g := groups[k]
		gb := 0
		for _, r := range g {
			gb += size(r)
		}
		if len(cur) > 0 && over(len(cur)+len(g), curBytes+gb) {
			flush()
		}
		for _, r := range g {
			b := size(r)
			if len(cur) > 0 && over(len(cur)+1, curBytes+b) {
				flush()
			}
			cur = append(cur, r)
			curBytes += b
		}
	}
	flush()
	return chunks
}

func writeItem(bw, ebw *bufio.Writer, it *Item, sum *Summary) error {
	rec := Record{Line: it.Line, ID: it.ID, Format: it.Format, Types: it.Types, Error: it.Err}
	if rec.Format == "" {
		rec.Format = FormatSemIf
	}
	var failed []decision.Result
	for j := range it.results {
		r := &it.results[j]
		r.Line = it.Line
		sum.Decisions++
		sum.Status[Status(r)]++
		if Failed(r) {
			sum.Failed++
			failed = append(failed, *r)
		}
		if r.Tokens != nil {
			sum.TokensInput += int64(r.Tokens.Input)
			if r.Tokens.Evaluated > 0 {
				sum.TokensEvaluated += int64(r.Tokens.Evaluated)
				sum.TokensSaved += int64(r.Tokens.Input - r.Tokens.Evaluated)
			}
		}
	}
	rec.Results = it.results
	sum.Lines++
	if rec.Error != nil {
		sum.LinesFailed++
	}
	if err := writeJSONLine(bw, &rec); err != nil {
		return err
	}
	if ebw != nil && (rec.Error != nil || len(failed) > 0) {
		erec := rec
		erec.Results = failed
		if err := writeJSONLine(ebw, &erec); err != nil {
			return err
		}
	}
	it.results = nil
	return nil
}

func writeJSONLine(w *bufio.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t' || b[0] == '\r') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}
