package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"strings"
	"time"

	"golang.org/x/term"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/internal/batch"
)

func init() {
	register(command{name: "batch", summary: "score a JSONL file of either format offline, or on a fleet with --submit: grouped by state, resumable, with progress and a summary", runFunc: runBatch})
}

// submitFlags are the flags of `verdict batch --submit URL`.
type submitFlags struct {
	url        string
	apiKey     string
	chunkBytes int
	timeout    time.Duration
	poll       time.Duration
}

func (s *submitFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&s.url, "submit", "", "run the file on a fleet through this front door (`verdict up` or the Lambda, e.g. http://127.0.0.1:8080) instead of the local engine")
	fs.StringVar(&s.apiKey, "api-key", "", "with --submit: API key sent as X-Api-Key")
	fs.IntVar(&s.chunkBytes, "chunk-bytes", batch.DefaultChunkBytes, "with --submit: largest request body (the front door's limit is 1 MiB by default)")
	fs.DurationVar(&s.timeout, "http-timeout", time.Minute, "with --submit: deadline of each HTTP call")
	fs.DurationVar(&s.poll, "poll-interval", 10*time.Second, "with --submit: longest wait between result lookups")
}

// batchFlags are the flags of `verdict batch` that `verdict eval --model`
// shares.
type batchFlags struct {
	policyFile string
	maxLine    int
	maxState   int
	window     int
	chunk      int
	progress   string
	every      time.Duration
}

func (b *batchFlags) register(fs interface {
	StringVar(*string, string, string, string)
	IntVar(*int, string, int, string)
	DurationVar(*time.Duration, string, time.Duration, string)
}) {
	fs.StringVar(&b.policyFile, "policy", "", "policy file to apply to each result (see docs/policy.md)")
	fs.IntVar(&b.maxLine, "max-line-bytes", 1<<20, "longest accepted input line; a longer one becomes an error record")
	fs.IntVar(&b.maxState, "max-state-bytes", decision.DefaultLimits().MaxStateBytes, "largest accepted state, in bytes")
	fs.IntVar(&b.window, "window", 1024, "decisions held to group lines that share a state (memory stays flat)")
	fs.IntVar(&b.chunk, "chunk", 256, "most decisions per engine call")
	fs.StringVar(&b.progress, "progress", "auto", "progress on stderr: auto (a bar on a terminal, plain lines otherwise), bar, plain or none")
	fs.DurationVar(&b.every, "progress-interval", 10*time.Second, "time between plain progress lines")
}

func runBatch(ctx context.Context, args []string) error {
	fs := newFlagSet("batch", "batch [flags] IN.jsonl -o OUT.jsonl")
	var ef engineFlags
	var lf logFlags
	var bf batchFlags
	ef.register(fs)
	lf.register(fs)
	bf.register(fs)
	out := fs.String("o", "", "output JSONL file (required): one record per input line, in input order")
	fs.StringVar(out, "out", "", "long form of -o")
	resume := fs.Bool("resume", false, "continue an interrupted run: keep OUT's whole records (a torn last line is dropped) and score the lines after them")
	errFile := fs.String("errors", "", "also write every record with a failure to this file")
	var sf submitFlags
	sf.register(fs)
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if err := lf.setup(); err != nil {
		return err
	}
	if len(pos) != 1 {
		return fmt.Errorf("batch: want one input FILE, got %d", len(pos))
	}
	if *out == "" {
		return fmt.Errorf("flag -o: required")
	}
	var sum batch.Summary
	if sf.url != "" {
		chunkSet := false
		fs.Visit(func(f *flag.Flag) { chunkSet = chunkSet || f.Name == "chunk" })
		sum, err = submitFile(ctx, &bf, &sf, chunkSet, pos[0], *out, *errFile, *resume)
	} else {
		pol, perr := loadPolicy(bf.policyFile)
		if perr != nil {
			return perr
		}
		eng, sc, oerr := ef.openTuned("/opt/ml/model")
		if oerr != nil {
			return oerr
		}
		defer eng.Close()
		sum, err = batchFile(ctx, &bf, scoreFunc(sc.Score, pol), pos[0], *out, *errFile, *resume)
	}
	if sum.Status == nil { // refused before it started
		return err
	}
	printSummary(os.Stderr, sum)
	if err != nil {
		return err
	}
	if sum.Failed > 0 || sum.LinesFailed > 0 {
		return exitCode(1)
	}
	return nil
}

// runFunc runs a batch of the input file to out (batch.Run or
// batch.Submit).
type runFunc func(ctx context.Context, cfg batch.Config, in *os.File, out io.Writer) (batch.Summary, error)

// runLocal scores on the local engine.
func runLocal(score batch.ScoreFunc) runFunc {
	return func(ctx context.Context, cfg batch.Config, in *os.File, out io.Writer) (batch.Summary, error) {
		cfg.Score = score
		return batch.Run(ctx, cfg, in, out)
	}
}

// submitFile runs a batch on a fleet through its front door.
func submitFile(ctx context.Context, bf *batchFlags, sf *submitFlags, chunkSet bool, in, out, errPath string, resume bool) (batch.Summary, error) {
	if bf.policyFile != "" {
		return batch.Summary{}, fmt.Errorf("flag --policy: not with --submit (the fleet applies its own policy)")
	}
	if !chunkSet {
		bf.chunk = batch.DefaultSubmitChunk
	}
	if limit := decision.DefaultLimits().MaxDecisions; bf.chunk > limit {
		return batch.Summary{}, fmt.Errorf("flag --chunk: at most %d with --submit (the front door's limit of decisions per request), got %d", limit, bf.chunk)
	}
	if sf.chunkBytes < 1<<10 || sf.timeout <= 0 || sf.poll <= 0 {
		return batch.Summary{}, fmt.Errorf("flags --chunk-bytes, --http-timeout and --poll-interval: must be at least 1024 bytes and positive, got %d, %s and %s", sf.chunkBytes, sf.timeout, sf.poll)
	}
	var sub batch.SubmitSummary
	run := func(ctx context.Context, cfg batch.Config, inf *os.File, w io.Writer) (batch.Summary, error) {
		scfg := batch.SubmitConfig{Config: cfg, URL: sf.url, APIKey: sf.apiKey, StatePath: batch.StatePath(out), Resume: resume,
			ChunkBytes: sf.chunkBytes, CallTimeout: sf.timeout, MaxPollInterval: sf.poll,
			RetryFunc: func(call string, status int, after time.Duration, err error) {
				slog.Warn("verdict batch: front door call failed; retrying", "call", call, "status", status, "retry_after", after, "err", err)
			}}
		var err error
		sub, err = batch.Submit(ctx, scfg, inf, w)
		return sub.Summary, err
	}
	sum, err := runBatchFile(ctx, bf, run, in, out, errPath, resume)
	if sub.Chunks > 0 || sub.Recorded > 0 {
		fmt.Fprintf(os.Stderr, "verdict batch: %s: %d chunks (%d sent this run, %d recorded before, %d refused); request ids in %s\n",
			sf.url, sub.Chunks, sub.Submitted, sub.Recorded, sub.Rejected, batch.StatePath(out))
	}
	return sum, err
}

// batchFile runs a batch from the file in to the file out on the local
// engine.
func batchFile(ctx context.Context, bf *batchFlags, score batch.ScoreFunc, in, out, errPath string, resume bool) (batch.Summary, error) {
	return runBatchFile(ctx, bf, runLocal(score), in, out, errPath, resume)
}

// runBatchFile opens the files (resuming OUT and the errors file when
// asked), sets up progress and runs the batch with run.
func runBatchFile(ctx context.Context, bf *batchFlags, run runFunc, in, out, errPath string, resume bool) (batch.Summary, error) {
	if bf.maxState < 1 {
		return batch.Summary{}, fmt.Errorf("flag --max-state-bytes: must be at least 1, got %d", bf.maxState)
	}
	if bf.window < 1 || bf.chunk < 1 {
		return batch.Summary{}, fmt.Errorf("flags --window and --chunk: must be at least 1, got %d and %d", bf.window, bf.chunk)
	}
	if bf.maxState > bf.maxLine {
		bf.maxLine = bf.maxState + 64<<10
	}
	inf, err := os.Open(in)
	if err != nil {
		return batch.Summary{}, err
	}
	defer inf.Close()
	var total int64
	if st, err := inf.Stat(); err == nil && st.Mode().IsRegular() {
		total = st.Size()
	}
	skip := 0
	flags := os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	if resume {
		if skip, err = batch.Resume(out); err != nil {
			return batch.Summary{}, fmt.Errorf("flag --resume: %w", err)
		}
		if errPath != "" {
			if err := batch.TrimAfter(errPath, skip); err != nil {
				return batch.Summary{}, fmt.Errorf("flag --errors: %w", err)
			}
		}
		flags = os.O_WRONLY | os.O_CREATE | os.O_APPEND
	}
	outf, err := os.OpenFile(out, flags, 0o644)
	if err != nil {
		return batch.Summary{}, fmt.Errorf("flag -o: %w", err)
	}
	defer outf.Close()
	cfg := batch.Config{Limits: decision.Limits{MaxStateBytes: bf.maxState}, MaxLineBytes: bf.maxLine,
		Window: bf.window, Chunk: bf.chunk, Skip: skip, TotalBytes: total}
	if errPath != "" {
		ef, err := os.OpenFile(errPath, flags, 0o644)
		if err != nil {
			return batch.Summary{}, fmt.Errorf("flag --errors: %w", err)
		}
		defer ef.Close()
		cfg.Errors = ef
	}
	switch bf.progress {
	case "auto":
		if term.IsTerminal(int(os.Stderr.Fd())) {
			cfg.Progress = batch.NewBar(os.Stderr, total)
		} else {
			cfg.Progress = &batch.Plain{W: os.Stderr, Every: bf.every}
		}
	case "bar":
		cfg.Progress = batch.NewBar(os.Stderr, total)
	case "plain":
		cfg.Progress = &batch.Plain{W: os.Stderr, Every: bf.every}
	case "none":
	default:
		return batch.Summary{}, fmt.Errorf("flag --progress: bad value %q (want auto, bar, plain or none)", bf.progress)
	}
	sum, err := run(ctx, cfg, inf, outf)
	if cerr := outf.Sync(); err == nil && cerr != nil {
		err = cerr
	}
	return sum, err
}

func printSummary(w io.Writer, s batch.Summary) {
	var st []string
	for k, v := range s.Status {
		st = append(st, fmt.Sprintf("%s %d", k, v))
	}
	sort.Strings(st)
	fmt.Fprintf(w, "verdict batch: %d lines (%d failed to parse, %d resumed), %d decisions (%d failed) in %s, %.1f decisions/s; status: %s; tokens %d, evaluated %d, saved by prefix reuse %d\n",
		s.Lines, s.LinesFailed, s.Resumed, s.Decisions, s.Failed, s.Elapsed.Round(time.Millisecond), s.PerSecond(), strings.Join(st, ", "), s.TokensInput, s.TokensEvaluated, s.TokensSaved)
}
