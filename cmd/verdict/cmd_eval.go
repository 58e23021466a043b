package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/verdict-dev/verdict/internal/bench"
	"github.com/verdict-dev/verdict/internal/eval"
)

func init() {
	register(command{name: "eval", summary: "evaluate results against gold labels (JevBench-240 layout): accuracy, calibration, position bias, reliability SVG", runFunc: runEval})
	register(command{name: "calibrate", summary: "fit a temperature on labeled results; write a calibration file pinned to the model and prompt; suggest thresholds", runFunc: runCalibrate})
}

// labeledFlags locate labeled data: a JevBench-style folder or the files.
type labeledFlags struct {
	cases, gold, predictions string
}

func (l *labeledFlags) register(fs interface {
	StringVar(*string, string, string, string)
}) {
	fs.StringVar(&l.cases, "cases", "", "decisions, JSONL in either format (default: DIR/cases.jsonl)")
	fs.StringVar(&l.gold, "gold", "", "gold labels, JSONL {\"id\", \"gold\"} (default: DIR/gold.jsonl)")
	fs.StringVar(&l.predictions, "predictions", "", "`verdict batch` output for the cases (default: score them with --model)")
}

// resolve fills cases and gold from a positional folder.
func (l *labeledFlags) resolve(pos []string) error {
	if len(pos) > 1 {
		return fmt.Errorf("want at most one DIR, got %d", len(pos))
	}
	if len(pos) == 0 && l.cases == "" && l.gold == "" {
		dir, err := jevbenchDir()
		if err != nil {
			return err
		}
		pos = []string{dir}
	}
	if len(pos) == 1 {
		if l.cases == "" {
			l.cases = filepath.Join(pos[0], "cases.jsonl")
		}
		if l.gold == "" {
			l.gold = filepath.Join(pos[0], "gold.jsonl")
		}
	}
	if l.gold == "" {
		return fmt.Errorf("flag --gold: required (or give a DIR holding gold.jsonl)")
	}
	if l.cases == "" && l.predictions == "" {
		return fmt.Errorf("flag --cases: required with --model (or give a DIR holding cases.jsonl)")
	}
	return nil
}

// jevbenchDir is the labeled data used when none is named: VERDICT_JEVBENCH
// (the folder, or its cases.jsonl as verdict bench takes it), else where
// make jevbench puts JevBench-240; with neither, one line says how to get it.
func jevbenchDir() (string, error) {
	dir := os.Getenv("VERDICT_JEVBENCH")
	if dir == "" {
		dir = bench.JevBenchDir
	} else if st, err := os.Stat(dir); err == nil && !st.IsDir() {
		dir = filepath.Dir(dir)
	}
	if _, err := os.Stat(filepath.Join(dir, "gold.jsonl")); err != nil {
		return "", fmt.Errorf("no labeled data given (DIR, or --cases and --gold), and JevBench-240 is not at %s: %s", dir, bench.JevBenchHowTo)
	}
	return dir, nil
}

// labeled scores the cases when no predictions are given, then joins the
// records with the gold labels.
func labeled(ctx context.Context, l *labeledFlags, ef *engineFlags, bf *batchFlags, out string) (eval.Matched, error) {
	if l.predictions == "" {
		if out == "" {
			f, err := os.CreateTemp("", "verdict-eval-*.jsonl")
			if err != nil {
				return eval.Matched{}, err
			}
			f.Close()
			out = f.Name()
			defer os.Remove(out)
		}
		eng, sc, err := ef.openTuned("/opt/ml/model")
		if err != nil {
			return eval.Matched{}, err
		}
		defer eng.Close()
		pol, err := loadPolicy(bf.policyFile)
		if err != nil {
			return eval.Matched{}, err
		}
		sum, err := batchFile(ctx, bf, scoreFunc(sc.Score, pol), l.cases, out, "", false)
		printSummary(os.Stderr, sum)
		if err != nil {
			return eval.Matched{}, err
		}
		l.predictions = out
	}
	gf, err := os.Open(l.gold)
	if err != nil {
		return eval.Matched{}, fmt.Errorf("flag --gold: %w", err)
	}
	defer gf.Close()
	gold, err := eval.ReadGold(gf)
	if err != nil {
		return eval.Matched{}, fmt.Errorf("flag --gold: %w", err)
	}
	families := map[string]string{}
	if l.cases != "" {
		cf, err := os.Open(l.cases)
		if err != nil {
			return eval.Matched{}, fmt.Errorf("flag --cases: %w", err)
		}
		defer cf.Close()
		if families, err = eval.ReadFamilies(cf); err != nil {
			return eval.Matched{}, fmt.Errorf("flag --cases: %w", err)
		}
	}
	recs, err := eval.ReadRecords(l.predictions)
	if err != nil {
		return eval.Matched{}, fmt.Errorf("flag --predictions: %w", err)
	}
	return eval.Join(recs, gold, families), nil
}

func runEval(ctx context.Context, args []string) error {
	fs := newFlagSet("eval", "eval [flags] [DIR]  (DIR holds cases.jsonl and gold.jsonl, as JevBench-240 does)")
	var ef engineFlags
	var lf logFlags
	var bf batchFlags
	var l labeledFlags
	ef.register(fs)
	lf.register(fs)
	bf.register(fs)
	l.register(fs)
	asJSON := fs.Bool("json", false, "print the report as JSON")
	svg := fs.String("svg", "", "write the reliability diagram (SVG) here")
	title := fs.String("title", "", "title of the reliability diagram or the cascade's curve (default: the cases file and model)")
	bins := fs.Int("bins", 10, "equal-width ECE bins")
	out := fs.String("o", "", "with --model: keep the scored records here (a `verdict batch` file)")
	var cf cascadeFlags
	cf.register(fs)
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if err := lf.setup(); err != nil {
		return err
	}
	if err := l.resolve(pos); err != nil {
		return fmt.Errorf("eval: %w", err)
	}
	if *bins < 1 || *bins > 100 {
		return fmt.Errorf("flag --bins: must be 1..100, got %d", *bins)
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	if err := cf.check(given, &l, &ef, *out, *svg); err != nil {
		return err
	}
	if cf.small != "" {
		return runCascade(ctx, &cf, &l, &ef, &bf, *bins, *title, *asJSON)
	}
	m, err := labeled(ctx, &l, &ef, &bf, *out)
	if err != nil {
		return err
	}
	rep := eval.Evaluate(m.Examples, eval.Options{Bins: *bins})
	rep.Skipped, rep.Unmatched = m.Skipped, m.Unmatched
	rep.Notes = notes(m)
	if *svg != "" {
		t := *title
		if t == "" {
			t = "Reliability: " + filepath.Base(filepath.Dir(l.predictions+"/x"))
			if len(m.Results) > 0 && m.Results[0].Model != nil {
				t = "Reliability: " + m.Results[0].Model.Name + " on " + filepath.Base(filepath.Dir(absOr(l.gold)))
			}
		}
		f, err := os.Create(*svg)
		if err != nil {
			return fmt.Errorf("flag --svg: %w", err)
		}
		if err := rep.SVG(f, t); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
	}
	if *asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	rep.WriteText(os.Stdout)
	return nil
}

// cascadeFlags choose a cascade's threshold: both models score the
// labeled cases, then eval.Cascade replays the cascade at each threshold.
type cascadeFlags struct {
	spec, svg  string
	tolerance  float64
	small, big string
}

func (c *cascadeFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.spec, "cascade", "", "SMALL.gguf,BIG.gguf: score the cases with both models and report, per threshold, a cascade that sends the small model's unsure decisions to the big one (accuracy, ECE, Brier, cost, a recommended threshold)")
	fs.Float64Var(&c.tolerance, "tolerance", 0.01, "with --cascade: the recommended threshold is the cheapest whose accuracy is at least the big model's alone minus this")
	fs.StringVar(&c.svg, "svg-cascade", "", "with --cascade: write the accuracy–cost curve (SVG) here")
}

// check parses --cascade and refuses flags that do not apply to it (given
// holds the flags set on the command line).
func (c *cascadeFlags) check(given map[string]bool, l *labeledFlags, ef *engineFlags, out, svg string) error {
	if c.spec == "" {
		for _, name := range []string{"tolerance", "svg-cascade"} {
			if given[name] {
				return fmt.Errorf("flag --%s: needs --cascade SMALL.gguf,BIG.gguf", name)
			}
		}
		return nil
	}
	parts := strings.Split(c.spec, ",")
	if len(parts) != 2 || strings.TrimSpace(parts[0]) == "" || strings.TrimSpace(parts[1]) == "" {
		return fmt.Errorf("flag --cascade: want SMALL.gguf,BIG.gguf, got %q", c.spec)
	}
	small, big := strings.TrimSpace(parts[0]), strings.TrimSpace(parts[1])
	for _, p := range []string{small, big} {
		if _, err := os.Stat(p); err != nil {
			return fmt.Errorf("flag --cascade: %v", err)
		}
	}
	if c.tolerance < 0 || c.tolerance > 1 || math.IsNaN(c.tolerance) {
		return fmt.Errorf("flag --tolerance: must be in [0, 1], got %v", c.tolerance)
	}
	switch {
	case given["m"] || given["model"]:
		return fmt.Errorf("flag --model: not with --cascade, which names both models")
	case l.predictions != "":
		return fmt.Errorf("flag --predictions: not with --cascade, which scores the cases with both models")
	case out != "":
		return fmt.Errorf("flag -o: not with --cascade")
	case svg != "":
		return fmt.Errorf("flag --svg: not with --cascade (its curve is --svg-cascade)")
	case ef.calibration != "":
		return fmt.Errorf("flag --calibration: not with --cascade (a calibration file is pinned to one model)")
	case ef.sha256 != "":
		return fmt.Errorf("flag --model-sha256: not with --cascade (each model's <model>.sha256 manifest is still checked)")
	}
	c.small, c.big = small, big
	return nil
}

// runCascade scores the labeled cases with the small model, then the big
// one (one loaded at a time, as `eval -m` loads it), pairs their answers
// and prints the cascade's table, writing its curve when asked.
func runCascade(ctx context.Context, c *cascadeFlags, l *labeledFlags, ef *engineFlags, bf *batchFlags, bins int, title string, asJSON bool) error {
	var m [2]eval.Matched
	for i, path := range []string{c.small, c.big} {
		slog.Info("cascade: scoring the labeled cases", "model", path, "role", [2]string{"small", "big"}[i])
		e, lf := *ef, *l
		e.model = path
		var err error
		if m[i], err = labeled(ctx, &lf, &e, bf, ""); err != nil {
			return fmt.Errorf("cascade: %s: %w", path, err)
		}
	}
	pairs, err := eval.PairUp(m[0], m[1])
	if err != nil {
		return err
	}
	rep := eval.Cascade(pairs, eval.CascadeOptions{Tolerance: c.tolerance, Bins: bins})
	rep.Skipped, rep.Unmatched = m[1].Skipped, m[1].Unmatched
	rep.SmallModel, rep.BigModel = filepath.Base(c.small), filepath.Base(c.big)
	if c.svg != "" {
		if title == "" {
			title = "Cascade: " + rep.SmallModel + " → " + rep.BigModel + " on " + filepath.Base(filepath.Dir(absOr(l.gold)))
		}
		f, err := os.Create(c.svg)
		if err != nil {
			return fmt.Errorf("flag --svg-cascade: %w", err)
		}
		if err := rep.SVG(f, title); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return fmt.Errorf("flag --svg-cascade: %w", err)
		}
	}
	if asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	rep.WriteText(os.Stdout)
	return nil
}

func absOr(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

func notes(m eval.Matched) map[string]string {
	n := map[string]string{}
	if m.BadGold > 0 {
		n["gold not among the options"] = strconv.Itoa(m.BadGold)
	}
	if m.LineErrors > 0 {
		n["input lines that failed to parse"] = strconv.Itoa(m.LineErrors)
	}
	deb, cal := 0, 0
	for _, r := range m.Results {
		if r.Debias != nil {
			deb = r.Debias.Rotations
		}
		if r.Calibrated {
			cal++
		}
	}
	if deb > 0 {
		n["debias"] = fmt.Sprintf("%d rotations", deb)
	}
	if cal > 0 {
		n["calibrated results"] = strconv.Itoa(cal)
	}
	if len(n) == 0 {
		return nil
	}
	return n
}

// parseTargets parses "0.8,0.9".
func parseTargets(s string) ([]float64, error) {
	var out []float64
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || v <= 0 || v > 1 {
			return nil, fmt.Errorf("flag --target: bad value %q (want accuracies in (0, 1], e.g. 0.9,0.95)", s)
		}
		out = append(out, v)
	}
	return out, nil
}
