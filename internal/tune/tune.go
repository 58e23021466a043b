package tune

import (
	"context"
	"fmt"
	"math"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/engine"
	"github.com/verdict-dev/verdict/internal/calibrate"
)

// Temperature sources, as results report them.
const (
	SourceCalibration = "calibration"
	SourcePolicy      = "policy"
	SourceFlag        = "flag"
	SourceDefault     = "default"
)

// Resolve is the temperature precedence, the only one: the calibration
// file, then the policy kind's own temperature (kind > 0), then
// --temperature (flag > 0), then the policy file's top-level temperature,
// the kinds' default (policyDefault > 0), then 1. A setting made for this
// decision's kind beats the command line; the command line beats a
// default. 0 means "not set" for each number.
func Resolve(cal *calibrate.Loaded, kind, flag, policyDefault float64) (float64, string) {
	switch {
	case cal != nil:
		return cal.Temperature, SourceCalibration
	case kind > 0:
		return kind, SourcePolicy
	case flag > 0:
		return flag, SourceFlag
	case policyDefault > 0:
		return policyDefault, SourcePolicy
	}
	return 1, SourceDefault
}

// Rotations is the number of option orders to score d under: the
// request's debias, else the kind's, else the flag's, capped at the number
// of options; 1 means off.
func Rotations(d *decision.Decision, flag int) int {
	k := flag
	if d.KindDebias > 0 {
		k = d.KindDebias
	}
	if d.Debias > 0 {
		k = d.Debias
	}
	k = min(k, len(d.Options))
	if k < 2 {
		return 1
	}
	return k
}

// Config configures a Scorer.
type Config struct {
	// Calibration is applied to every result when set; it must match the
	// model and prompt (checked at start by the command and again on every
	// result). Defaults to none.
	Calibration *calibrate.Loaded
	// Temperature is --temperature (0 = not given).
	Temperature float64
	// Debias is --debias (0 or 1 = off).
	Debias int
}

// Scorer applies debiasing and the temperature precedence around an
// engine. The engine must score at temperature 1 (raw logits).
type Scorer struct {
	inner engine.Scorer
	cfg   Config
}

// New wraps inner.
func New(inner engine.Scorer, cfg Config) *Scorer { return &Scorer{inner: inner, cfg: cfg} }

// Score scores ds through the engine in one call (rotated copies included)
// and returns one tuned result per decision, in order.
func (s *Scorer) Score(ctx context.Context, ds []decision.Decision) ([]decision.Result, error) {
	var expanded []decision.Decision
	offsets := make([][]int, len(ds))
	for i := range ds {
		k := Rotations(&ds[i], s.cfg.Debias)
		n := len(ds[i].Options)
		for j := range k {
			off := j * n / k
			offsets[i] = append(offsets[i], off)
			expanded = append(expanded, Rotate(ds[i], off))
		}
	}
	rs, err := s.inner.Score(ctx, expanded)
	if err != nil {
		return nil, err
	}
	if len(rs) != len(expanded) {
		return nil, fmt.Errorf("tune: engine returned %d results for %d decisions", len(rs), len(expanded))
	}
	out := make([]decision.Result, len(ds))
	at := 0
	for i := range ds {
		k := len(offsets[i])
		out[i] = s.finish(&ds[i], rs[at:at+k], offsets[i])
		at += k
	}
	return out, nil
}

func (s *Scorer) finish(d *decision.Decision, rs []decision.Result, offsets []int) decision.Result {
	for _, r := range rs {
		if r.Error != nil {
			r.ID, r.Kind, r.OptionIDs = d.ID, d.Kind, d.OptionIDs()
			return r
		}
	}
	r := rs[0]
	if cal := s.cfg.Calibration; cal != nil {
		var sha string
		if r.Model != nil {
			sha = r.Model.SHA256
		}
		if err := cal.Check(sha, r.PromptVersion); err != nil {
			return decision.Result{ID: d.ID, Kind: d.Kind, OptionIDs: d.OptionIDs(), Error: &decision.Error{Code: decision.CodeCalibration, Message: err.Error()}}
		}
	}
	logits := r.OptionLogits
	if len(rs) > 1 {
		var agree float64
		logits, agree = Combine(rs, offsets, len(d.Options))
		r.Debias = &decision.Debias{Rotations: len(rs), Agreement: agree}
		if r.Tokens != nil {
			tk := *r.Tokens
			for _, o := range rs[1:] {
				if o.Tokens != nil {
					tk.Evaluated += o.Tokens.Evaluated
				}
			}
			r.Tokens = &tk
		}
		if r.Timing != nil {
			tm := *r.Timing
			for _, o := range rs[1:] {
				if o.Timing != nil {
					tm.Total = math.Max(tm.Total, o.Timing.Total)
					tm.Decode = math.Max(tm.Decode, o.Timing.Decode)
				}
			}
			r.Timing = &tm
		}
	} else if len(logits) != len(d.Options) && len(r.Probabilities) == len(d.Options) {
		// A remote engine that sent only probabilities at its temperature.
		t0 := r.Temperature
		if !(t0 > 0) {
			t0 = 1
		}
		logits = make([]float64, len(r.Probabilities))
		for i, p := range r.Probabilities {
			logits[i] = math.Log(p) * t0
		}
	}
	if len(logits) != len(d.Options) {
		return decision.Result{ID: d.ID, Kind: d.Kind, OptionIDs: d.OptionIDs(), Error: &decision.Error{Code: decision.CodeEngine, Message: fmt.Sprintf("tune: %d option logits for %d options", len(logits), len(d.Options))}}
	}
	Apply(&r, d, logits, s.cfg.Calibration, s.cfg.Temperature)
	return r
}

// Apply reads r's scores out of logits at the temperature Resolve chooses
// for d (its policy temperatures, put there by policy.Before), the
// calibration file and flag (--temperature, 0 = not given), and records
// how: the one place a temperature is applied.
func Apply(r *decision.Result, d *decision.Decision, logits []float64, cal *calibrate.Loaded, flag float64) {
	t, src := Resolve(cal, d.KindTemperature, flag, d.PolicyTemperature)
	engine.Readout(r, d, logits, t)
	r.TemperatureSource = src
	r.Calibrated = cal != nil
	r.CalibrationSHA256 = ""
	if cal != nil {
		r.CalibrationSHA256 = cal.SHA256
	}
}

// Rotate returns d with its options rotated left by off: position i holds
// the original option (i+off) mod n.
func Rotate(d decision.Decision, off int) decision.Decision {
	n := len(d.Options)
	if n == 0 || off%n == 0 {
		return d
	}
	opts := make([]decision.Option, n)
	for i := range opts {
		opts[i] = d.Options[(i+off)%n]
	}
	d.Options = opts
	return d
}

// Combine averages the rotations' log-softmax per original option: rs[j]
// scored the options rotated by offsets[j]. It returns the mean
// log-probabilities and the share of rotations whose argmax (mapped back)
// equals the combined argmax.
func Combine(rs []decision.Result, offsets []int, n int) ([]float64, float64) {
	mean := make([]float64, n)
	argmaxes := make([]int, len(rs))
	for j, r := range rs {
		lp := logSoftmax(r.OptionLogits)
		best := 0
		for i := range lp {
			orig := (i + offsets[j]) % n
			mean[orig] += lp[i] / float64(len(rs))
			if lp[i] > lp[best] {
				best = i
			}
		}
		argmaxes[j] = (best + offsets[j]) % n
	}
	top := 0
	for i := range mean {
		if mean[i] > mean[top] {
			top = i
		}
	}
	agree := 0
	for _, a := range argmaxes {
		if a == top {
			agree++
		}
	}
	return mean, float64(agree) / float64(len(rs))
}

func logSoftmax(x []float64) []float64 {
	m := math.Inf(-1)
	for _, v := range x {
		m = math.Max(m, v)
	}
	s := 0.0
	for _, v := range x {
		s += math.Exp(v - m)
	}
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = v - m - math.Log(s)
	}
	return out
}
