package eval

import (
	"math"
	"sort"
)

// Example is one labeled decision and what the model answered.
type Example struct {
	// Family groups examples in the breakdown (a JevBench domain, or the
	// decision kind).
	Family string
	// Type is the question type (noul, choice, score; "decision" for SemIf).
	Type string
	// Options are the option ids in order.
	Options []string
	// Gold is the index of the gold option in Options.
	Gold int
	// Probs is the returned distribution; nil when the answer is invalid
	// (an error result).
	Probs []float64
	// LatencyMS is the decision's total time, when known.
	LatencyMS float64
}

// Valid reports whether the example has a usable distribution.
func (e *Example) Valid() bool { return len(e.Probs) == len(e.Options) && len(e.Probs) > 0 }

// Argmax returns the index of the highest probability (the first of ties).
func Argmax(p []float64) int {
	best := 0
	for i := range p {
		if p[i] > p[best] {
			best = i
		}
	}
	return best
}

// Bin is one equal-width confidence bin of the reliability diagram.
type Bin struct {
	Lo, Hi float64
	// Count of valid examples whose top probability falls in [Lo, Hi)
	// (the last bin includes 1).
	Count int `json:"count"`
	// Confidence is their mean top probability; Accuracy how many were right.
	Confidence float64 `json:"confidence"`
	Accuracy   float64 `json:"accuracy"`
}

// ECE is the expected calibration error over equal-width bins of the top
// probability: Σ_b (n_b/N)·|accuracy_b − confidence_b|. It also returns the
// bins (empty ones included).
func ECE(ex []Example, bins int) (float64, []Bin) {
	if bins < 1 {
		bins = 10
	}
	out := make([]Bin, bins)
	correct := make([]int, bins)
	conf := make([]float64, bins)
	n := 0
	for i := range out {
		out[i].Lo, out[i].Hi = float64(i)/float64(bins), float64(i+1)/float64(bins)
	}
	for i := range ex {
		e := &ex[i]
		if !e.Valid() {
			continue
		}
		top := Argmax(e.Probs)
		p := e.Probs[top]
		b := min(int(p*float64(bins)), bins-1)
		out[b].Count++
		conf[b] += p
		if top == e.Gold {
			correct[b]++
		}
		n++
	}
	ece := 0.0
	for b := range out {
		if out[b].Count == 0 {
			continue
		}
		c := float64(out[b].Count)
		out[b].Confidence = conf[b] / c
		out[b].Accuracy = float64(correct[b]) / c
		ece += c / float64(n) * math.Abs(out[b].Accuracy-out[b].Confidence)
	}
	return ece, out
}

// Brier is the mean over valid examples of Σ_i (p_i − y_i)², y the one-hot
// gold vector (0 for a perfect answer, 2 for a confident wrong one).
func Brier(ex []Example) float64 {
	s, n := 0.0, 0
	for i := range ex {
		e := &ex[i]
		if !e.Valid() {
			continue
		}
		for j, p := range e.Probs {
			y := 0.0
			if j == e.Gold {
				y = 1
			}
			s += (p - y) * (p - y)
		}
		n++
	}
	return div(s, n)
}

// NLLFloor bounds −log p so that one zero probability cannot make the mean
// infinite.
const NLLFloor = 1e-12

// NLL is the mean negative log-probability of the gold option over valid
// examples (natural log; p floored at NLLFloor).
func NLL(ex []Example) float64 {
	s, n := 0.0, 0
	for i := range ex {
		e := &ex[i]
		if !e.Valid() {
			continue
		}
		s -= math.Log(math.Max(e.Probs[e.Gold], NLLFloor))
		n++
	}
	return div(s, n)
}

// Position is one option position's share of answers and of gold labels.
type Position struct {
	// Index is the 0-based option position (0 = "A").
	Index int `json:"index"`
	// Offered counts valid examples with at least Index+1 options.
	Offered int `json:"offered"`
	// Chosen and Gold count how often the position was the argmax and the
	// gold answer.
	Chosen int `json:"chosen"`
	Gold   int `json:"gold"`
	// ChosenRate and GoldRate divide them by the number of valid examples.
	ChosenRate float64 `json:"chosen_rate"`
	GoldRate   float64 `json:"gold_rate"`
}

// PositionBias counts argmax and gold positions over valid examples. The
// scalar is the total variation distance ½·Σ|chosen_rate − gold_rate|: 0
// when answers land on positions as often as gold does.
func PositionBias(ex []Example) (float64, []Position) {
	var pos []Position
	n := 0
	for i := range ex {
		e := &ex[i]
		if !e.Valid() {
			continue
		}
		n++
		for len(pos) < len(e.Options) {
			pos = append(pos, Position{Index: len(pos)})
		}
		for j := range e.Options {
			pos[j].Offered++
		}
		pos[Argmax(e.Probs)].Chosen++
		pos[e.Gold].Gold++
	}
	tv := 0.0
	for j := range pos {
		pos[j].ChosenRate = div(float64(pos[j].Chosen), n)
		pos[j].GoldRate = div(float64(pos[j].Gold), n)
		tv += math.Abs(pos[j].ChosenRate - pos[j].GoldRate)
	}
	return tv / 2, pos
}

// CoverageRow is the share of examples answered at a probability threshold
// and their accuracy.
type CoverageRow struct {
	Threshold float64 `json:"threshold"`
	// Answered counts valid examples whose top probability is ≥ Threshold.
	Answered int `json:"answered"`
	// Coverage = Answered / all labeled examples (invalid ones included).
	Coverage float64 `json:"coverage"`
	// Accuracy among the answered (0 when none).
	Accuracy float64 `json:"accuracy"`
}

// Coverage computes the coverage-versus-accuracy table over thresholds.
func Coverage(ex []Example, thresholds []float64) []CoverageRow {
	out := make([]CoverageRow, len(thresholds))
	for k, t := range thresholds {
		right := 0
		out[k].Threshold = t
		for i := range ex {
			e := &ex[i]
			if !e.Valid() {
				continue
			}
			top := Argmax(e.Probs)
			if e.Probs[top] >= t {
				out[k].Answered++
				if top == e.Gold {
					right++
				}
			}
		}
		out[k].Coverage = div(float64(out[k].Answered), len(ex))
		out[k].Accuracy = div(float64(right), out[k].Answered)
	}
	return out
}

// Accuracy is the share of examples whose argmax is gold; invalid answers
// count as wrong.
func Accuracy(ex []Example) float64 {
	right := 0
	for i := range ex {
		if ex[i].Valid() && Argmax(ex[i].Probs) == ex[i].Gold {
			right++
		}
	}
	return div(float64(right), len(ex))
}

// BalancedAccuracy is the mean, over gold classes (the gold option's id:
// "true", "false", a choice id, a score level), of the share of that
// class's examples answered right (invalid = wrong).
func BalancedAccuracy(ex []Example) float64 {
	type tally struct{ n, right int }
	by := map[string]*tally{}
	for i := range ex {
		e := &ex[i]
		c := e.Options[e.Gold]
		t := by[c]
		if t == nil {
			t = &tally{}
			by[c] = t
		}
		t.n++
		if e.Valid() && Argmax(e.Probs) == e.Gold {
			t.right++
		}
	}
	s := 0.0
	for _, t := range by {
		s += float64(t.right) / float64(t.n)
	}
	return div(s, len(by))
}

// Percentile returns the p-th percentile (nearest rank) of xs.
func Percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	k := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[max(0, min(k, len(s)-1))]
}

func div(a float64, n int) float64 {
	if n == 0 {
		return 0
	}
	return a / float64(n)
}
