package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/internal/batch"
	"github.com/verdict-dev/verdict/internal/calibrate"
	"github.com/verdict-dev/verdict/internal/eval"
	"github.com/verdict-dev/verdict/internal/quality"
	"github.com/verdict-dev/verdict/internal/queue"
	"github.com/verdict-dev/verdict/internal/results"
)

func init() {
	register(command{name: "feedback", summary: "callers' labels of published decisions: export them for eval and calibrate; report agreement, Brier, ECE and drift", runFunc: runFeedback})
}

const feedbackUsage = `Usage:
  verdict feedback export -o GOLD.jsonl [--predictions PRED.jsonl] (--data DIR | --results-table NAME)
                          [--tenant T] [--kind K] [--from TIME] [--to TIME]
        write the labeled decisions as gold labels (GOLD.jsonl) and their results as a
        verdict batch file (default GOLD.predictions.jsonl): verdict eval --gold GOLD.jsonl
        --predictions PRED.jsonl and verdict calibrate read the pair
  verdict feedback report (--data DIR | --results-table NAME) [--tenant T] [--kind K]
                          [--from TIME] [--to TIME] [--window N] [--bins N] [--svg FILE]
                          [--calibration FILE] [--margin M] [--json] [--fail-on-drift]
        agreement (the model's top option against the label), Brier and ECE over the
        range (as verdict eval on the export), per policy kind and model, and over windows
        of the latest N labels; drift: a window that moved more than M from a reference

TIME is RFC 3339 (2026-05-01T00:00:00Z): labels given in [--from, --to). The labels are
one tenant's (--tenant, default the default tenant ""), each decision with its latest label.
`

func runFeedback(ctx context.Context, args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprint(helpOut, feedbackUsage)
		for _, sub := range []struct {
			name string
			fs   *flag.FlagSet
		}{{"export", exportFlagSet(new(exportFlags))}, {"report", reportFlagSet(new(reportFlags))}} {
			fmt.Fprintf(helpOut, "\nFlags of verdict feedback %s (each also VERDICT_<NAME>):\n", sub.name)
			sub.fs.SetOutput(helpOut)
			sub.fs.PrintDefaults()
		}
		if len(args) == 0 {
			return errUsage
		}
		return nil
	}
	switch args[0] {
	case "export":
		return runFeedbackExport(ctx, args[1:], os.Stderr)
	case "report":
		return runFeedbackReport(ctx, args[1:], os.Stdout)
	}
	fmt.Fprintf(os.Stderr, "verdict feedback: unknown subcommand %q\n\n%s", args[0], feedbackUsage)
	return errUsage
}

// labelSource names the results store to read labels from and which.
type labelSource struct {
	data, table, region    string
	tenant, kind, from, to string
	model                  string
}

func (s *labelSource) register(fs *flag.FlagSet) {
	fs.StringVar(&s.data, "data", "", "verdict up's data directory (its results.db holds results and feedback)")
	fs.StringVar(&s.table, "results-table", "", "DynamoDB results table (verdict worker --results-table); AWS_ENDPOINT_URL is honoured")
	fs.StringVar(&s.region, "region", "", "with --results-table: AWS region (default: from the AWS configuration, else us-east-1)")
	fs.StringVar(&s.tenant, "tenant", "", "the tenant whose labels to read (default: the default tenant \"\")")
	fs.StringVar(&s.kind, "kind", "", "only decisions of this policy kind (default: every kind)")
	fs.StringVar(&s.from, "from", "", "only labels given at or after this RFC 3339 time")
	fs.StringVar(&s.to, "to", "", "only labels given before this RFC 3339 time")
	fs.StringVar(&s.model, "model", "", "only what this model answered (its sha256, 8 hex digits of it at least, or its file name): a cascade's decision counts with the stage that model scored, so each model of a cascade is evaluated and calibrated alone (default: every decision's final result)")
}

// filter checks the filter flags.
func (s *labelSource) filter() (results.LabelFilter, error) {
	f := results.LabelFilter{Tenant: s.tenant, Kind: s.kind}
	for _, b := range []struct {
		name, value string
		t           *time.Time
	}{{"from", s.from, &f.From}, {"to", s.to, &f.To}} {
		if b.value == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339, b.value)
		if err != nil {
			return f, fmt.Errorf("flag --%s: bad value %q (want an RFC 3339 time, e.g. 2026-05-01T00:00:00Z)", b.name, b.value)
		}
		*b.t = t
	}
	if !f.From.IsZero() && !f.To.IsZero() && !f.To.After(f.From) {
		return f, fmt.Errorf("flag --to: %s is not after --from %s", s.to, s.from)
	}
	return f, nil
}

// labelStore is what the feedback commands read of a results store.
type labelStore interface {
	EachLabeled(ctx context.Context, f results.LabelFilter, fn func(results.Labeled) error) error
	Close() error
}

// open opens the store the flags name. --data must hold a results.db:
// a mistyped directory is an error, not an empty export.
func (s *labelSource) open(ctx context.Context) (labelStore, error) {
	switch {
	case s.data != "" && s.table != "":
		return nil, errors.New("flag --data: give --data or --results-table, not both")
	case s.data != "":
		path := filepath.Join(s.data, "results.db")
		if _, err := os.Stat(path); err != nil {
			return nil, fmt.Errorf("flag --data: no results store in %s (want verdict up's --data directory, holding results.db): %w", s.data, err)
		}
		f, err := results.OpenFile(path)
		if err != nil {
			return nil, fmt.Errorf("flag --data: %w", err)
		}
		return f, nil
	case s.table != "":
		awsCfg, err := queue.LoadAWS(ctx, s.region)
		if err != nil {
			return nil, fmt.Errorf("flag --region: %w", err)
		}
		d, err := results.NewDynamo(results.DynamoConfig{Table: s.table, Client: dynamodb.NewFromConfig(awsCfg)})
		if err != nil {
			return nil, fmt.Errorf("flag --results-table: %w", err)
		}
		return d, nil
	}
	return nil, errors.New("flag --data: name the results store: --data DIR (verdict up's data directory) or --results-table NAME (DynamoDB)")
}

// goldLine is one gold record of the export: the line id is the
// decision's request id + decision id (decision ids are the caller's and
// may repeat across requests), the gold its label by decision id.
type goldLine struct {
	ID   string            `json:"id"`
	Gold map[string]string `json:"gold"`
}

// eachExported reads the labeled decisions f picks, in label order, and
// calls fn with each one's gold line and prediction record (a `verdict
// batch` record holding the published result), the pair eval.Join
// matches.
//
// With model set, a decision counts with what that model answered: its
// result, or the cascade stage that model scored; decisions it did not
// score are left out.
func eachExported(ctx context.Context, st labelStore, f results.LabelFilter, model string, fn func(goldLine, batch.Record) error) error {
	line := 0
	err := st.EachLabeled(ctx, f, func(l results.Labeled) error {
		r := &l.Stored.Record
		res := r.Result
		if model != "" {
			var ok bool
			if res, ok = r.Result.ByModel(model); !ok {
				return nil
			}
		}
		line++
		res.ID = r.DecisionID
		format := r.Format
		if format == "" {
			format = "semif"
		}
		rec := batch.Record{Line: line, ID: r.Key(), Format: format, Results: []decision.Result{res}}
		return fn(goldLine{ID: r.Key(), Gold: map[string]string{r.DecisionID: l.Label.Option}}, rec)
	})
	if err != nil {
		return fmt.Errorf("read the labeled decisions: %w", err)
	}
	return nil
}

type exportFlags struct {
	src       labelSource
	out, pred string
}

func exportFlagSet(e *exportFlags) *flag.FlagSet {
	fs := newFlagSet("feedback export", "feedback export -o GOLD.jsonl [--predictions PRED.jsonl] (--data DIR | --results-table NAME) [flags]")
	e.src.register(fs)
	fs.StringVar(&e.out, "o", "", "write the gold labels here, JSONL {\"id\", \"gold\"} as verdict eval --gold reads them (required)")
	fs.StringVar(&e.pred, "predictions", "", "write the labeled decisions' results here, a verdict batch file (default: beside -o, GOLD.predictions.jsonl)")
	return fs
}

// predictionsBeside is the default predictions file of a gold file.
func predictionsBeside(gold string) string {
	return strings.TrimSuffix(gold, ".jsonl") + ".predictions.jsonl"
}

func runFeedbackExport(ctx context.Context, args []string, log io.Writer) error {
	var e exportFlags
	fs := exportFlagSet(&e)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q (feedback export takes only flags)", fs.Arg(0))
	}
	if e.out == "" {
		return errors.New("flag -o: required: the gold file to write")
	}
	if e.pred == "" {
		e.pred = predictionsBeside(e.out)
	}
	if filepath.Clean(e.pred) == filepath.Clean(e.out) {
		return fmt.Errorf("flag --predictions: %s is also -o", e.pred)
	}
	f, err := e.src.filter()
	if err != nil {
		return err
	}
	st, err := e.src.open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	gold, err := createAtomic(e.out)
	if err != nil {
		return fmt.Errorf("flag -o: %w", err)
	}
	defer gold.abort()
	pred, err := createAtomic(e.pred)
	if err != nil {
		return fmt.Errorf("flag --predictions: %w", err)
	}
	defer pred.abort()
	genc, penc := json.NewEncoder(gold.w), json.NewEncoder(pred.w)
	n, cascaded := 0, 0
	err = eachExported(ctx, st, f, e.src.model, func(g goldLine, rec batch.Record) error {
		n++
		if len(rec.Results[0].Cascade) > 0 {
			cascaded++
		}
		if err := genc.Encode(g); err != nil {
			return err
		}
		return penc.Encode(rec)
	})
	if err != nil {
		return err
	}
	if err := gold.commit(); err != nil {
		return fmt.Errorf("flag -o: %w", err)
	}
	if err := pred.commit(); err != nil {
		return fmt.Errorf("flag --predictions: %w", err)
	}
	fmt.Fprintf(log, "verdict feedback export: %d labeled decisions of tenant %q → %s (gold), %s (predictions)\n", n, f.Tenant, e.out, e.pred)
	if cascaded > 0 && e.src.model == "" {
		fmt.Fprintf(log, "note: %d of them were settled by a cascade, answered by more than one model: give --model to export one model's answers for verdict calibrate\n", cascaded)
	}
	fmt.Fprintf(log, "next: verdict eval --gold %s --predictions %s\n      verdict calibrate --gold %s --predictions %s -o calibration.json\n", e.out, e.pred, e.out, e.pred)
	return nil
}

// atomicFile is written beside its path and renamed into place by
// commit, so that a failed export leaves no half file.
type atomicFile struct {
	f    *os.File
	w    *bufio.Writer
	path string
	done bool
}

func createAtomic(path string) (*atomicFile, error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return nil, err
	}
	return &atomicFile{f: f, w: bufio.NewWriter(f), path: path}, nil
}

func (a *atomicFile) commit() error {
	err := a.w.Flush()
	if err == nil {
		err = a.f.Chmod(0o644)
	}
	if err == nil {
		err = a.f.Close()
	}
	if err == nil {
		err = os.Rename(a.f.Name(), a.path)
	}
	if err != nil {
		return err
	}
	a.done = true
	return nil
}

// abort removes the temporary file unless commit ran.
func (a *atomicFile) abort() {
	if !a.done {
		a.f.Close()
		os.Remove(a.f.Name())
	}
}

type reportFlags struct {
	src                 labelSource
	window, bins        int
	svg, title, cal     string
	margin              float64
	asJSON, failOnDrift bool
}

func reportFlagSet(r *reportFlags) *flag.FlagSet {
	fs := newFlagSet("feedback report", "feedback report (--data DIR | --results-table NAME) [flags]")
	r.src.register(fs)
	fs.IntVar(&r.window, "window", quality.DefaultSize, "labels per window, the latest last (the live verdict_feedback_* gauges' window)")
	fs.IntVar(&r.bins, "bins", quality.DefaultBins, "equal-width ECE bins")
	fs.StringVar(&r.svg, "svg", "", "write the reliability diagram (SVG) of the whole range here, as verdict eval --svg draws it")
	fs.StringVar(&r.title, "title", "", "title of the reliability diagram (default: the model and tenant)")
	fs.StringVar(&r.cal, "calibration", "", "calibration file from verdict calibrate: its out-of-fold ECE is the ECE reference of the kinds and models it is pinned to")
	fs.Float64Var(&r.margin, "margin", 0.05, "largest difference of a window's agreement or ECE from its reference that is not drift")
	fs.BoolVar(&r.asJSON, "json", false, "print the report as JSON")
	fs.BoolVar(&r.failOnDrift, "fail-on-drift", false, "exit with status 3 when a window drifted")
	return fs
}

// feedbackReport is what `verdict feedback report` prints.
type feedbackReport struct {
	Tenant string `json:"tenant"`
	Kind   string `json:"kind,omitempty"`
	From   string `json:"from,omitempty"`
	To     string `json:"to,omitempty"`
	Window int    `json:"window"`
	// Margin is the drift margin.
	Margin      float64      `json:"margin"`
	Calibration *quality.Pin `json:"calibration,omitempty"`
	// Overall is verdict eval's report of the export.
	Overall eval.Report        `json:"overall"`
	Groups  []quality.Assessed `json:"groups"`
	Drift   bool               `json:"drift"`
}

func runFeedbackReport(ctx context.Context, args []string, out io.Writer) error {
	var r reportFlags
	fs := reportFlagSet(&r)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q (feedback report takes only flags)", fs.Arg(0))
	}
	switch {
	case r.window < 1:
		return fmt.Errorf("flag --window: must be at least 1, got %d", r.window)
	case r.bins < 1 || r.bins > 100:
		return fmt.Errorf("flag --bins: must be 1..100, got %d", r.bins)
	case !(r.margin >= 0 && r.margin <= 1):
		return fmt.Errorf("flag --margin: must be in [0, 1], got %v", r.margin)
	}
	f, err := r.src.filter()
	if err != nil {
		return err
	}
	rep := feedbackReport{Tenant: f.Tenant, Kind: f.Kind, From: r.src.from, To: r.src.to, Window: r.window, Margin: r.margin}
	if r.cal != "" {
		c, err := calibrate.Load(r.cal)
		if err != nil {
			return fmt.Errorf("flag --calibration: %w", err)
		}
		rep.Calibration = &quality.Pin{Name: filepath.Base(r.cal), ModelSHA256: c.ModelSHA256, PromptVersion: c.PromptVersion,
			SHA256: c.SHA256, ECE: c.CrossValidation.ECEAfter}
	}
	st, err := r.src.open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	m, err := joinLabeled(ctx, st, f, r.src.model)
	if err != nil {
		return err
	}
	rep.Overall = eval.Evaluate(m.Examples, eval.Options{Bins: r.bins})
	rep.Overall.Skipped, rep.Overall.Unmatched = m.Skipped, m.Unmatched
	rep.Overall.Notes = notes(m)
	rep.Groups = quality.Assess(m.Examples, m.Results, quality.AssessConfig{Size: r.window, Bins: r.bins, Margin: r.margin, Calibration: rep.Calibration})
	for _, g := range rep.Groups {
		rep.Drift = rep.Drift || g.Drift
	}
	if r.svg != "" {
		if err := writeReliability(r.svg, r.title, &rep, m); err != nil {
			return err
		}
	}
	if r.asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else {
		rep.writeText(out)
	}
	if rep.Drift && r.failOnDrift {
		return exitCode(3)
	}
	return nil
}

// joinLabeled joins the labeled decisions as `verdict eval` joins their
// export: the same lines through eval.ReadGold and eval.Join, so that
// every figure is the one eval prints on the export.
func joinLabeled(ctx context.Context, st labelStore, f results.LabelFilter, model string) (eval.Matched, error) {
	var gold bytes.Buffer
	var recs []batch.Record
	enc := json.NewEncoder(&gold)
	err := eachExported(ctx, st, f, model, func(g goldLine, rec batch.Record) error {
		recs = append(recs, rec)
		return enc.Encode(g)
	})
	if err != nil {
		return eval.Matched{}, err
	}
	g, err := eval.ReadGold(&gold)
	if err != nil {
		return eval.Matched{}, err
	}
	return eval.Join(recs, g, nil), nil
}

func writeReliability(path, title string, rep *feedbackReport, m eval.Matched) error {
	if title == "" {
		models := map[string]bool{}
		var names []string
		for i := range m.Results {
			if n := quality.ModelOf(&m.Results[i]); !models[n] {
				models[n] = true
				names = append(names, n)
			}
		}
		title = fmt.Sprintf("Reliability: %s on the labels of tenant %q", strings.Join(names, ", "), rep.Tenant)
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("flag --svg: %w", err)
	}
	if err := rep.Overall.SVG(f, title); err != nil {
		f.Close()
		return fmt.Errorf("flag --svg: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("flag --svg: %w", err)
	}
	return nil
}

func (rep *feedbackReport) writeText(w io.Writer) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	o := &rep.Overall
	scope := fmt.Sprintf("tenant %q", rep.Tenant)
	if rep.Kind != "" {
		scope += ", kind " + rep.Kind
	}
	if rep.From != "" || rep.To != "" {
		scope += fmt.Sprintf(", labeled in [%s, %s)", orElse(rep.From, "-∞"), orElse(rep.To, "now"))
	}
	p("labeled decisions   %d (%s; valid %d)\n", o.Labeled, scope, o.Valid)
	p("agreement           %.4f  (the model's top option = the label: verdict eval's accuracy)\n", o.Accuracy)
	p("Brier               %.4f\n", o.Brier)
	p("ECE (%d bins)       %.4f\n", len(o.Bins), o.ECE)
	for k, v := range o.Notes {
		p("note                %s: %s\n", k, v)
	}
	if len(rep.Groups) == 0 {
		return
	}
	p("\nby kind and model\n  %-24s %-24s %7s %7s %9s %7s %7s\n", "kind", "model", "labels", "valid", "agreement", "Brier", "ECE")
	for _, g := range rep.Groups {
		p("  %-24s %-24s %7d %7d %9.4f %7.4f %7.4f\n", trunc(g.Kind, 24), trunc(g.Model, 24), g.All.Labels, g.All.Valid, g.All.Agreement, g.All.Brier, g.All.ECE)
	}
	p("\nwindows of %d labels, the latest last (what verdict_feedback_* shows live for these labels); drift margin %.4f\n", rep.Window, rep.Margin)
	for _, g := range rep.Groups {
		p("\n%s · %s\n  %-13s %9s %7s %7s\n", g.Kind, g.Model, "labels", "agreement", "Brier", "ECE")
		for _, s := range g.Windows {
			flag := ""
			if len(s.Drift) > 0 {
				flag = "  DRIFT"
			}
			p("  %-13s %9.4f %7.4f %7.4f%s\n", fmt.Sprintf("%d-%d", s.First, s.Last), s.Agreement, s.Brier, s.ECE, flag)
		}
		p("  reference: agreement %s; ECE %s\n", reference(g.Baseline.Agreement), reference(g.Baseline.ECE))
		if g.Note != "" {
			p("  note: %s\n", g.Note)
		}
		if c := rep.Calibration; c != nil && g.Pinned > 0 {
			p("  %d of %d results were scored with %s (calibration_sha256 %s)\n", g.Calibrated, g.All.Labels, c.Name, short(c.SHA256))
		}
		for _, s := range g.Windows {
			for _, d := range s.Drift {
				p("  DRIFT labels %d-%d: %s %.4f, %+.4f from %.4f (%s)\n", s.First, s.Last, d.Metric, d.Value, d.Delta, d.Reference, d.From)
			}
		}
	}
	if rep.Drift {
		p("\ndrift: a window moved more than %.4f from its reference\n", rep.Margin)
	} else {
		p("\ndrift: none beyond %.4f\n", rep.Margin)
	}
}

func reference(r quality.Reference) string {
	if r.From == "" {
		return "not compared (no full window and no calibration for it)"
	}
	return fmt.Sprintf("%.4f from %s", r.Value, r.From)
}

func orElse(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func trunc(s string, n int) string {
	if len(s) > n {
		return s[:n-1] + "…"
	}
	return s
}
