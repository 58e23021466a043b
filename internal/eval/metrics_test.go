package eval_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/internal/eval"
)

// fixture: four labeled decisions, worked by hand in the comments below.
func fixture() []eval.Example {
	return []eval.Example{
		{Family: "f1", Type: "noul", Options: []string{"a", "b"}, Gold: 0, Probs: []float64{0.8, 0.2}, LatencyMS: 10},             // right, top .8
		{Family: "f1", Type: "noul", Options: []string{"a", "b"}, Gold: 1, Probs: []float64{0.7, 0.3}, LatencyMS: 20},             // wrong, top .7
		{Family: "f2", Type: "choice", Options: []string{"a", "b", "c"}, Gold: 2, Probs: []float64{0.1, 0.2, 0.7}, LatencyMS: 30}, // right, top .7
		{Family: "f2", Type: "noul", Options: []string{"a", "b"}, Gold: 0, LatencyMS: 40},                                         // invalid
	}
}

func TestMetricsAgainstHandComputedValues(t *testing.T) {
	t.Parallel()
	ex := fixture()
	r := eval.Evaluate(ex, eval.Options{Thresholds: []float64{0, 0.75}})
	require.Equal(t, 4, r.Labeled)
	require.Equal(t, 3, r.Valid)
	require.InDelta(t, 0.75, r.ValidRate, 1e-12)
	require.InDelta(t, 0.5, r.Accuracy, 1e-12) // 2 right of 4 (invalid = wrong)
	// classes a: 1/2, b: 0/1, c: 1/1 → (0.5+0+1)/3
	require.InDelta(t, 0.5, r.BalancedAccuracy, 1e-12)
	// bin 7: n=2, conf .7, acc .5; bin 8: n=1, conf .8, acc 1 → 2/3·.2 + 1/3·.2
	require.InDelta(t, 0.2, r.ECE, 1e-12)
	require.Len(t, r.Bins, 10)
	require.Equal(t, 2, r.Bins[7].Count)
	require.InDelta(t, 0.7, r.Bins[7].Confidence, 1e-12)
	require.InDelta(t, 0.5, r.Bins[7].Accuracy, 1e-12)
	require.Equal(t, 1, r.Bins[8].Count)
	// (.04+.04) + (.49+.49) + (.01+.04+.09) = 1.2, over 3
	require.InDelta(t, 0.4, r.Brier, 1e-12)
	require.InDelta(t, -(math.Log(0.8)+math.Log(0.3)+math.Log(0.7))/3, r.NLL, 1e-12)
	// chosen positions 0,0,2; gold 0,1,2 → rates [2/3,0,1/3] vs [1/3,1/3,1/3]
	require.InDelta(t, 1.0/3, r.PositionBias, 1e-12)
	require.Equal(t, []int{2, 0, 1}, []int{r.Positions[0].Chosen, r.Positions[1].Chosen, r.Positions[2].Chosen})
	require.Equal(t, []int{1, 1, 1}, []int{r.Positions[0].Gold, r.Positions[1].Gold, r.Positions[2].Gold})
	require.Equal(t, []int{3, 3, 1}, []int{r.Positions[0].Offered, r.Positions[1].Offered, r.Positions[2].Offered})
	require.Equal(t, 3, r.Coverage[0].Answered)
	require.InDelta(t, 0.75, r.Coverage[0].Coverage, 1e-12)
	require.InDelta(t, 2.0/3, r.Coverage[0].Accuracy, 1e-12)
	require.Equal(t, 1, r.Coverage[1].Answered)
	require.InDelta(t, 0.25, r.Coverage[1].Coverage, 1e-12)
	require.InDelta(t, 1.0, r.Coverage[1].Accuracy, 1e-12)
	require.InDelta(t, 20.0, r.LatencyP50, 1e-12)
	require.InDelta(t, 40.0, r.LatencyP95, 1e-12)

	byKey := map[string]eval.BreakdownRow{}
	for _, b := range r.Breakdown {
		byKey[b.Family+"/"+b.Type] = b
	}
	require.Equal(t, 2, byKey["f1/noul"].Labeled)
	require.InDelta(t, 0.5, byKey["f1/noul"].Accuracy, 1e-12)
	require.InDelta(t, 0.5, byKey["f2/*"].Accuracy, 1e-12)
	require.InDelta(t, 0.5, byKey["f2/*"].ValidRate, 1e-12)
	require.Equal(t, 3, byKey["*/noul"].Labeled)
	require.InDelta(t, 1.0/3, byKey["*/noul"].Accuracy, 1e-12)
	require.Equal(t, "*", r.Breakdown[len(r.Breakdown)-1].Family)
}

func TestNLLIsFiniteForAZeroGoldProbability(t *testing.T) {
	t.Parallel()
	ex := []eval.Example{{Options: []string{"a", "b"}, Gold: 1, Probs: []float64{1, 0}}}
	require.InDelta(t, -math.Log(eval.NLLFloor), eval.NLL(ex), 1e-9)
}
