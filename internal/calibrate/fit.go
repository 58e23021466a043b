package calibrate

import (
	"math"
	"math/rand/v2"
	"sort"

	"github.com/verdict-dev/verdict/engine"
	"github.com/verdict-dev/verdict/internal/eval"
)

// Sample is one labeled decision's raw option logits (temperature 1) and
// the index of its gold option.
type Sample struct {
	Logits []float64
	Gold   int
}

// Probs returns softmax(logits/T), the engine's own readout.
func Probs(logits []float64, t float64) []float64 { return engine.Softmax(logits, t) }

// NLL is the mean negative log-likelihood of the gold options at
// temperature t.
func NLL(ss []Sample, t float64) float64 {
	if len(ss) == 0 {
		return 0
	}
	sum := 0.0
	for _, s := range ss {
		m := math.Inf(-1)
		for _, x := range s.Logits {
			m = math.Max(m, x/t)
		}
		z := 0.0
		for _, x := range s.Logits {
			z += math.Exp(x/t - m)
		}
		sum += m + math.Log(z) - s.Logits[s.Gold]/t
	}
	return sum / float64(len(ss))
}

// Temperature bounds of the fit.
const (
	MinTemperature float64 = 0.01
	MaxTemperature float64 = 100
)

// FitTemperature returns the temperature in [MinTemperature,
// MaxTemperature] that minimizes NLL. The NLL is convex in 1/T, so a
// golden-section search over log(1/T) finds its minimum; 1 when ss is empty.
func FitTemperature(ss []Sample) float64 {
	if len(ss) == 0 {
		return 1
	}
	f := func(u float64) float64 { return NLL(ss, 1/math.Exp(u)) }
	a, b := math.Log(1/MaxTemperature), math.Log(1/MinTemperature)
	g := (math.Sqrt(5) - 1) / 2
	c, d := b-g*(b-a), a+g*(b-a)
	fc, fd := f(c), f(d)
	for range 200 {
		if b-a < 1e-10 {
			break
		}
		if fc < fd {
			b, d, fd = d, c, fc
			c = b - g*(b-a)
			fc = f(c)
		} else {
			a, c, fc = c, d, fd
			d = a + g*(b-a)
			fd = f(d)
		}
	}
	return 1 / math.Exp((a+b)/2)
}

// examples makes eval examples of samples at temperature t.
func examples(ss []Sample, t float64) []eval.Example {
	ex := make([]eval.Example, len(ss))
	for i, s := range ss {
		ex[i] = eval.Example{Options: make([]string, len(s.Logits)), Gold: s.Gold, Probs: Probs(s.Logits, t)}
	}
	return ex
}

// CrossValidation is the k-fold out-of-fold check of a temperature fit.
type CrossValidation struct {
	Folds int `json:"folds"`
	// ECEBefore is the ECE at temperature 1; ECEAfter the ECE of every
	// sample scored at the temperature fitted on the other folds.
	ECEBefore float64 `json:"ece_before"`
	ECEAfter  float64 `json:"ece_after"`
	// NLLBefore and NLLAfter likewise.
	NLLBefore float64 `json:"nll_before"`
	NLLAfter  float64 `json:"nll_after"`
	// FoldTemperatures are the temperatures fitted without each fold.
	FoldTemperatures []float64 `json:"fold_temperatures"`
}

// CrossValidate splits ss into k folds (a fixed shuffle, so runs repeat),
// fits a temperature on each k−1 and scores the held-out fold with it.
func CrossValidate(ss []Sample, k, bins int) CrossValidation {
	if k < 2 {
		k = 2
	}
	k = min(k, max(2, len(ss)))
	perm := rand.New(rand.NewPCG(1, 2)).Perm(len(ss))
	fold := make([]int, len(ss))
	for i, p := range perm {
		fold[p] = i % k
	}
	cv := CrossValidation{Folds: k}
	oof := make([]eval.Example, len(ss))
	nll := 0.0
	for f := range k {
		var train, test []int
		for i := range ss {
			if fold[i] == f {
				test = append(test, i)
			} else {
				train = append(train, i)
			}
		}
		tr := make([]Sample, len(train))
		for j, i := range train {
			tr[j] = ss[i]
		}
		t := FitTemperature(tr)
		cv.FoldTemperatures = append(cv.FoldTemperatures, t)
		for _, i := range test {
			oof[i] = examples(ss[i:i+1], t)[0]
			nll += NLL(ss[i:i+1], t)
		}
	}
	cv.ECEBefore, _ = eval.ECE(examples(ss, 1), bins)
	cv.ECEAfter, _ = eval.ECE(oof, bins)
	cv.NLLBefore = NLL(ss, 1)
	if len(ss) > 0 {
		cv.NLLAfter = nll / float64(len(ss))
	}
	return cv
}

// Threshold is the smallest min_probability that reaches an accuracy.
type Threshold struct {
	// Target accuracy asked for.
	Target float64 `json:"target_accuracy"`
	// MinProbability is the threshold; Reached false when no threshold gets
	// there (then MinProbability is 0 and the rest are unset).
	MinProbability float64 `json:"min_probability"`
	Reached        bool    `json:"reached"`
	// Accuracy and Coverage of the decisions at or above it.
	Accuracy float64 `json:"accuracy"`
	Coverage float64 `json:"coverage"`
}

// Thresholds finds, for each target accuracy, the smallest threshold t on
// the top probability (at temperature temp) such that the decisions with
// p_max ≥ t are right at least that often, and the share they cover. A
// threshold must keep at least 1% of the decisions (one, below 100), so one
// lucky decision does not make a suggestion.
func Thresholds(ss []Sample, temp float64, targets []float64) []Threshold {
	type pt struct {
		p     float64
		right bool
	}
	pts := make([]pt, len(ss))
	for i, s := range ss {
		p := Probs(s.Logits, temp)
		top := eval.Argmax(p)
		pts[i] = pt{p[top], top == s.Gold}
	}
	sort.Slice(pts, func(i, j int) bool { return pts[i].p > pts[j].p })
	out := make([]Threshold, len(targets))
	for ti, target := range targets {
		out[ti].Target = target
		right := 0
		for k := range pts {
			if pts[k].right {
				right++
			}
			if k+1 < len(pts) && pts[k+1].p == pts[k].p {
				continue // a threshold keeps or drops ties together
			}
			if k+1 < max(1, len(pts)/100) {
				continue
			}
			acc := float64(right) / float64(k+1)
			if acc >= target {
				out[ti] = Threshold{Target: target, MinProbability: pts[k].p, Reached: true, Accuracy: acc, Coverage: float64(k+1) / float64(len(pts))}
			}
		}
	}
	return out
}
