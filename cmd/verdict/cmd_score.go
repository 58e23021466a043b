package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/engine"
	"github.com/verdict-dev/verdict/internal/batch"
	"github.com/verdict-dev/verdict/policy"
)

func init() {
	register(command{name: "score", summary: "score SemIf decisions from JSONL (one per line) to JSONL results", runFunc: runScore})
}

// scoreChunk is how many lines are scored together: enough for the engine
// to share state prefixes and batch, bounded so memory stays flat.
const scoreChunk = 256

func runScore(ctx context.Context, args []string) error {
	fs := newFlagSet("score", "score [flags] [FILE|-]")
	var ef engineFlags
	var lf logFlags
	ef.register(fs)
	lf.register(fs)
	policyFile := fs.String("policy", "", "policy file to apply to each result (see docs/policy.md)")
	maxLine := fs.Int("max-line-bytes", 1<<20, "longest accepted input line")
	maxState := fs.Int("max-state-bytes", decision.DefaultLimits().MaxStateBytes, "largest accepted state, in bytes")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := lf.setup(); err != nil {
		return err
	}
	if fs.NArg() > 1 {
		return fmt.Errorf("score: want at most one input FILE, got %d", fs.NArg())
	}
	in := io.Reader(os.Stdin)
	if fs.NArg() == 1 && fs.Arg(0) != "-" {
		f, err := os.Open(fs.Arg(0))
		if err != nil {
			return err
		}
		defer f.Close()
		in = f
	}
	pol, err := loadPolicy(*policyFile)
	if err != nil {
		return err
	}
	eng, sc, err := ef.openTuned("/opt/ml/model")
	if err != nil {
		return err
	}
	defer eng.Close()
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	if *maxState < 1 {
		return fmt.Errorf("flag --max-state-bytes: must be at least 1, got %d", *maxState)
	}
	if *maxState > *maxLine {
		*maxLine = *maxState + 64<<10
	}
	failed, err := scoreStream(ctx, sc, pol, decision.Limits{MaxStateBytes: *maxState}, in, out, *maxLine)
	if err != nil {
		return err
	}
	if failed > 0 {
		fmt.Fprintf(os.Stderr, "verdict score: %d line(s) failed; see their error results\n", failed)
		return exitCode(1)
	}
	return nil
}

// scoreStream reads JSONL decisions, scores them in chunks (through the
// policy flow when pol is not nil) and writes one result per line, in
// order. A bad line becomes an error result with its line number; so does
// a line over maxLine bytes, and reading goes on with the next line. A
// failed scoring call (busy, closed, cancelled) ends the run with its
// error, naming the lines it held, whether a policy runs or not. It
// returns how many lines failed.
func scoreStream(ctx context.Context, sc engine.Scorer, pol *policy.Policy, limits decision.Limits, in io.Reader, out io.Writer, maxLine int) (int, error) {
	score := scoreFunc(sc.Score, pol)
	lr := batch.NewLineReader(in, maxLine)
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	failed := 0
	type entry struct {
		line int
		d    decision.Decision
		res  *decision.Result
	}
	var chunk []entry
	flush := func() error {
		var ds []decision.Decision
		var idx []int
		for i := range chunk {
			if chunk[i].res == nil {
				ds = append(ds, chunk[i].d)
				idx = append(idx, i)
			}
		}
		if len(ds) > 0 {
			results, err := score(ctx, ds)
			if err != nil {
				return fmt.Errorf("lines %d-%d: %w", chunk[0].line, chunk[len(chunk)-1].line, err)
			}
			for k, i := range idx {
				r := results[k]
				chunk[i].res = &r
			}
		}
		for _, c := range chunk {
			c.res.Line = c.line
			if c.res.Error != nil || (c.res.Outcome != nil && c.res.Outcome.Status == decision.StatusError) {
				failed++
			}
			if err := enc.Encode(c.res); err != nil {
				return err
			}
		}
		chunk = chunk[:0]
		return nil
	}
	for {
		l, err := lr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			_ = flush()
			return failed, fmt.Errorf("read line %d: %w", l.No, err)
		}
		switch {
		case l.TooLong:
			chunk = append(chunk, entry{line: l.No, res: &decision.Result{Error: batch.TooLongError(l.Len, maxLine)}})
		case len(trimSpace(l.Data)) == 0:
			continue
		default:
			d, err := decision.ParseSemIfDecision(l.Data, limits)
			if err != nil {
				chunk = append(chunk, entry{line: l.No, res: &decision.Result{Error: batch.LineError(err)}})
			} else {
				chunk = append(chunk, entry{line: l.No, d: d})
			}
		}
		if len(chunk) == scoreChunk {
			if err := flush(); err != nil {
				return failed, err
			}
		}
	}
	return failed, flush()
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t' || b[0] == '\r' || b[0] == '\n') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t' || b[len(b)-1] == '\r' || b[len(b)-1] == '\n') {
		b = b[:len(b)-1]
	}
	return b
}
