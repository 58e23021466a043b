package eval_test

import (
	"bytes"
	"encoding/xml"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/internal/eval"
)

// cascadeFixture: ten two-option decisions, gold always the first option.
// The small model (0.1 s, 10 tokens a decision) is right and confident on
// d0..d4 (0.92: margin 0.84) and wrong and unsure on d5..d9 (0.62 for the
// wrong option: margin 0.24); the big model (1 s, 100 tokens) is right on
// all ten, at 0.8 and 0.7 respectively.
func cascadeFixture() []eval.CascadePair {
	small, big := eval.Cost{DecodeSeconds: 0.1, Tokens: 10}, eval.Cost{DecodeSeconds: 1, Tokens: 100}
	var out []eval.CascadePair
	for i := range 10 {
		p := eval.CascadePair{SmallCost: small, BigCost: big}
		p.Small = eval.Example{Options: []string{"yes", "no"}, Gold: 0, Probs: []float64{0.92, 0.08}}
		p.Big = eval.Example{Options: []string{"yes", "no"}, Gold: 0, Probs: []float64{0.8, 0.2}}
		if i >= 5 {
			p.Small.Probs = []float64{0.38, 0.62}
			p.Big.Probs = []float64{0.7, 0.3}
		}
		out = append(out, p)
	}
	return out
}

func TestCascadeCurveAgainstHandComputedValues(t *testing.T) {
	t.Parallel()
	r := eval.Cascade(cascadeFixture(), eval.CascadeOptions{Tolerance: 0.01})
	require.Equal(t, 10, r.Labeled)
	require.Equal(t, 10, r.SmallValid)
	require.Equal(t, 10, r.BigValid)

	// Each model alone.
	require.InDelta(t, 0.5, r.Small.Accuracy, 1e-12)
	require.InDelta(t, 0.1, r.Small.Cost.DecodeSeconds, 1e-12)
	require.InDelta(t, 10, r.Small.Cost.Tokens, 1e-12)
	require.InDelta(t, 0.1, r.Small.CostVsBig, 1e-12)
	require.False(t, r.Small.WithinTolerance)
	require.InDelta(t, 1, r.Big.Accuracy, 1e-12)
	require.InDelta(t, 1, r.Big.Cost.DecodeSeconds, 1e-12, "the big model alone does not pay for the small one")
	require.InDelta(t, 100, r.Big.Cost.Tokens, 1e-12)
	require.True(t, r.Big.WithinTolerance)
	// big: bin 8 (0.8, right) ×5, bin 7 (0.7, right) ×5 → ½·0.2 + ½·0.3;
	// Brier ½·(0.04+0.04) + ½·(0.09+0.09)
	require.InDelta(t, 0.25, r.Big.ECE, 1e-12)
	require.InDelta(t, 0.13, r.Big.Brier, 1e-12)

	// Three regimes along the default grid 0, 0.05, …, 1.
	type regime struct {
		escalated                 int
		accuracy, ece, brier      float64
		decodeSeconds, tokens, vs float64
	}
	none := regime{0, 0.5,
		0.5*0.08 + 0.5*0.62,                             // bin 9: conf .92 acc 1; bin 6: conf .62 acc 0
		0.5*(0.0064+0.0064) + 0.5*(0.62*0.62+0.62*0.62), // right: 2·0.08²; wrong: 2·0.62²
		0.1, 10, 0.1}
	half := regime{5, 1,
		0.5*0.08 + 0.5*0.3, // bin 9: .92 right; bin 7: .7 right
		0.5*(0.0064+0.0064) + 0.5*(0.09+0.09),
		0.1 + 0.5*1, 10 + 0.5*100, 0.6}
	all := regime{10, 1, r.Big.ECE, r.Big.Brier, 1.1, 110, 1.1}
	check := func(p eval.CascadePoint, want regime) {
		t.Helper()
		require.Equal(t, want.escalated, p.Escalated, "%s < %.2f", p.Rule, p.Threshold)
		require.InDelta(t, float64(want.escalated)/10, p.EscalationRate, 1e-12)
		require.InDelta(t, want.accuracy, p.Accuracy, 1e-12, "%s < %.2f", p.Rule, p.Threshold)
		require.InDelta(t, want.ece, p.ECE, 1e-12, "%s < %.2f", p.Rule, p.Threshold)
		require.InDelta(t, want.brier, p.Brier, 1e-12, "%s < %.2f", p.Rule, p.Threshold)
		require.InDelta(t, want.decodeSeconds, p.Cost.DecodeSeconds, 1e-12)
		require.InDelta(t, want.tokens, p.Cost.Tokens, 1e-12)
		require.InDelta(t, want.vs, p.CostVsBig, 1e-12)
		require.Equal(t, want.accuracy >= 0.99, p.WithinTolerance)
	}
	require.Len(t, r.Top, 21)
	require.Len(t, r.Margin, 21)
	for _, p := range r.Top {
		require.Equal(t, eval.RuleTop, p.Rule)
		switch {
		case p.Threshold <= 0.62: // p_max 0.62 and 0.92 are not below t
			check(p, none)
		case p.Threshold <= 0.92: // 0.65 … 0.90: the unsure half goes up
			check(p, half)
		default: // 0.95, 1: everything goes up
			check(p, all)
		}
	}
	for _, p := range r.Margin {
		require.Equal(t, eval.RuleMargin, p.Rule)
		switch {
		case p.Threshold <= 0.24:
			check(p, none)
		case p.Threshold <= 0.84:
			check(p, half)
		default:
			check(p, all)
		}
	}
	// The cheapest within 0.01 of the big model: the lowest threshold that
	// escalates the unsure half.
	require.NotNil(t, r.Recommended)
	require.Equal(t, eval.RuleTop, r.Recommended.Rule)
	require.InDelta(t, 0.65, r.Recommended.Threshold, 1e-12)
	check(*r.Recommended, half)
	require.NotNil(t, r.RecommendedMargin)
	require.InDelta(t, 0.25, r.RecommendedMargin.Threshold, 1e-12)
	check(*r.RecommendedMargin, half)
}

func TestCascadeToleranceAndInvalidAnswers(t *testing.T) {
	t.Parallel()
	pairs := cascadeFixture()

	// Escalation is strictly below the threshold: at p_max = t a decision
	// stays with the small model.
	r := eval.Cascade(pairs, eval.CascadeOptions{Thresholds: []float64{0.62, 0.92}})
	require.Equal(t, 0, r.Top[0].Escalated)
	require.Equal(t, 5, r.Top[1].Escalated)

	// With a tolerance of 0.5 the small model alone (accuracy 0.5) is
	// enough: the cheapest threshold escalates nothing.
	r = eval.Cascade(pairs, eval.CascadeOptions{Tolerance: 0.5, Thresholds: []float64{0, 0.7, 1}})
	require.True(t, r.Small.WithinTolerance)
	require.NotNil(t, r.Recommended)
	require.Equal(t, 0.0, r.Recommended.Threshold)
	require.Equal(t, 0, r.Recommended.Escalated)

	// An error result of the small model always escalates; one of the big
	// model counts as wrong, so nothing reaches the big model's accuracy
	// unless that decision stays with the small model.
	pairs[0].Small.Probs = nil
	pairs[9].Big.Probs = nil
	r = eval.Cascade(pairs, eval.CascadeOptions{Tolerance: 0, Thresholds: []float64{0, 0.7, 1}})
	require.Equal(t, 9, r.SmallValid)
	require.Equal(t, 9, r.BigValid)
	require.InDelta(t, 0.9, r.Big.Accuracy, 1e-12)
	require.Equal(t, 1, r.Top[0].Escalated, "the invalid small answer goes up even at 0")
	require.InDelta(t, 0.5, r.Top[0].Accuracy, 1e-12) // d0 now right via big, d5..d9 wrong
	require.Equal(t, 6, r.Top[1].Escalated)
	require.InDelta(t, 0.9, r.Top[1].Accuracy, 1e-12) // d9's big answer is invalid
	require.NotNil(t, r.Recommended)
	require.InDelta(t, 0.7, r.Recommended.Threshold, 1e-12)

	// When no threshold is within tolerance there is no recommendation.
	pairs = cascadeFixture()
	for i := range pairs {
		pairs[i].Small.Probs = []float64{0.1, 0.9} // always wrong, confident
	}
	r = eval.Cascade(pairs, eval.CascadeOptions{Tolerance: 0.01, Thresholds: []float64{0, 0.5}})
	require.Nil(t, r.Recommended)
	var b bytes.Buffer
	r.WriteText(&b)
	require.Contains(t, b.String(), "recommended         none: no p_max threshold keeps the accuracy within 0.0100 of the big model's alone (1.0000)")
}

func TestPairUpAlignsByLineAndDecision(t *testing.T) {
	t.Parallel()
	res := func(line int, id string, p []float64, decodeMS float64, tokens int) decision.Result {
		return decision.Result{ID: id, Line: line, OptionIDs: []string{"a", "b"}, Probabilities: p,
			Timing: &decision.Timing{Decode: decodeMS}, Tokens: &decision.Tokens{Input: 2 * tokens, Evaluated: tokens}}
	}
	ex := func(gold int, p []float64) eval.Example {
		return eval.Example{Options: []string{"a", "b"}, Gold: gold, Probs: p}
	}
	small := eval.Matched{
		Results:  []decision.Result{res(1, "q", []float64{0.6, 0.4}, 100, 7), res(2, "q", []float64{0.3, 0.7}, 200, 8)},
		Examples: []eval.Example{ex(0, []float64{0.6, 0.4}), ex(1, []float64{0.3, 0.7})},
	}
	big := eval.Matched{ // the other order
		Results:  []decision.Result{res(2, "q", []float64{0.1, 0.9}, 2000, 80), res(1, "q", []float64{0.9, 0.1}, 1000, 70)},
		Examples: []eval.Example{ex(1, []float64{0.1, 0.9}), ex(0, []float64{0.9, 0.1})},
	}
	pairs, err := eval.PairUp(small, big)
	require.NoError(t, err)
	require.Len(t, pairs, 2)
	require.Equal(t, []float64{0.9, 0.1}, pairs[0].Big.Probs)
	require.Equal(t, eval.Cost{DecodeSeconds: 0.1, Tokens: 7}, pairs[0].SmallCost)
	require.Equal(t, eval.Cost{DecodeSeconds: 1, Tokens: 70}, pairs[0].BigCost)
	require.Equal(t, eval.Cost{DecodeSeconds: 2, Tokens: 80}, pairs[1].BigCost)

	big.Results[0].Line = 3
	_, err = eval.PairUp(small, big)
	require.ErrorContains(t, err, `line 2 decision "q": scored by the small model only`)
	big.Results[0].Line = 2
	big.Examples[0].Gold = 0
	_, err = eval.PairUp(small, big)
	require.ErrorContains(t, err, "different options")
	_, err = eval.PairUp(small, eval.Matched{})
	require.ErrorContains(t, err, "the small model has 2 labeled decisions, the big one 0")
}

func TestCascadeTextAndSVG(t *testing.T) {
	t.Parallel()
	r := eval.Cascade(cascadeFixture(), eval.CascadeOptions{Tolerance: 0.01, Thresholds: []float64{0, 0.65, 0.95}})
	r.SmallModel, r.BigModel = "s.gguf", "b.gguf"
	var b bytes.Buffer
	r.WriteText(&b)
	want := `cascade             small s.gguf, big b.gguf
labeled decisions   10 (valid: small 10, big 10; skipped, gold unknown: 0; without gold: 0)
tolerance           0.0100 (* marks accuracy ≥ 0.9900: the big model's alone minus the tolerance)

  answered by escalated    rate accuracy     ECE   Brier decode s/dec tokens/dec  vs big
  small alone         -       -   0.5000  0.3500  0.3908      0.10000       10.0  0.1000
  big alone           -       -   1.0000  0.2500  0.1300      1.00000      100.0  1.0000 *

escalate when p_max < t
  t           escalated    rate accuracy     ECE   Brier decode s/dec tokens/dec  vs big
  0.00                0  0.0000   0.5000  0.3500  0.3908      0.10000       10.0  0.1000
  0.65                5  0.5000   1.0000  0.1900  0.0964      0.60000       60.0  0.6000 * recommended
  0.95               10  1.0000   1.0000  0.2500  0.1300      1.10000      110.0  1.1000 *

escalate when margin < m
  m           escalated    rate accuracy     ECE   Brier decode s/dec tokens/dec  vs big
  0.00                0  0.0000   0.5000  0.3500  0.3908      0.10000       10.0  0.1000
  0.65                5  0.5000   1.0000  0.1900  0.0964      0.60000       60.0  0.6000 * recommended
  0.95               10  1.0000   1.0000  0.2500  0.1300      1.10000      110.0  1.1000 *

recommended         escalate when p_max < 0.65: 50.0% escalated, accuracy 1.0000 (big alone 1.0000), 0.60000 decode s and 60.0 tokens a decision (big alone 1.00000 and 100.0; 0.60× its decode cost)
recommended, margin escalate when margin < 0.65: 50.0% escalated, accuracy 1.0000 (big alone 1.0000), 0.60000 decode s and 60.0 tokens a decision (big alone 1.00000 and 100.0; 0.60× its decode cost)
`
	require.Equal(t, want, b.String())

	b.Reset()
	require.NoError(t, r.SVG(&b, "Cascade: s → b"))
	svg := b.String()
	require.NoError(t, xml.Unmarshal([]byte(svg), new(struct{})), "well-formed XML")
	require.Equal(t, 2, strings.Count(svg, "<polyline"), "one line per rule")
	require.Equal(t, 6+2+1, strings.Count(svg, "<circle cx="), "a dot per threshold and rule, two rings, the legend's")
	require.Contains(t, svg, "recommended p_max &lt; 0.65: 50.0% escalated, accuracy 1.0000 at 0.60× the big model's decode cost")
	require.Contains(t, svg, "p_max &lt; 0.95: 10 escalated (100.0%)")
}
