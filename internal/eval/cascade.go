package eval

import (
	"fmt"
	"math"

	"github.com/verdict-dev/verdict/decision"
)

// A cascade scores every decision with a small model first and sends the
// ones it is unsure of to a big model. The functions below choose where
// "unsure" starts, offline: Cascade replays both models' answers to a
// labeled set at each threshold of a grid and reports the cascade's
// accuracy, calibration and cost against each model alone.

// Escalation rules: what of the small model's answer is compared with the
// threshold.
const (
	// RuleTop escalates when the small model's top probability < t.
	RuleTop = "p_max"
	// RuleMargin escalates when its top minus runner-up probability < t.
	RuleMargin = "margin"
)

// DefaultCascadeThresholds are 0, 0.05, …, 1: at 0 nothing is escalated.
var DefaultCascadeThresholds = func() []float64 {
	out := make([]float64, 21)
	for i := range out {
		out[i] = float64(i) / 20
	}
	return out
}()

// Cost is what one decision cost one model.
type Cost struct {
	// DecodeSeconds is the result's timing_ms.decode in seconds.
	DecodeSeconds float64 `json:"decode_seconds"`
	// Tokens is the result's tokens.evaluated: the tokens decoded for it.
	Tokens float64 `json:"tokens"`
}

// CostOf reads a result's cost; a result without timing or token counts
// (an error before scoring) costs 0 of what it lacks.
func CostOf(r *decision.Result) Cost {
	var c Cost
	if r.Timing != nil {
		c.DecodeSeconds = r.Timing.Decode / 1000
	}
	if r.Tokens != nil {
		c.Tokens = float64(r.Tokens.Evaluated)
	}
	return c
}

func (c Cost) add(d Cost) Cost {
	return Cost{DecodeSeconds: c.DecodeSeconds + d.DecodeSeconds, Tokens: c.Tokens + d.Tokens}
}

func (c Cost) per(n int) Cost {
	return Cost{DecodeSeconds: div(c.DecodeSeconds, n), Tokens: div(c.Tokens, n)}
}

// CascadePair is one labeled decision as both models answered it: the
// same options and gold, each model's distribution and cost.
type CascadePair struct {
	Small, Big         Example
	SmallCost, BigCost Cost
}

// escalate reports whether the small model's answer falls under threshold
// t of the rule. An invalid answer (an error result) always escalates.
func (p *CascadePair) escalate(rule string, t float64) bool {
	if !p.Small.Valid() {
		return true
	}
	return smallScore(p.Small.Probs, rule) < t
}

func smallScore(probs []float64, rule string) float64 {
	top := Argmax(probs)
	if rule == RuleTop {
		return probs[top]
	}
	second := 0.0
	for i, q := range probs {
		if i != top {
			second = math.Max(second, q)
		}
	}
	return probs[top] - second
}

// PairUp aligns two models' joins of the same cases and gold (Join's
// output for each) by input line and decision id. Both must hold the same
// labeled decisions with the same options and gold: they scored one file.
func PairUp(small, big Matched) ([]CascadePair, error) {
	type key struct {
		line int
		id   string
	}
	at := make(map[key]int, len(big.Results))
	for i, r := range big.Results {
		at[key{r.Line, r.ID}] = i
	}
	if len(small.Results) != len(big.Results) {
		return nil, fmt.Errorf("cascade: the small model has %d labeled decisions, the big one %d: score the same cases", len(small.Results), len(big.Results))
	}
	out := make([]CascadePair, 0, len(small.Results))
	for i := range small.Results {
		r := &small.Results[i]
		j, ok := at[key{r.Line, r.ID}]
		if !ok {
			return nil, fmt.Errorf("cascade: line %d decision %q: scored by the small model only", r.Line, r.ID)
		}
		s, b := small.Examples[i], big.Examples[j]
		if s.Gold != b.Gold || fmt.Sprint(s.Options) != fmt.Sprint(b.Options) {
			return nil, fmt.Errorf("cascade: line %d decision %q: the two models saw different options %v and %v", r.Line, r.ID, s.Options, b.Options)
		}
		out = append(out, CascadePair{Small: s, Big: b, SmallCost: CostOf(r), BigCost: CostOf(&big.Results[j])})
	}
	return out, nil
}

// CascadeOptions configure Cascade.
type CascadeOptions struct {
	// Thresholds of both rules. Defaults to DefaultCascadeThresholds.
	Thresholds []float64
	// Tolerance: a threshold is acceptable when its accuracy is at least
	// the big model's alone minus Tolerance. Defaults to 0 (pass a value;
	// the command's default is 0.01).
	Tolerance float64
	// Bins is the number of equal-width ECE bins. Defaults to 10.
	Bins int
}

// CascadePoint is one way of answering the labeled set: a model alone, or
// the cascade at one threshold of one rule.
type CascadePoint struct {
	// Rule is RuleTop or RuleMargin; empty for a model alone.
	Rule      string  `json:"rule,omitempty"`
	Threshold float64 `json:"threshold"`
	// Escalated counts decisions sent to the big model; EscalationRate
	// divides it by the labeled decisions.
	Escalated      int     `json:"escalated"`
	EscalationRate float64 `json:"escalation_rate"`
	// Accuracy, ECE and Brier of the answers given: the small model's
	// distribution where not escalated, the big model's where escalated.
	Accuracy float64 `json:"accuracy"`
	ECE      float64 `json:"ece"`
	Brier    float64 `json:"brier"`
	// Cost per decision: the small model's for every decision plus the
	// big model's for the escalated ones. CostVsBig divides its decode
	// seconds by the big model's alone (1 = no saving; 0 when the big
	// model's results carry no timing).
	Cost      Cost    `json:"cost_per_decision"`
	CostVsBig float64 `json:"decode_cost_vs_big"`
	// WithinTolerance: Accuracy ≥ the big model's alone − Tolerance.
	WithinTolerance bool `json:"within_tolerance"`
}

// CascadeReport is what `verdict eval --cascade` prints.
type CascadeReport struct {
	// Labeled decisions, and how many of each model's answers are valid.
	Labeled    int `json:"labeled"`
	SmallValid int `json:"small_valid"`
	BigValid   int `json:"big_valid"`
	// Skipped decisions whose gold is unknown, Unmatched results without a
	// gold record (set by the caller).
	Skipped   int `json:"skipped_unknown_gold"`
	Unmatched int `json:"unmatched"`
	// SmallModel and BigModel name the models (set by the caller).
	SmallModel string  `json:"small_model,omitempty"`
	BigModel   string  `json:"big_model,omitempty"`
	Tolerance  float64 `json:"tolerance"`
	// Small and Big are each model alone.
	Small CascadePoint `json:"small_alone"`
	Big   CascadePoint `json:"big_alone"`
	// Top and Margin are the cascade at each threshold of RuleTop and
	// RuleMargin.
	Top    []CascadePoint `json:"p_max"`
	Margin []CascadePoint `json:"margin"`
	// Recommended is the cheapest point of Top within tolerance (nil when
	// none is), RecommendedMargin that of Margin.
	Recommended       *CascadePoint `json:"recommended"`
	RecommendedMargin *CascadePoint `json:"recommended_margin"`
}

// Cascade replays the cascade over labeled pairs at each threshold of both
// rules and recommends, per rule, the cheapest threshold within tolerance
// of the big model's accuracy: the least decode seconds per decision, then
// the fewest tokens, then the fewest escalations.
func Cascade(pairs []CascadePair, o CascadeOptions) CascadeReport {
	if o.Thresholds == nil {
		o.Thresholds = DefaultCascadeThresholds
	}
	if o.Bins < 1 {
		o.Bins = 10
	}
	r := CascadeReport{Labeled: len(pairs), Tolerance: o.Tolerance}
	for i := range pairs {
		if pairs[i].Small.Valid() {
			r.SmallValid++
		}
		if pairs[i].Big.Valid() {
			r.BigValid++
		}
	}
	r.Small = replay(pairs, func(*CascadePair) bool { return false }, o.Bins)
	r.Big = replay(pairs, func(*CascadePair) bool { return true }, o.Bins)
	// The big model alone does not pay for the small one.
	var big Cost
	for i := range pairs {
		big = big.add(pairs[i].BigCost)
	}
	r.Big.Cost = big.per(len(pairs))
	r.Big.Escalated, r.Big.EscalationRate = 0, 0
	floor := r.Big.Accuracy - o.Tolerance
	finish := func(p *CascadePoint) {
		if r.Big.Cost.DecodeSeconds > 0 {
			p.CostVsBig = p.Cost.DecodeSeconds / r.Big.Cost.DecodeSeconds
		}
		// A hair of slack so that a tolerance of exactly the gap counts.
		p.WithinTolerance = p.Accuracy >= floor-1e-12
	}
	finish(&r.Small)
	finish(&r.Big)
	for _, rule := range []string{RuleTop, RuleMargin} {
		var points []CascadePoint
		var best *CascadePoint
		for _, t := range o.Thresholds {
			p := replay(pairs, func(c *CascadePair) bool { return c.escalate(rule, t) }, o.Bins)
			p.Rule, p.Threshold = rule, t
			finish(&p)
			points = append(points, p)
		}
		for i := range points {
			if points[i].WithinTolerance && (best == nil || cheaper(&points[i], best)) {
				best = &points[i]
			}
		}
		if rule == RuleTop {
			r.Top, r.Recommended = points, clonePoint(best)
		} else {
			r.Margin, r.RecommendedMargin = points, clonePoint(best)
		}
	}
	return r
}

// replay answers each pair with the big model where escalate says so,
// else with the small one, and measures the answers and their cost.
func replay(pairs []CascadePair, escalate func(*CascadePair) bool, bins int) CascadePoint {
	var p CascadePoint
	chosen := make([]Example, len(pairs))
	var cost Cost
	for i := range pairs {
		c := &pairs[i]
		chosen[i] = c.Small
		cost = cost.add(c.SmallCost)
		if escalate(c) {
			chosen[i] = c.Big
			cost = cost.add(c.BigCost)
			p.Escalated++
		}
	}
	p.EscalationRate = div(float64(p.Escalated), len(pairs))
	p.Accuracy = Accuracy(chosen)
	p.ECE, _ = ECE(chosen, bins)
	p.Brier = Brier(chosen)
	p.Cost = cost.per(len(pairs))
	return p
}

func cheaper(a, b *CascadePoint) bool {
	if a.Cost.DecodeSeconds != b.Cost.DecodeSeconds {
		return a.Cost.DecodeSeconds < b.Cost.DecodeSeconds
	}
	if a.Cost.Tokens != b.Cost.Tokens {
		return a.Cost.Tokens < b.Cost.Tokens
	}
	return a.Escalated < b.Escalated
}

func clonePoint(p *CascadePoint) *CascadePoint {
	if p == nil {
		return nil
	}
	c := *p
	return &c
}
